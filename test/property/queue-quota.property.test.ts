// The queue ceiling at every revision, on both backends: random concurrent lease writes,
// requeues, cancels and quota edits go straight at the store (on etcd through two store
// clients, as two Hub replicas would); an independent checker follows the watch and, at
// every revision that adds a lease to a queue, sums that queue's active GPUs by hand against
// the Queue's nominal quota plus its borrowing limit as stored at that revision.
import fc from "fast-check";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isStoreError } from "../../src/store/errors.ts";
import { openEtcdStore } from "../../src/store/etcd.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject, WatchEvent } from "../../src/store/store.ts";
import { task, worker } from "../store-contract.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";

const API = "loom.dev/v1alpha1";
const QUEUES = ["team-a", "team-b"];
const TASKS = 16;
const queueOfTask = (i: number) => (i % 4 === 3 ? undefined : QUEUES[i % 2]); // some in `default`, which has no Queue

type Lease = { queue: string; gpu: number };
const activeLease = (t: StoredObject | undefined): Lease | undefined => {
  const st = t?.status as { state?: string; lease?: { reservation?: { gpu_count?: number } } } | undefined;
  if (!t || !st?.lease || (st.state !== "leased" && st.state !== "running")) return undefined;
  return { queue: (t.spec as { queue?: string }).queue ?? "default", gpu: st.lease.reservation?.gpu_count ?? 0 };
};

class Checker {
  queues = new Map<string, { quota: number; borrowing: number }>();
  tasks = new Map<string, StoredObject>();
  violations: string[] = [];
  added = 0;
  on = (ev: WatchEvent) => {
    const o = ev.object;
    if (o.kind === "Queue") {
      const spec = o.spec as { quota?: { gpu_count?: number }; borrowing_limit?: { gpu_count?: number } };
      if (ev.type === "DELETED") this.queues.delete(o.metadata.name);
      else
        this.queues.set(o.metadata.name, {
          quota: spec.quota?.gpu_count ?? Infinity,
          borrowing: spec.borrowing_limit?.gpu_count ?? 0,
        });
      return;
    }
    if (o.kind !== "Task") return;
    const before = activeLease(this.tasks.get(o.metadata.name));
    if (ev.type === "DELETED") this.tasks.delete(o.metadata.name);
    else this.tasks.set(o.metadata.name, o);
    const after = ev.type === "DELETED" ? undefined : activeLease(o);
    if (!after || before) return;
    this.added++;
    const q = this.queues.get(after.queue);
    if (!q) return;
    const used = [...this.tasks.values()]
      .map(activeLease)
      .filter((l) => l?.queue === after.queue)
      .reduce((s, l) => s + l!.gpu, 0);
    if (used > q.quota + q.borrowing)
      this.violations.push(`rev ${ev.revision}: queue ${after.queue} gpu_count ${used} > ${q.quota} + ${q.borrowing}`);
  };
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant("lease" as const),
    t: fc.integer({ min: 0, max: TASKS - 1 }),
    via: fc.integer({ min: 0, max: 1 }),
  }),
  fc.record({
    kind: fc.constant("requeue" as const),
    t: fc.integer({ min: 0, max: TASKS - 1 }),
    via: fc.integer({ min: 0, max: 1 }),
  }),
  fc.record({
    kind: fc.constant("cancel" as const),
    t: fc.integer({ min: 0, max: TASKS - 1 }),
    via: fc.integer({ min: 0, max: 1 }),
  }),
  fc.record({
    kind: fc.constant("quota" as const),
    q: fc.integer({ min: 0, max: 1 }),
    quota: fc.integer({ min: 0, max: 5 }),
    borrowing: fc.integer({ min: 0, max: 2 }),
    via: fc.integer({ min: 0, max: 1 }),
  }),
  // Deleting a Queue lifts its limit; creating it again while its tasks hold leases must count them.
  fc.record({
    kind: fc.constant("recreate" as const),
    quota: fc.integer({ min: 0, max: 4 }),
    via: fc.integer({ min: 0, max: 1 }),
  }),
);

const leaseFor = (gpu: number) => ({
  worker: "w0",
  epoch: 1,
  mode: "pull",
  leased_at: new Date().toISOString(),
  lease_until: new Date(Date.now() + 600_000).toISOString(),
  placement: "shared",
  reservation: { cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: gpu },
});

/** One op, read-modify-write; refusals (the guard's Conflict, a lost race) are expected. */
type Op = typeof op extends fc.Arbitrary<infer T> ? T : never;
async function run(stores: Store[], o: Op): Promise<void> {
  const s = stores[o.via % stores.length];
  try {
    if (o.kind === "recreate") {
      const q = await s.get("Queue", "team-b");
      if (q) await s.delete("Queue", "team-b", { resourceVersion: q.metadata.resourceVersion });
      else
        await s.create({
          apiVersion: API,
          kind: "Queue",
          metadata: { name: "team-b" },
          spec: { quota: { gpu_count: o.quota } },
        });
      return;
    }
    if (o.kind === "quota") {
      const q = await s.get("Queue", QUEUES[o.q]);
      if (!q) return;
      await s.update({
        ...q,
        spec: { ...q.spec, quota: { gpu_count: o.quota }, borrowing_limit: { gpu_count: o.borrowing } },
      });
      return;
    }
    const t = await s.get("Task", `t${o.t}`);
    if (!t) return;
    const gpu = 1 + (o.t % 2);
    const status =
      o.kind === "lease"
        ? { state: "leased", attempt: 1, lease: leaseFor(gpu) }
        : o.kind === "requeue"
          ? { state: "queued", attempt: 1 }
          : { state: "cancelled", attempt: 1 };
    await s.updateStatus({ ...t, status });
  } catch (e) {
    if (!isStoreError(e, "Conflict") && !isStoreError(e, "AlreadyExists") && !isStoreError(e, "NotFound")) throw e;
  }
}

async function property(
  open: () => Promise<{ stores: Store[]; close(): Promise<void> }>,
  runs: number,
): Promise<number> {
  let added = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.array(fc.array(op, { minLength: 2, maxLength: 6 }), { minLength: 4, maxLength: 10 }),
      async (rounds) => {
        const { stores, close } = await open();
        const checker = new Checker();
        const s = stores[0];
        const watch = await s.watch(undefined, 0, checker.on);
        try {
          await s.create(
            worker("w0", undefined, {
              max_concurrency: 64,
              resource_capacity: { cpu_millis: 64000, memory_mb: 65536, disk_mb: 0, gpu_count: 64 },
            }),
          );
          await s.create({
            apiVersion: API,
            kind: "Queue",
            metadata: { name: "team-a" },
            spec: { quota: { gpu_count: 3 }, borrowing_limit: { gpu_count: 1 } },
          });
          await s.create({
            apiVersion: API,
            kind: "Queue",
            metadata: { name: "team-b" },
            spec: { quota: { gpu_count: 2 } },
          });
          for (let i = 0; i < TASKS; i++) {
            const q = queueOfTask(i);
            await s.create({
              ...task(`t${i}`, {
                ...(q ? { queue: q } : {}),
                execution_profile: { placement: "shared", resources: { gpu_count: 1 + (i % 2) } },
              }),
              status: { state: "queued", attempt: 1 },
            });
          }
          for (const round of rounds) await Promise.all(round.map((o) => run(stores, o)));
          await new Promise((r) => setTimeout(r, 150));
          expect(checker.violations).toEqual([]);
          added += checker.added;
        } finally {
          watch.stop();
          await close();
        }
      },
    ),
    { numRuns: runs },
  );
  return added;
}

/** A Queue created while its tasks already hold leases counts them: the guard's record starts from the leases. */
async function lateQueue(s: Store): Promise<void> {
  await s.create(
    worker("w0", undefined, {
      max_concurrency: 64,
      resource_capacity: { cpu_millis: 64000, memory_mb: 65536, disk_mb: 0, gpu_count: 64 },
    }),
  );
  for (let i = 0; i < 4; i++)
    await s.create({
      ...task(`late${i}`, { queue: "late", execution_profile: { placement: "shared", resources: { gpu_count: 1 } } }),
      status: { state: "queued", attempt: 1 },
    });
  const lease = async (i: number) =>
    s.updateStatus({
      ...(await s.get("Task", `late${i}`))!,
      status: { state: "leased", attempt: 1, lease: leaseFor(1) },
    });
  for (let i = 0; i < 3; i++) await lease(i);
  await s.create({ apiVersion: API, kind: "Queue", metadata: { name: "late" }, spec: { quota: { gpu_count: 3 } } });
  const err = await lease(3).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isStoreError(err, "Conflict")).toBe(true);
  expect((err as Error).message).toContain(
    'queue "late": gpu_count 3 used + 1 requested > 3 nominal + 0 borrowing limit',
  );
  // One lease ends: the next fits.
  await s.updateStatus({ ...(await s.get("Task", "late0"))!, status: { state: "cancelled", attempt: 1 } });
  await lease(3);
}

describe("no queue exceeds nominal + borrowing limit at any revision", () => {
  it("SQLite: a Queue created over existing leases counts them", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-queue-late-"));
    const store = openSqliteStore(join(dir, "loom.db"));
    try {
      await lateQueue(store);
    } finally {
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("SQLite: random concurrent leases, requeues, cancels and quota edits", async () => {
    const added = await property(async () => {
      const dir = await mkdtemp(join(tmpdir(), "loom-queue-prop-"));
      const store = openSqliteStore(join(dir, "loom.db"));
      return {
        stores: [store],
        close: async () => (await store.close(), await rm(dir, { recursive: true, force: true })),
      };
    }, 15);
    // The mixes did exercise the guard: leases were written along the way.
    expect(added).toBeGreaterThan(15);
  }, 120_000);

  describe.skipIf(etcdMissing)("etcd", () => {
    let etcd: EtcdCluster;
    let n = 0;
    beforeAll(async () => {
      etcd = await startEtcd();
    }, 30_000);
    afterAll(async () => {
      await etcd?.stop();
    });

    it("a Queue created over existing leases counts them", async () => {
      const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-queue-late-${process.pid}` });
      try {
        await lateQueue(store);
      } finally {
        await store.close();
      }
    });

    it("two store clients (two replicas) racing on one etcd", async () => {
      const added = await property(async () => {
        const prefix = `/loom-queue-prop-${process.pid}-${++n}`;
        const stores = [
          await openEtcdStore({ endpoints: etcd.endpoints, prefix }),
          await openEtcdStore({ endpoints: etcd.endpoints, prefix }),
        ];
        return { stores, close: async () => void (await Promise.all(stores.map((x) => x.close()))) };
      }, 8);
      expect(added).toBeGreaterThan(8);
    }, 180_000);
  });
});
