// Microbenchmarks of the pieces under every request: one admission decision, and one
// durable store create and one read; the SQLite store under writes that never pause,
// where the WAL is started over between two groups (the event loop's longest stall); a
// lease's work inside the Hub without HTTP (hub-work.ts); and the Event GC's pass on etcd,
// where the Events expire by their leases.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { admit, taskView, workerView } from "../../src/admission/index.ts";
import type { Task, Worker } from "../../src/resources/types.ts";
import { EventGc } from "../../src/reconciler/event-gc.ts";
import { EVENT_TTL_SECONDS, EventRecorder } from "../../src/reconciler/events.ts";
import { openEtcdStore } from "../../src/store/etcd.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { etcdMissing, startEtcd } from "../../test/support/etcd.ts";
import { tempDir } from "../lib/hub.ts";
import type { HubWork } from "../lib/hub-work.ts";
import { resultOf, spawnScript, stop } from "../lib/proc.ts";
import { cell, type Table } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { seedTask, seedWorker, timeReps } from "../lib/seed.ts";
import { median, percentile } from "../lib/stats.ts";

export const microScenario: Scenario = {
  name: "micro",
  summary:
    "one admission decision; one durable store create and one read; the store under writes that never pause; a lease's Hub work without HTTP",
  async run(o) {
    const reps = o.quick ? 5 : 31;
    const lease = { cpu_millis: 500, memory_mb: 1024, disk_mb: 0, gpu_count: 0, gpu_types: [] };
    const w = workerView(
      seedWorker(1) as unknown as Worker,
      Array.from({ length: 16 }, (_, i) => ({ task: `l${i}`, placement: "shared" as const, reservation: lease })),
      { ready: true, reported_active: 3 },
    );
    const t = taskView(seedTask(3, 10) as unknown as Task);
    const admitUs = median(timeReps(() => void admit(t, w), reps, 2000));

    const dir = tempDir("micro");
    const store = openSqliteStore(join(dir, "loom.db"));
    const creates: number[] = [];
    try {
      for (let i = 0; i < (o.quick ? 20 : 200); i++) {
        const t0 = process.hrtime.bigint();
        await store.create(seedTask(i, 10));
        creates.push(Number(process.hrtime.bigint() - t0) / 1e3);
      }
      const getUs = median(timeReps(() => void store.get("Task", "t0000010"), reps, 200));
      return [
        {
          scenario: "micro",
          title: "microbenchmarks, in-process",
          columns: ["operation", "median", "p99"],
          rows: [
            ["admit(): one task × one worker holding 16 leases", cell(admitUs, "µs"), ""],
            [
              "store: create one Task (validated, durable commit)",
              cell(median(creates), "µs"),
              cell(percentile(creates, 99), "µs"),
            ],
            ["store: get one Task", cell(getUs, "µs"), ""],
          ],
        },
        await steadyWrites(o.quick ? 1 : 10),
        await hubWork(o.quick),
        ...(etcdMissing ? [] : [await eventGcPass(o.quick ? 200 : 5000, o.quick ? 2 : 7)]),
      ];
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

/**
 * 16 writers rewrite 4,000 objects of about 2 KB, each its next write as soon as the last is
 * answered, for `seconds`: a group is open nearly all the time, so the WAL starts over only
 * through the store's finish between two groups (sqlite.ts). Reports the writes, the
 * finishes, the longest of them and the event loop's longest stall.
 */
async function steadyWrites(seconds: number): Promise<Table> {
  const dir = tempDir("micro-steady");
  const store = openSqliteStore(join(dir, "loom.db"));
  try {
    const pad = "x".repeat(1800);
    const objects = 4000;
    const event = (i: number, n: number) => ({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Event",
      metadata: { name: `e${i}`, annotations: { pad, n: String(n) } },
    });
    for (let i = 0; i < objects; i += 500)
      await store.txn(Array.from({ length: 500 }, (_, k) => ({ op: "create" as const, object: event(i + k, 0) })));
    const loop = monitorEventLoopDelay({ resolution: 5 });
    loop.enable();
    const t0 = performance.now();
    let writes = 0;
    const writer = async (w: number) => {
      for (let k = 0; performance.now() - t0 < seconds * 1000; k++) {
        await store.update(event(w + 16 * (k % (objects / 16)), k));
        writes++;
      }
    };
    await Promise.all(Array.from({ length: 16 }, (_, w) => writer(w)));
    loop.disable();
    const elapsed = (performance.now() - t0) / 1000;
    const c = store.checkpointStats();
    return {
      scenario: "micro",
      title: `the SQLite store under writes that never pause, 16 writers, 4,000 objects of 2 KB, ${seconds} s`,
      columns: [
        "writes/s",
        "background rounds",
        "WAL started over",
        "longest start-over pause",
        "longest event-loop stall",
      ],
      rows: [
        [
          cell(writes / elapsed),
          String(c.rounds),
          String(c.finished),
          cell(c.longestFinishMs, "ms"),
          cell(loop.max / 1e6, "ms"),
        ],
      ],
    };
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A lease's work inside the Hub, without HTTP (hub-work.ts), three times in a fresh process each (once in quick mode). */
async function hubWork(quick: boolean): Promise<Table> {
  const cfg = quick ? { tasks: 400, runners: 8, claimLimit: 4 } : { tasks: 4000, runners: 32, claimLimit: 4 };
  const runs: HubWork[] = [];
  for (let i = 0; i < (quick ? 1 : 3); i++) {
    // A process each: in one process, every run found the lease path better compiled than
    // the run before (600, 450, 370 µs a lease), so runs measured the JIT, not the Hub.
    const child = spawnScript("procs/hub-work.ts", { LOOM_BENCH_HUB_WORK: JSON.stringify(cfg) });
    try {
      runs.push(await resultOf<HubWork>(child, 600_000));
    } finally {
      await stop(child);
    }
  }
  const per = (w: HubWork) => ({
    leasesPerS: (w.leases / w.wallMs) * 1000,
    cpu: (w.userUs + w.systemUs) / w.leases,
    user: w.userUs / w.leases,
    system: w.systemUs / w.leases,
    loop: w.loopBusyUs / w.leases,
    revisions: w.revisions / w.leases,
    flushes: w.flushes / w.leases,
  });
  const figures = runs.map(per);
  const row = (label: string, f: ReturnType<typeof per>) => [
    label,
    cell(f.leasesPerS),
    cell(f.cpu, "µs"),
    cell(f.user, "µs"),
    cell(f.system, "µs"),
    cell(f.loop, "µs"),
    f.revisions.toFixed(2),
    f.flushes.toFixed(2),
  ];
  const med = (k: keyof ReturnType<typeof per>) => median(figures.map((f) => f[k]));
  const medians = {
    leasesPerS: med("leasesPerS"),
    cpu: med("cpu"),
    user: med("user"),
    system: med("system"),
    loop: med("loop"),
    revisions: med("revisions"),
    flushes: med("flushes"),
  };
  return {
    scenario: "micro",
    title: `a lease's work inside the Hub, no HTTP: ${cfg.runners} Runners' claim(${cfg.claimLimit}), start, complete through the scheduler, ${cfg.tasks.toLocaleString("en")} noop tasks`,
    columns: [
      "run",
      "leases/s",
      "CPU per lease",
      "user",
      "system",
      "event loop busy per lease",
      "store revisions per lease",
      "WAL flushes per lease",
    ],
    rows: [...figures.map((f, i) => row(`run ${i + 1}`, f)), ...(figures.length > 1 ? [row("median", medians)] : [])],
    notes: [
      "a whole Hub (SQLite store, informer, scheduler, controllers, V8's default flags) in a process of its own for each run; the Runners run in it too and call its scheduler directly, so no socket, request parsing or reply encoding is counted",
      "CPU is the process's over the load, every thread: the event loop, SQLite's background checkpoints, libuv's fsyncs and V8's GC helpers; system is the kernel's time for it, the WAL's writes and fsyncs among it",
      "event loop busy is its utilization over the load: the part of the CPU on the main thread",
      "no client shares the CPU: on a quiet spell of this machine six runs spread over 569-614 µs a lease, but a busy spell spreads them as far as the lease scenario's (608-958 µs in one run of this table); compare two commits with npm run bench:compare, which runs both side by side",
    ],
  };
}

/**
 * One Event GC pass on etcd holding `events` Events, as the leader runs it every 10 s: on a
 * store whose Events carry leases it only counts them; on one without (and on SQLite, and in
 * the backstop pass) it lists and decodes them all. The Hub's CPU and its event loop's
 * longest stall per pass, median of `passes`; etcd's own CPU is not counted.
 */
async function eventGcPass(events: number, passes: number): Promise<Table> {
  const etcd = await startEtcd(1);
  const prefix = "/micro-event-gc";
  const expiring = await openEtcdStore({ endpoints: etcd.endpoints, prefix, ttlSeconds: { Event: EVENT_TTL_SECONDS } });
  const plain = await openEtcdStore({ endpoints: etcd.endpoints, prefix });
  try {
    const rec = new EventRecorder(expiring, {
      maxEvents: events,
      flushMs: 10,
      budget: { perSecond: Infinity, burst: Infinity },
    });
    for (let i = 0; i < events; i++)
      rec.record({
        object: { apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name: `task-${i}` } },
        type: "Normal",
        reason: "LeaseGranted",
        message: `leased to worker-${i % 50} (epoch 1)`,
      });
    await rec.flush();
    const options = { maxEvents: events, ttlMs: EVENT_TTL_SECONDS * 1000, everyMs: 10_000 };
    const measure = async (gc: EventGc) => {
      const cpu: number[] = [];
      const stall: number[] = [];
      await gc.reconcile(); // untimed: the code's first run, and the garbage of what ran before
      for (let i = 0; i < passes; i++) {
        // Apart, as the leader's passes are (10 s): one pass's garbage is not collected in the next.
        await new Promise((r) => setTimeout(r, 200));
        const loop = monitorEventLoopDelay({ resolution: 1 });
        loop.enable();
        const c0 = process.cpuUsage();
        const r = await gc.reconcile();
        const c = process.cpuUsage(c0);
        loop.disable();
        if (r?.writes) throw new Error(`the Event GC dropped ${r.writes} Events it should have kept`);
        cpu.push((c.user + c.system) / 1000);
        stall.push(loop.max / 1e6);
      }
      return [cell(median(cpu), "ms"), cell(median(stall), "ms")];
    };
    return {
      scenario: "micro",
      title: `one Event GC pass on etcd, ${events.toLocaleString("en")} Events, median of ${passes} passes`,
      columns: ["pass", "Hub CPU", "longest event-loop stall"],
      rows: [
        ["Events with leases (etcd expires them): count only", ...(await measure(new EventGc(expiring, options)))],
        ["Events without (the backstop pass, and SQLite's): list all", ...(await measure(new EventGc(plain, options)))],
      ],
      notes: [
        "the stall is the event loop's longest delay during the pass, sampled every millisecond",
        "etcd's own CPU is not counted; the list reads and decodes every Event, the count reads none",
        "the leader runs a pass every 10 s; on etcd every 30th pass lists all (Events an older Hub stored without a lease)",
      ],
    };
  } finally {
    await expiring.close();
    await plain.close();
    await etcd.stop();
  }
}
