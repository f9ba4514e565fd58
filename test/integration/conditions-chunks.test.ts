// The conditions pass writes what it owes in transactions no larger than the store allows,
// and every one of them: a store that takes few writes per transaction (etcd under a small
// --max-txn-ops) gets all of a pass's writes, in more transactions.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, it } from "vitest";
import { AdmissionConditions } from "../../src/reconciler/admission-conditions.ts";
import { Scheduler } from "../../src/scheduler/scheduler.ts";
import { Informer } from "../../src/store/cache.ts";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite.ts";
import type { ApplyOptions, Store, TxnOp } from "../../src/store/store.ts";

const A = "loom.dev/v1alpha1";
const cleanup: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function fleet(tasks: number): Promise<{ store: SqliteStore; cache: Informer; scheduler: Scheduler }> {
  const dir = await mkdtemp(join(tmpdir(), "loom-chunks-"));
  cleanup.push(() => rm(dir, { recursive: true, force: true }));
  const store = openSqliteStore(join(dir, "loom.db"));
  cleanup.push(() => store.close());
  await store.create({
    apiVersion: A,
    kind: "Worker",
    metadata: { name: "w1" },
    spec: { max_concurrency: 1, capabilities: ["linux"], resource_capacity: { cpu_millis: 1000, memory_mb: 1024 } },
  });
  for (let i = 0; i < tasks; i++)
    await store.create({
      apiVersion: A,
      kind: "Task",
      metadata: { name: `t${i}` },
      spec: { required_capability: "linux", execution_profile: { resources: { memory_mb: 100 } }, payload: {} },
      status: { state: "queued", attempt: 1 },
    });
  const cache = new Informer(store, ["Worker", "Task", "Campaign", "Queue"]);
  await cache.start();
  cleanup.push(() => cache.stop());
  const scheduler = new Scheduler(store, cache, {
    heartbeatGraceSeconds: 3600,
    defaultMaxAttempts: 3,
    resultsDir: join(dir, "results"),
  });
  cleanup.push(() => scheduler.stop());
  scheduler.resync();
  scheduler.ctx.liveness.touch("w1", Date.now());
  return { store, cache, scheduler };
}

it("writes every owed task in one pass when the store takes three writes per transaction", async () => {
  const { store, cache, scheduler } = await fleet(8);
  const sizes: number[] = [];
  // The store as the pass sees it: at most three writes per transaction, each counted.
  const few = Object.assign(Object.create(store) as Store, {
    maxWritesPerTxn: 3,
    apply: (ops: TxnOp[], opts?: ApplyOptions) => {
      expect(ops.length).toBeLessThanOrEqual(3);
      sizes.push(ops.length);
      return store.apply(ops, opts);
    },
  });
  const ac = new AdmissionConditions(
    { ...scheduler.controllers, store: few },
    { minIntervalMs: 0, refreshMs: 3_600_000, maxWritesPerPass: 100 },
  );
  await ac.pass();
  expect(ac.writes).toBe(8);
  expect(sizes).toEqual([3, 3, 2]);
  await cache.waitForRevision(await store.revision());
  // Every task has its answer (the worker never registered, so it is not ready to admit).
  for (let i = 0; i < 8; i++)
    expect(cache.get("Task", `t${i}`)?.status?.conditions?.find((c) => c.type === "Admitted")).toMatchObject({
      status: "False",
    });
});
