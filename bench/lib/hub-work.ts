// A lease's work inside the Hub, without HTTP: a whole Hub (SQLite store, informer,
// scheduler, controllers) runs in this process, and W simulated Runners call its scheduler
// directly: claim(limit), then start and complete each task, as the lease scenario's Runners
// do over HTTP. No client, socket or JSON reply shares the CPU: what is measured is the store,
// the scheduler, the informer and the controllers, which is where a change to them shows.
import { rmSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { Hub } from "../../src/hub.ts";
import { parseClaim, parseComplete, parseDispatch, parseRegister, parseStart } from "../../src/protocol/parse.ts";
import { tempDir, waitQuiet } from "./hub.ts";
import { noopTask, registerBody } from "./workload.ts";
import { getCondition, type Task } from "../../src/resources/types.ts";

export type HubWork = {
  leases: number;
  wallMs: number;
  /** Process CPU (every thread: the event loop, SQLite's checkpointer, libuv's fsyncs, V8's GC helpers). */
  userUs: number;
  systemUs: number;
  /** Time the event loop ran something (its utilization), the part of the CPU on the main thread. */
  loopBusyUs: number;
  /** Store revisions (writes committed together count once) and WAL flushes over the load. */
  revisions: number;
  flushes: number;
};

export async function measureHubWork(o: { tasks: number; runners: number; claimLimit: number }): Promise<HubWork> {
  const dir = tempDir("hub-work");
  const hub = await Hub.start({ dataDir: dir, port: 0, logLevel: "silent" });
  try {
    const s = hub.scheduler;
    for (let i = 0; i < o.tasks; i += 1000) {
      const n = Math.min(1000, o.tasks - i);
      const tasks = Array.from({ length: n }, (_, j) => noopTask("hw", i + j));
      await s.dispatch(parseDispatch({ schema_version: 1, operator: "bench", tasks }));
    }
    const ids = Array.from({ length: o.runners }, (_, i) => `hw-runner-${String(i).padStart(3, "0")}`);
    for (const id of ids) await s.register(parseRegister(registerBody(id, o.claimLimit)));
    // The conditions pass over the new tasks and workers is done, as in the lease scenario
    // (waitConditions): every task says what the registered workers make of it, then no write
    // for a second. A pass writes a bounded batch and spaces itself, so quiet alone can come
    // between two passes, and the rest of the backlog would be measured as leasing.
    const t0c = performance.now();
    for (;;) {
      const owed = hub.cache.list<Task>("Task").filter((t) => {
        const reason = getCondition(t.status?.conditions, "Admitted")?.reason;
        return reason === undefined || reason === "NoWorkers";
      }).length;
      if (owed === 0) break;
      if (performance.now() - t0c > 120_000)
        throw new Error(`${owed} tasks still had no settled Admitted condition after 120 s`);
      await new Promise((res) => setTimeout(res, 100));
    }
    const quiet = await waitQuiet(() => hub.store.revision(), 1000, 120_000);
    if (!quiet.settled) throw new Error("the Hub did not fall quiet within 120 s");

    const rev0 = await hub.store.revision();
    const flushes0 = hub.store.commitStats().commits;
    const elu0 = performance.eventLoopUtilization();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    let completed = 0;
    let leases = 0;
    const runner = async (worker_id: string) => {
      while (completed < o.tasks) {
        const r = await s.claim(parseClaim({ worker_id, limit: o.claimLimit, lease_seconds: 600 }));
        if (!r.tasks.length) {
          await new Promise((res) => setTimeout(res, 5));
          continue;
        }
        leases += r.tasks.length;
        for (const t of r.tasks) {
          await s.start(parseStart({ worker_id, task_id: t.task_id }));
          await s.complete(parseComplete({ worker_id, task_id: t.task_id, result: {}, upload: {} }));
          completed++;
        }
      }
    };
    await Promise.all(ids.map(runner));
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const elu = performance.eventLoopUtilization(elu0);
    if (leases !== o.tasks) throw new Error(`leased ${leases} of ${o.tasks} tasks`);
    return {
      leases,
      wallMs,
      userUs: cpu.user,
      systemUs: cpu.system,
      loopBusyUs: elu.active * 1000,
      revisions: (await hub.store.revision()) - rev0,
      flushes: hub.store.commitStats().commits - flushes0,
    };
  } finally {
    await hub.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
