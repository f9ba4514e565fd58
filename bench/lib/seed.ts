// In-process Hub internals on a seeded SQLite store, for the scenarios that time one
// function (a claim, a conditions pass) without HTTP in between. Objects are written with
// the store's own bulk transactions; the informer and scheduler are the Hub's own.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { Scheduler } from "../../src/scheduler/scheduler.ts";
import { Informer } from "../../src/store/cache.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject, TxnOp } from "../../src/store/store.ts";
import { tempDir } from "./hub.ts";

const A = "loom.dev/v1alpha1";

export const workerName = (i: number) => `w${String(i).padStart(5, "0")}`;

export const seedWorker = (i: number): StoredObject => ({
  apiVersion: A,
  kind: "Worker",
  metadata: { name: workerName(i) },
  spec: {
    max_concurrency: 64,
    initial_concurrency: 64,
    capabilities: i % 10 === 0 ? ["gpu", "linux"] : ["linux"],
    resource_capacity: { cpu_millis: 64_000, memory_mb: 262_144, disk_mb: 1_000_000, gpu_count: i % 10 === 0 ? 2 : 0 },
  },
  status: { registration: { registered_at: new Date().toISOString(), runner_api_version: 1 }, desired_concurrency: 64 },
});

export const queueName = (i: number) => `q${String(i).padStart(3, "0")}`;

/**
 * A Queue with an equal share of a fleet of `workers` seed workers among `queues`, and as
 * much again to borrow: claims are ordered by fair share across them, and the quota is
 * checked on every lease (and re-checked by the store), without it running out.
 */
export const seedQueue = (i: number, queues: number, workers: number): StoredObject => {
  const share = {
    cpu_millis: Math.floor((64_000 * workers) / queues),
    memory_mb: Math.floor((262_144 * workers) / queues),
  };
  return {
    apiVersion: A,
    kind: "Queue",
    metadata: { name: queueName(i) },
    spec: { quota: share, borrowing_limit: share, weight: 1 + (i % 3) },
  };
};

/**
 * A queued task (of queue i % `queues`, when there are queues). With `shapes` distinct requirement shapes, task i has shape i % shapes;
 * the shapes differ in requested disk (as exact numbers in real profiles do) and every
 * tenth one needs a GPU, so some workers cannot take it.
 */
export const seedTask = (i: number, shapes: number, queues = 0): StoredObject => {
  const s = i % shapes;
  return {
    apiVersion: A,
    kind: "Task",
    metadata: { name: `t${String(i).padStart(7, "0")}` },
    spec: {
      required_capability: s % 10 === 9 ? "gpu" : "linux",
      priority: i % 3,
      ...(queues ? { queue: queueName(i % queues) } : {}),
      execution_profile: { placement: "shared", resources: { cpu_millis: 250, memory_mb: 512, disk_mb: 1 + s } },
      payload: { runner: "noop" },
    },
    status: { state: "queued", attempt: 1 },
  };
};

export async function bulkCreate(
  store: Store,
  count: number,
  make: (i: number) => StoredObject,
  batch = 5000,
): Promise<void> {
  for (let i = 0; i < count; i += batch)
    await store.txn(
      Array.from({ length: Math.min(batch, count - i) }, (_, j): TxnOp => ({ op: "create", object: make(i + j) })),
    );
}

export type Seeded = Awaited<ReturnType<typeof seeded>>;

/** A store holding `tasks` queued tasks of `shapes` shapes (spread over `queues` Queue objects, if any) and `workers` live workers, with the informer and scheduler on it. */
export async function seeded(o: { tasks: number; workers: number; shapes: number; queues?: number }) {
  const dir = tempDir("seed");
  const store = openSqliteStore(join(dir, "loom.db"));
  const queues = o.queues ?? 0;
  await bulkCreate(store, o.workers, seedWorker, 1000);
  if (queues) await bulkCreate(store, queues, (i) => seedQueue(i, queues, o.workers), 1000);
  await bulkCreate(store, o.tasks, (i) => seedTask(i, o.shapes, queues));
  const cache = new Informer(store, ["Worker", "Task", "Campaign", "Queue"]);
  await cache.start();
  const scheduler = new Scheduler(store, cache, {
    heartbeatGraceSeconds: 3600,
    defaultMaxAttempts: 3,
    resultsDir: join(dir, "results"),
  });
  scheduler.resync();
  for (const w of cache.list("Worker")) scheduler.ctx.liveness.touch(w.metadata.name, Date.now());
  return {
    dir,
    store,
    cache,
    scheduler,
    close: async () => {
      scheduler.stop();
      cache.stop();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Microseconds per call of fn: the per-repetition figures, each averaging `inner` calls. */
export function timeReps(fn: () => void, reps: number, inner = 1): number[] {
  const xs: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < inner; i++) fn();
    xs.push(Number(process.hrtime.bigint() - t0) / 1e3 / inner);
  }
  return xs;
}
