// `npm run bench`: Loom's hot paths, measured. Figures are medians of repeated runs; the
// comparisons that matter are ratios within one run (claim cost at 1k vs 100k queued
// tasks), because this machine is shared and absolute times drift.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { admit, taskView, workerView } from "../src/admission/index.ts";
import { pickForWorker } from "../src/scheduler/claim.ts";
import { Scheduler } from "../src/scheduler/scheduler.ts";
import { AdmissionConditions } from "../src/reconciler/admission-conditions.ts";
import { Informer } from "../src/store/cache.ts";
import { openSqliteStore } from "../src/store/sqlite.ts";
import type { StoredObject, TxnOp } from "../src/store/store.ts";
import type { Task, Worker } from "../src/resources/types.ts";

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };
const A = "loom.dev/v1alpha1";
const rows: { name: string; median: string; unit: string; note?: string }[] = [];
const report = (name: string, value: number, unit: string, note?: string) => {
  rows.push({ name, median: value < 10 ? value.toFixed(3) : value.toFixed(1), unit, note });
  console.log(`${name.padEnd(58)} ${(value < 10 ? value.toFixed(3) : value.toFixed(1)).padStart(10)} ${unit}${note ? `  (${note})` : ""}`);
};

function time(fn: () => void, reps: number, inner = 1): number {
  const xs: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < inner; i++) fn();
    xs.push(Number(process.hrtime.bigint() - t0) / 1e3 / inner);
  }
  return median(xs);
}

const worker = (i: number, extra: object = {}): StoredObject => ({
  apiVersion: A, kind: "Worker", metadata: { name: `w${String(i).padStart(4, "0")}` },
  spec: { max_concurrency: 64, initial_concurrency: 64, capabilities: i % 10 === 0 ? ["gpu", "linux"] : ["linux"], resource_capacity: { cpu_millis: 64_000, memory_mb: 262_144, disk_mb: 1_000_000, gpu_count: i % 10 === 0 ? 2 : 0 } },
  status: { registration: { registered_at: new Date().toISOString(), runner_api_version: 1 }, desired_concurrency: 64 },
  ...extra,
});
const SHAPES = 10;
const task = (i: number): StoredObject => ({
  apiVersion: A, kind: "Task", metadata: { name: `t${String(i).padStart(7, "0")}` },
  spec: { required_capability: i % SHAPES === 9 ? "gpu" : "linux", priority: i % 3, execution_profile: { placement: "shared", resources: { cpu_millis: 250 * (1 + (i % SHAPES)), memory_mb: 512 * (1 + (i % 4)) } }, payload: { runner: "noop" } },
  status: { state: "queued", attempt: 1 },
});

async function seeded(tasks: number, workers: number) {
  const dir = mkdtempSync(join(tmpdir(), "loom-bench-"));
  const store = openSqliteStore(join(dir, "loom.db"));
  for (let i = 0; i < workers; i += 1000) await store.txn(Array.from({ length: Math.min(1000, workers - i) }, (_, j): TxnOp => ({ op: "create", object: worker(i + j) })));
  for (let i = 0; i < tasks; i += 5000) await store.txn(Array.from({ length: Math.min(5000, tasks - i) }, (_, j): TxnOp => ({ op: "create", object: task(i + j) })));
  const cache = new Informer(store, ["Worker", "Task", "Campaign"]);
  await cache.start();
  const scheduler = new Scheduler(store, cache, { heartbeatGraceSeconds: 3600, defaultMaxAttempts: 3, resultsDir: join(dir, "results") });
  scheduler.resync();
  for (const w of cache.list("Worker")) scheduler.ctx.liveness.touch(w.metadata.name, Date.now());
  return { dir, store, cache, scheduler, close: async () => { scheduler.stop(); cache.stop(); await store.close(); rmSync(dir, { recursive: true, force: true }); } };
}

async function main() {
  console.log(`Loom benchmarks — node ${process.version}, ${new Date().toISOString()}\n`);

  // 1. One admission decision (pure).
  {
    const w = workerView(worker(1) as unknown as Worker, Array.from({ length: 16 }, (_, i) => ({ task: `l${i}`, placement: "shared" as const, reservation: { cpu_millis: 500, memory_mb: 1024, disk_mb: 0, gpu_count: 0, gpu_types: [] } })), { ready: true, reported_active: 3 });
    const t = taskView(task(3) as unknown as Task);
    report("admit(): one task x one worker with 16 leases", time(() => admit(t, w), 31, 2000), "µs");
  }

  // 2. Picking work for a claim, as the queue grows: cost should follow shapes, not depth.
  const pick: Record<number, number> = {};
  const claim: Record<number, number> = {};
  for (const depth of [1_000, 100_000]) {
    const h = await seeded(depth, 10);
    const w = h.cache.get<Worker & StoredObject>("Worker", "w0001")!;
    pick[depth] = time(() => pickForWorker(h.scheduler.queue, h.scheduler.ctx, w, 8), 31, 20);
    report(`pick 8 tasks for one worker, ${depth.toLocaleString("en")} queued`, pick[depth], "µs", `${h.scheduler.queue.shapeCount} shapes`);
    // A full claim through the scheduler: admission, one SQLite transaction (fsync), cache update.
    const xs: number[] = [];
    for (let i = 0; i < 21; i++) {
      const name = `w${String(1 + (i % 9)).padStart(4, "0")}`;
      const t0 = process.hrtime.bigint();
      const r = await h.scheduler.claim({ worker_id: name, limit: 1, lease_seconds: 600 });
      xs.push(Number(process.hrtime.bigint() - t0) / 1e3);
      if (r.tasks.length !== 1) throw new Error(`claim returned no task: ${JSON.stringify(r).slice(0, 400)}`);
    }
    claim[depth] = median(xs);
    report(`claim 1 task (admit + durable lease write), ${depth.toLocaleString("en")} queued`, claim[depth], "µs");
    await h.close();
  }
  report("ratio: pick at 100k / pick at 1k queued", pick[100_000] / pick[1_000], "x", "1.0 means independent of queue depth");
  report("ratio: claim at 100k / claim at 1k queued", claim[100_000] / claim[1_000], "x");

  // 3. The admission-conditions pass over 100k queued tasks and 1k workers, in steady state.
  {
    const h = await seeded(100_000, 1_000);
    const log = () => {};
    const ac = new AdmissionConditions(h.scheduler.ctx, h.scheduler.queue, log, { minIntervalMs: 0, refreshMs: 3_600_000, maxWritesPerPass: 200_000 });
    let t0 = process.hrtime.bigint();
    await ac.pass(); // first pass writes every task's conditions
    const first = Number(process.hrtime.bigint() - t0) / 1e6;
    await h.cache.waitForRevision(await h.store.revision());
    const xs: number[] = [];
    const before = ac.writes;
    for (let i = 0; i < 5; i++) {
      t0 = process.hrtime.bigint();
      await ac.pass();
      xs.push(Number(process.hrtime.bigint() - t0) / 1e6);
    }
    report("conditions pass, 100k queued x 1k workers, first (writes all)", first, "ms", `${before} writes`);
    report("conditions pass, 100k queued x 1k workers, steady state", median(xs), "ms", `${ac.writes - before} writes`);
    await h.close();
  }

  // 4. The store alone.
  {
    const dir = mkdtempSync(join(tmpdir(), "loom-bench-"));
    const store = openSqliteStore(join(dir, "loom.db"));
    const xs: number[] = [];
    for (let i = 0; i < 200; i++) {
      const t0 = process.hrtime.bigint();
      await store.create(task(i));
      xs.push(Number(process.hrtime.bigint() - t0) / 1e3);
    }
    report("store: create one Task (validated, durable commit)", median(xs), "µs");
    report("store: get one Task", time(() => void store.get("Task", "t0000100"), 31, 200), "µs");
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
