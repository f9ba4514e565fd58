// The contract every Store backend must pass (SQLite, etcd, ...). A backend's test file
// calls storeContract("name", open) with a factory that yields a fresh, empty store.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Store, StoredObject, TxnOp, WatchEvent } from "../src/store/store.ts";
import { StoreError } from "../src/store/errors.ts";
import { hasFastProperties } from "./support/v8.ts";

export type OpenedStore = { store: Store; reopen?: () => Promise<Store>; cleanup: () => Promise<void> };

const API = "loom.dev/v1alpha1";

export function worker(
  name: string,
  labels?: Record<string, string>,
  spec: Record<string, unknown> = {},
): StoredObject {
  return {
    apiVersion: API,
    kind: "Worker",
    metadata: { name, ...(labels ? { labels } : {}) },
    spec: { max_concurrency: 2, initial_concurrency: 1, ...spec },
  };
}

export function task(name: string, spec: Record<string, unknown> = {}): StoredObject {
  return {
    apiVersion: API,
    kind: "Task",
    metadata: { name },
    spec: { campaign_id: "c", execution_profile: { placement: "shared" }, ...spec },
  };
}

/** An Event about Task t (the store does not validate Events), first and last seen `at`. */
export function event(name: string, at = new Date().toISOString()): StoredObject {
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name },
    involvedObject: { apiVersion: API, kind: "Task", name: "t" },
    type: "Normal",
    reason: "LeaseGranted",
    message: name,
    count: 1,
    firstTimestamp: at,
    lastTimestamp: at,
    source: { component: "loom-hub" },
  };
}

const names = (items: StoredObject[]) => items.map((o) => o.metadata.name);
const rvOf = (o: StoredObject) => Number(o.metadata.resourceVersion);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function eventually(check: () => boolean, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

/** Await a rejection and return it as a StoreError (fails the test if it resolves or throws something else). */
export async function storeError(p: Promise<unknown>): Promise<StoreError> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  expect(err, "expected the call to fail").toBeInstanceOf(StoreError);
  return err as StoreError;
}

function deepFreeze<T>(o: T): T {
  if (o && typeof o === "object") {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`Store contract: ${name}`, () => {
    let ctx: OpenedStore;
    let store: Store;
    const extra: Store[] = [];
    /** The fresh store's revision: 0 on SQLite; on etcd the cluster's revision is shared by every prefix. */
    let r0 = 0;

    beforeEach(async () => {
      ctx = await open();
      store = ctx.store;
      r0 = await store.revision();
    });
    afterEach(async () => {
      for (const s of [store, ...extra.splice(0)]) await s.close().catch(() => undefined);
      await ctx.cleanup();
    });

    /** Every event for `kind` (all kinds when undefined) after `from`, collected into an array. */
    async function collect(kind: string | undefined, from: number) {
      const events: WatchEvent[] = [];
      const handle = await store.watch(kind, from, (ev) => events.push(ev));
      return { events, handle };
    }

    /**
     * Commit a sentinel that `events`' watcher sees and wait for its event. Events arrive in
     * commit order, so the events before it are all the watcher gets for the earlier commits:
     * a check on them cannot pass because something extra was merely slow.
     */
    async function beforeSentinel(events: WatchEvent[], kind: "Worker" | "Task" = "Worker"): Promise<WatchEvent[]> {
      const s = await store.create(kind === "Task" ? task("sentinel") : worker("sentinel"));
      await eventually(() => events.some((e) => e.revision === rvOf(s)), "the sentinel's event");
      return events.slice(
        0,
        events.findIndex((e) => e.revision === rvOf(s)),
      );
    }

    describe("create, get, list", () => {
      it("create sets uid, creationTimestamp, generation 1 and resourceVersion = the new revision", async () => {
        const before = await store.revision();
        const t0 = Date.now();
        const w = await store.create(worker("w1", { pool: "a" }));
        expect(w.metadata.uid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
        const created = Date.parse(w.metadata.creationTimestamp!);
        expect(created).toBeGreaterThanOrEqual(t0 - 1000);
        expect(created).toBeLessThanOrEqual(Date.now() + 1000);
        expect(w.metadata.generation).toBe(1);
        expect(w.metadata.resourceVersion).toBe(String(before + 1));
        expect(await store.revision()).toBe(before + 1);
        expect(w.spec).toEqual({ max_concurrency: 2, initial_concurrency: 1 });
        expect(w.metadata.labels).toEqual({ pool: "a" });
        expect(await store.get("Worker", "w1")).toEqual(w);
      });

      it("every write takes exactly the next revision", async () => {
        const r0 = await store.revision();
        const a = await store.create(worker("w1"));
        const b = await store.create(task("t1"));
        const c = await store.update({ ...a, spec: { max_concurrency: 3, initial_concurrency: 1 } });
        expect([a, b, c].map(rvOf)).toEqual([r0 + 1, r0 + 2, r0 + 3]);
        expect(await store.revision()).toBe(r0 + 3);
      });

      it("uids are unique and a supplied resourceVersion is ignored on create", async () => {
        const a = await store.create(worker("w1"));
        const b = await store.create({
          ...worker("w2"),
          metadata: { name: "w2", resourceVersion: "999", uid: "mine" },
        });
        expect(a.metadata.uid).not.toBe(b.metadata.uid);
        expect(b.metadata.uid).not.toBe("mine");
        expect(b.metadata.resourceVersion).toBe(String(rvOf(a) + 1));
      });

      it("create does not modify the caller's object", async () => {
        const input = deepFreeze(worker("w1", { a: "b" }));
        const out = await store.create(input);
        expect(input.metadata).toEqual({ name: "w1", labels: { a: "b" } });
        expect(out).not.toBe(input);
      });

      it("list returns the kind's objects sorted by name, with the current revision", async () => {
        await store.create(worker("w2"));
        await store.create(task("t1"));
        await store.create(worker("w10"));
        await store.create(worker("w1"));
        const workers = await store.list("Worker");
        expect(names(workers.items)).toEqual(["w1", "w10", "w2"]);
        expect(workers.revision).toBe(await store.revision());
        expect(names((await store.list("Task")).items)).toEqual(["t1"]);
        expect((await store.list("Campaign")).items).toEqual([]);
        expect(workers.items[2]).toEqual(await store.get("Worker", "w2"));
      });

      it("count is the number of objects of a kind, written or deleted, applied or durable", async () => {
        expect(await store.count("Worker")).toBe(0);
        await store.create(worker("w1"));
        await store.create(worker("w2"));
        await store.create(task("t1"));
        expect([await store.count("Worker"), await store.count("Task"), await store.count("Campaign")]).toEqual([
          2, 1, 0,
        ]);
        const applied = await store.apply([{ op: "create", object: worker("w3") }]);
        expect(await store.count("Worker")).toBe(3);
        await applied.durable;
        await store.delete("Worker", "w1");
        expect(await store.count("Worker")).toBe(2);
        // Unless a backend is told to (etcd's ttlSeconds), nothing expires on its own.
        expect(store.expires("Worker")).toBe(false);
        expect(store.expires("Event")).toBe(false);
      });

      it("get of a missing object is undefined", async () => {
        await store.create(worker("w1"));
        expect(await store.get("Worker", "nope")).toBeUndefined();
        expect(await store.get("Task", "w1")).toBeUndefined();
      });
    });

    describe("label selectors", () => {
      beforeEach(async () => {
        await store.create(worker("w1", { env: "prod", tier: "web" }));
        await store.create(worker("w2", { env: "staging", tier: "db" }));
        await store.create(worker("w3", { env: "prod" }));
        await store.create(worker("w4"));
      });
      const cases: [string, string[]][] = [
        ["", ["w1", "w2", "w3", "w4"]],
        ["env=prod", ["w1", "w3"]],
        ["env==prod", ["w1", "w3"]],
        ["env!=prod", ["w2", "w4"]],
        ["tier", ["w1", "w2"]],
        ["!tier", ["w3", "w4"]],
        ["env in (prod, staging)", ["w1", "w2", "w3"]],
        ["env notin (prod)", ["w2", "w4"]],
        ["env=prod,tier=web", ["w1"]],
        ["env=prod, !tier", ["w3"]],
        ["env in (qa)", []],
      ];
      for (const [sel, want] of cases) {
        it(`"${sel}" selects ${want.join(",") || "nothing"}`, async () => {
          const res = await store.list("Worker", { labelSelector: sel });
          expect(names(res.items)).toEqual(want);
        });
      }
      for (const sel of ["env in (prod", "=prod", "env=prod,", "env in ()", "env prod", "bad key!=x"]) {
        it(`malformed "${sel}" is BadRequest (400)`, async () => {
          const err = await storeError(store.list("Worker", { labelSelector: sel }));
          expect(err.reason).toBe("BadRequest");
          expect(err.code).toBe(400);
          expect(err.message).toContain(sel);
        });
      }
    });

    describe("errors", () => {
      it("create of a taken name is AlreadyExists (409) and changes nothing", async () => {
        const w = await store.create(worker("w1", undefined, { max_concurrency: 4 }));
        const rev = await store.revision();
        const err = await storeError(store.create(worker("w1", undefined, { max_concurrency: 8 })));
        expect(err.reason).toBe("AlreadyExists");
        expect(err.code).toBe(409);
        expect(await store.get("Worker", "w1")).toEqual(w);
        expect(await store.revision()).toBe(rev);
      });

      it("the same name in another kind is a different object", async () => {
        await store.create(worker("x"));
        const t = await store.create(task("x"));
        expect(t.kind).toBe("Task");
        expect((await store.get("Worker", "x"))?.kind).toBe("Worker");
      });

      it("update, updateStatus and delete of a missing object are NotFound (404)", async () => {
        await store.create(worker("w1"));
        const rev = await store.revision();
        // Every rejection is handled from the start: a networked store rejects them in any order.
        const errs = await Promise.all(
          [store.update(worker("nope")), store.updateStatus(worker("nope")), store.delete("Worker", "nope")].map(
            storeError,
          ),
        );
        for (const err of errs) {
          expect(err.reason).toBe("NotFound");
          expect(err.code).toBe(404);
        }
        expect(await store.revision()).toBe(rev);
      });
    });

    describe("optimistic concurrency", () => {
      it("update with a stale resourceVersion is Conflict (409) and changes nothing", async () => {
        const v1 = await store.create(worker("w1"));
        const v2 = await store.update({ ...v1, spec: { max_concurrency: 3, initial_concurrency: 1 } });
        const rev = await store.revision();
        const err = await storeError(store.update({ ...v1, spec: { max_concurrency: 9, initial_concurrency: 1 } }));
        expect(err.reason).toBe("Conflict");
        expect(err.code).toBe(409);
        expect(await store.get("Worker", "w1")).toEqual(v2);
        expect(await store.revision()).toBe(rev);
      });

      it("update with the current resourceVersion succeeds; without one it is last-write-wins", async () => {
        const v1 = await store.create(worker("w1"));
        const v2 = await store.update({ ...v1, spec: { max_concurrency: 3, initial_concurrency: 1 } });
        expect(rvOf(v2)).toBe(rvOf(v1) + 1);
        const { resourceVersion: _, ...meta } = v1.metadata;
        const v3 = await store.update({ ...v1, metadata: meta, spec: { max_concurrency: 5, initial_concurrency: 1 } });
        expect(v3.spec).toEqual({ max_concurrency: 5, initial_concurrency: 1 });
        expect(rvOf(v3)).toBe(rvOf(v2) + 1);
      });

      it("updateStatus and delete with a stale resourceVersion are Conflict", async () => {
        const v1 = await store.create(worker("w1"));
        const v2 = await store.updateStatus({ ...v1, status: { active_count: 1 } });
        const e1 = await storeError(store.updateStatus({ ...v1, status: { active_count: 2 } }));
        expect(e1.reason).toBe("Conflict");
        const e2 = await storeError(store.delete("Worker", "w1", { resourceVersion: v1.metadata.resourceVersion }));
        expect(e2.reason).toBe("Conflict");
        expect(e2.code).toBe(409);
        expect(await store.get("Worker", "w1")).toEqual(v2);
      });

      it("of many concurrent updates from the same read, exactly one wins", async () => {
        const v1 = await store.create(worker("w1"));
        const results = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) =>
            store.update({ ...v1, spec: { max_concurrency: 10 + i, initial_concurrency: 1 } }),
          ),
        );
        const ok = results.filter((r) => r.status === "fulfilled");
        const failed = results.filter((r): r is PromiseRejectedResult => r.status === "rejected");
        expect(ok).toHaveLength(1);
        expect(failed).toHaveLength(9);
        for (const f of failed) expect((f.reason as StoreError).reason).toBe("Conflict");
        expect(await store.get("Worker", "w1")).toEqual((ok[0] as PromiseFulfilledResult<StoredObject>).value);
      });
    });

    describe("generation and status", () => {
      it("generation increases on spec changes only", async () => {
        const v1 = await store.create(worker("w1", { a: "1" }));
        const v2 = await store.update({ ...v1, metadata: { ...v1.metadata, labels: { a: "2" } } });
        expect(v2.metadata.generation).toBe(1);
        expect(v2.metadata.labels).toEqual({ a: "2" });
        // Same spec with its keys in another order is not a change.
        const v3 = await store.update({ ...v2, spec: { initial_concurrency: 1, max_concurrency: 2 } });
        expect(v3.metadata.generation).toBe(1);
        const v4 = await store.update({ ...v3, spec: { max_concurrency: 4, initial_concurrency: 1 } });
        expect(v4.metadata.generation).toBe(2);
        const v5 = await store.updateStatus({ ...v4, status: { active_count: 1 } });
        expect(v5.metadata.generation).toBe(2);
        const v6 = await store.update({ ...v5, spec: { max_concurrency: 4, initial_concurrency: 2 } });
        expect(v6.metadata.generation).toBe(3);
      });

      it("an update may request deletion (deletionTimestamp) but never withdraw it", async () => {
        const v1 = await store.create(worker("w1"));
        const at = "2030-01-01T00:00:00.000Z";
        const v2 = await store.update({
          ...v1,
          metadata: { ...v1.metadata, deletionTimestamp: at, finalizers: ["x"] },
        });
        expect((v2.metadata as { deletionTimestamp?: string }).deletionTimestamp).toBe(at);
        const { deletionTimestamp: _gone, ...without } = v2.metadata;
        const v3 = await store.update({ ...v2, metadata: { ...without, labels: { edited: "yes" } } });
        expect((v3.metadata as { deletionTimestamp?: string }).deletionTimestamp).toBe(at);
        expect(v3.metadata.labels).toEqual({ edited: "yes" });
      });

      it("update keeps the stored status, uid and creationTimestamp whatever the caller sends", async () => {
        const v1 = await store.create(worker("w1"));
        const v2 = await store.updateStatus({
          ...v1,
          status: { active_count: 2, conditions: [{ type: "Ready", status: "True" }] },
        });
        const v3 = await store.update({
          ...v2,
          metadata: { ...v2.metadata, uid: "forged", creationTimestamp: "2000-01-01T00:00:00Z", generation: 99 },
          spec: { max_concurrency: 5, initial_concurrency: 1 },
          status: { active_count: 0 },
        });
        expect(v3.status).toEqual({ active_count: 2, conditions: [{ type: "Ready", status: "True" }] });
        expect(v3.metadata.uid).toBe(v1.metadata.uid);
        expect(v3.metadata.creationTimestamp).toBe(v1.metadata.creationTimestamp);
        expect(v3.metadata.generation).toBe(2);
        expect(await store.get("Worker", "w1")).toEqual(v3);
      });

      it("updateStatus replaces status only: spec, labels and generation stay as stored", async () => {
        const v1 = await store.create(worker("w1", { a: "1" }));
        const v2 = await store.updateStatus({
          ...v1,
          metadata: { ...v1.metadata, labels: { a: "changed" } },
          spec: { max_concurrency: 99, initial_concurrency: 1 },
          status: { active_count: 1 },
        });
        expect(v2.spec).toEqual(v1.spec);
        expect(v2.metadata.labels).toEqual({ a: "1" });
        expect(v2.metadata.generation).toBe(1);
        expect(v2.status).toEqual({ active_count: 1 });
        expect(rvOf(v2)).toBe(rvOf(v1) + 1);
        const v3 = await store.updateStatus({ ...v2, status: { desired_concurrency: 2 } });
        expect(v3.status).toEqual({ desired_concurrency: 2 });
        expect(await store.get("Worker", "w1")).toEqual(v3);
      });
    });

    describe("delete", () => {
      it("returns the object as last seen and removes it", async () => {
        const w = await store.create(worker("w1"));
        await store.create(worker("w2"));
        const deleted = await store.delete("Worker", "w1", { resourceVersion: w.metadata.resourceVersion });
        expect(deleted).toEqual(w);
        expect(await store.get("Worker", "w1")).toBeUndefined();
        expect(names((await store.list("Worker")).items)).toEqual(["w2"]);
        expect(await store.revision()).toBe(rvOf(w) + 2);
        // The name is free again.
        const again = await store.create(worker("w1"));
        expect(again.metadata.uid).not.toBe(w.metadata.uid);
        expect(again.metadata.generation).toBe(1);
      });
    });

    describe("transactions", () => {
      it("commits every op at one new revision and returns the written objects in op order", async () => {
        const w = await store.create(worker("w1"));
        await store.create(worker("w2"));
        const t = await store.create(task("t1"));
        const from = await store.revision();
        const { events } = await collect(undefined, from);
        // Distinct objects: etcd, like Kubernetes, reports one event per key per revision.
        const out = await store.txn([
          { op: "create", object: task("t2") },
          { op: "updateStatus", object: { ...t, status: { state: "imported", attempt: 1 } } },
          { op: "update", object: { ...w, spec: { max_concurrency: 3, initial_concurrency: 1 } } },
          { op: "delete", kind: "Worker", name: "w2" },
        ]);
        expect(await store.revision()).toBe(from + 1);
        expect(out.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
          "Task/t2",
          "Task/t1",
          "Worker/w1",
          "Worker/w2",
        ]);
        expect(out.slice(0, 3).every((o) => o.metadata.resourceVersion === String(from + 1))).toBe(true);
        expect(await store.get("Task", "t2")).toEqual(out[0]);
        expect((await store.get<StoredObject>("Task", "t1"))?.status).toEqual({ state: "imported", attempt: 1 });
        expect(await store.get("Worker", "w1")).toEqual(out[2]);
        expect(await store.get("Worker", "w2")).toBeUndefined();
        await eventually(() => events.length === 4, "4 txn events");
        expect(events.map((e) => `${e.type} ${e.object.kind}/${e.object.metadata.name}@${e.revision}`)).toEqual([
          `ADDED Task/t2@${from + 1}`,
          `MODIFIED Task/t1@${from + 1}`,
          `MODIFIED Worker/w1@${from + 1}`,
          `DELETED Worker/w2@${from + 1}`,
        ]);
      });

      const failing: [string, (w: StoredObject, t: StoredObject) => TxnOp, string][] = [
        [
          "a stale update",
          (w) => ({ op: "update", object: { ...w, metadata: { ...w.metadata, resourceVersion: "1" } } }),
          "Conflict",
        ],
        ["an update of a missing object", () => ({ op: "update", object: worker("ghost") }), "NotFound"],
        ["a create of a taken name", () => ({ op: "create", object: task("t1") }), "AlreadyExists"],
        [
          "an invalid object",
          () => ({ op: "create", object: worker("w9", undefined, { max_concurrency: -1 }) }),
          "Invalid",
        ],
        [
          "a failed check",
          (w) => ({ op: "check", kind: "Worker", name: w.metadata.name, resourceVersion: "0" }),
          "Conflict",
        ],
      ];
      for (const [what, bad, reason] of failing) {
        it(`${what} as the last op rolls back every op (${reason}): objects, revision and events unchanged`, async () => {
          const w = await store.create(worker("w0"));
          const w1 = await store.create(worker("w1"));
          const t = await store.create(task("t1"));
          const rev = await store.revision();
          expect(rvOf(w1)).toBeGreaterThan(1);
          const before = { workers: await store.list("Worker"), tasks: await store.list("Task") };
          const { events } = await collect(undefined, rev);
          const err = await storeError(
            store.txn([
              { op: "create", object: task("t2") },
              { op: "update", object: { ...w1, spec: { max_concurrency: 7, initial_concurrency: 1 } } },
              { op: "updateStatus", object: { ...t, status: { state: "imported" } } },
              { op: "delete", kind: "Worker", name: w.metadata.name },
              bad(w1, t),
            ]),
          );
          expect(err.reason).toBe(reason);
          expect(await store.revision()).toBe(rev);
          expect(await store.list("Worker")).toEqual(before.workers);
          expect(await store.list("Task")).toEqual(before.tasks);
          // The next commit takes the very next revision and is the first event the watcher sees.
          const next = await store.create(worker("w5"));
          expect(rvOf(next)).toBe(rev + 1);
          // w5 is the sentinel: anything the refused txn had leaked would come before it.
          await eventually(() => events.some((e) => e.revision === rvOf(next)), "the next event");
          expect(events.map((e) => [e.revision, e.object.metadata.name])).toEqual([[rev + 1, "w5"]]);
        });
      }

      it('check asserts a resourceVersion, and "0" asserts absence', async () => {
        const old = await store.create(worker("w1"));
        const w = await store.update({ ...old, metadata: { ...old.metadata, labels: { v: "2" } } });
        const out = await store.txn([
          { op: "check", kind: "Worker", name: "w1", resourceVersion: w.metadata.resourceVersion! },
          { op: "check", kind: "Task", name: "t1", resourceVersion: "0" },
          { op: "create", object: task("t1") },
        ]);
        expect(names(out)).toEqual(["t1"]);
        const rev = await store.revision();
        const stale = await storeError(
          store.txn([
            { op: "check", kind: "Worker", name: "w1", resourceVersion: old.metadata.resourceVersion! },
            { op: "create", object: task("t2") },
          ]),
        );
        expect(stale.reason).toBe("Conflict");
        expect(stale.code).toBe(409);
        const exists = await storeError(
          store.txn([
            { op: "create", object: task("t3") },
            { op: "check", kind: "Task", name: "t1", resourceVersion: "0" },
          ]),
        );
        expect(exists.reason).toBe("Conflict");
        const missing = await storeError(
          store.txn([
            { op: "check", kind: "Task", name: "t9", resourceVersion: w.metadata.resourceVersion! },
            { op: "create", object: task("t4") },
          ]),
        );
        expect(missing.reason).toBe("Conflict");
        expect(await store.revision()).toBe(rev);
        expect(names((await store.list("Task")).items)).toEqual(["t1"]);
      });

      it("a txn of checks only writes nothing and commits no revision", async () => {
        const w = await store.create(worker("w1"));
        const rev = await store.revision();
        expect(
          await store.txn([{ op: "check", kind: "Worker", name: "w1", resourceVersion: w.metadata.resourceVersion! }]),
        ).toEqual([]);
        expect(await store.revision()).toBe(rev);
      });
    });

    describe("validation", () => {
      it("an invalid object is rejected with every cause and its field path, and nothing is written", async () => {
        await store.create(worker("w0"));
        const rev = await store.revision();
        const err = await storeError(
          store.create(worker("w1", undefined, { max_concurrency: 0, initial_concurrency: 1, bogus: true })),
        );
        expect(err.reason).toBe("Invalid");
        expect(err.code).toBe(422);
        const fields = err.causes.map((c) => c.field);
        expect(fields).toContain("spec.max_concurrency");
        expect(fields).toContain("spec.bogus");
        expect(err.message).toContain("spec.max_concurrency");
        expect(await store.get("Worker", "w1")).toBeUndefined();
        expect(await store.revision()).toBe(rev);
      });

      it("an invalid update or status leaves the stored object unchanged", async () => {
        const w = await store.create(worker("w1"));
        const t = await store.create(task("t1"));
        const e1 = await storeError(store.update({ ...w, spec: { max_concurrency: 1, initial_concurrency: 3 } }));
        expect(e1.reason).toBe("Invalid");
        expect(e1.causes.map((c) => c.field)).toContain("spec.initial_concurrency");
        const e2 = await storeError(store.updateStatus({ ...t, status: { state: "flying" } }));
        expect(e2.reason).toBe("Invalid");
        expect(e2.causes.map((c) => c.field)).toEqual(["status.state"]);
        const e3 = await storeError(store.create({ apiVersion: API, kind: "Task", metadata: { name: "t2" } }));
        expect(e3.causes.map((c) => c.field)).toEqual(["spec"]);
        const e4 = await storeError(store.create({ ...task("bad name!") }));
        expect(e4.causes.map((c) => c.field)).toContain("metadata.name");
        expect(await store.get("Worker", "w1")).toEqual(w);
        expect(await store.get("Task", "t1")).toEqual(t);
        expect(await store.revision()).toBe(rvOf(t));
      });
    });

    describe("copies", () => {
      it("mutating returned objects or the caller's input never changes stored state", async () => {
        const input = worker("w1", { a: "1" });
        const created = await store.create(input);
        (input.spec as any).max_concurrency = 100;
        input.metadata.labels!.a = "input";
        (created.spec as any).max_concurrency = 101;
        created.metadata.labels!.a = "created";
        const got = (await store.get<StoredObject>("Worker", "w1"))!;
        expect(got.spec).toEqual({ max_concurrency: 2, initial_concurrency: 1 });
        expect(got.metadata.labels).toEqual({ a: "1" });
        (got.spec as any).max_concurrency = 102;
        const listed = (await store.list("Worker")).items[0];
        expect((listed.spec as any).max_concurrency).toBe(2);
        (listed.spec as any).max_concurrency = 103;
        const updated = await store.updateStatus({
          ...listed,
          status: { conditions: [{ type: "Ready", status: "True" }] },
        });
        (updated.status as any).conditions[0].status = "False";
        const [fromTxn] = await store.txn([{ op: "update", object: { ...worker("w1", { a: "1" }) } }]);
        (fromTxn.spec as any).max_concurrency = 104;
        const final = (await store.get<StoredObject>("Worker", "w1"))!;
        expect(final.spec).toEqual({ max_concurrency: 2, initial_concurrency: 1 });
        expect(final.status).toEqual({ conditions: [{ type: "Ready", status: "True" }] });
      });

      it("a status its writer built by deleting a field is stored as a fresh object", async () => {
        const created = await store.create(task("t1"));
        // As a retry builds one: a copy of the status with a field in the middle deleted.
        const status: Record<string, unknown> = { state: "queued", attempt: 2, finished_at: "x", conditions: [] };
        delete status.finished_at;
        expect(hasFastProperties(status)).toBe(false);
        const applied = await store.apply([{ op: "updateStatus", object: { ...created, status } }], {
          ownedInput: true,
          readOnlyResults: true,
        });
        await applied.durable;
        const stored = applied.results[0];
        expect(stored.status).toEqual({ state: "queued", attempt: 2, conditions: [] });
        expect(hasFastProperties(stored.status as object)).toBe(true);
        // Its values are the writer's, not copies: only the object holding them is new.
        expect((stored.status as { conditions: unknown }).conditions).toBe(status.conditions);
      });

      it("watchers get their own copies", async () => {
        const a = await collect("Worker", 0);
        const b = await collect("Worker", 0);
        await store.create(worker("w1"));
        await eventually(() => a.events.length === 1 && b.events.length === 1, "both watchers");
        (a.events[0].object.spec as any).max_concurrency = 50;
        expect((b.events[0].object.spec as any).max_concurrency).toBe(2);
        expect(((await store.get<StoredObject>("Worker", "w1"))!.spec as any).max_concurrency).toBe(2);
      });
    });

    describe("watch", () => {
      it("replays from the log, then streams live writes exactly once and in commit order", async () => {
        for (let i = 0; i < 5; i++) await store.create(worker(`w${i}`));
        await store.delete("Worker", "w4");
        const replayed = await store.revision();
        const { events, handle } = await collect(undefined, 0);
        const writes: Promise<unknown>[] = [];
        for (let i = 0; i < 60; i++) {
          if (i % 3 === 0) writes.push(store.create(task(`t${i}`)));
          else if (i % 3 === 1)
            writes.push(store.updateStatus({ ...worker(`w${i % 4}`), status: { active_count: i } }));
          else
            writes.push(
              store.txn([
                { op: "create", object: task(`x${i}`) },
                { op: "create", object: worker(`x${i}`) },
              ]),
            );
        }
        await Promise.all(writes);
        const head = await store.revision();
        // One revision per write, or fewer: concurrent writes may share one commit (etcd's group commit).
        expect(head).toBeGreaterThan(replayed);
        expect(head).toBeLessThanOrEqual(replayed + 60);
        const expected = 6 + 20 + 20 + 40;
        const got = await beforeSentinel(events);
        expect(got).toHaveLength(expected);
        const revs = got.map((e) => e.revision);
        expect([...new Set(revs)]).toEqual(Array.from({ length: head - r0 }, (_, i) => r0 + i + 1));
        for (let i = 1; i < revs.length; i++) expect(revs[i]).toBeGreaterThanOrEqual(revs[i - 1]);
        expect(events.slice(0, 6).map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual([
          "ADDED w0",
          "ADDED w1",
          "ADDED w2",
          "ADDED w3",
          "ADDED w4",
          "DELETED w4",
        ]);
        for (const e of events)
          if (e.type !== "DELETED") expect(e.object.metadata.resourceVersion).toBe(String(e.revision));
        handle.stop();
      });

      it("loses and repeats nothing of writes committed while the watch is being set up", async () => {
        for (let i = 0; i < 20; i++) await store.create(worker(`w${i}`));
        const from = r0 + 7;
        const events: WatchEvent[] = [];
        const burst = Array.from({ length: 40 }, (_, i) => store.create(task(`t${i}`)));
        const handle = await store.watch(undefined, from, (ev) => events.push(ev));
        const more = Array.from({ length: 40 }, (_, i) => store.create(task(`u${i}`)));
        await Promise.all([...burst, ...more]);
        const head = await store.revision();
        const got = await beforeSentinel(events);
        // Every write after `from` exactly once, in commit order, and every revision up to the head.
        expect(got).toHaveLength(13 + 80);
        expect(new Set(got.map((e) => e.object.metadata.name)).size).toBe(13 + 80);
        const revs = got.map((e) => e.revision);
        for (let i = 1; i < revs.length; i++) expect(revs[i]).toBeGreaterThanOrEqual(revs[i - 1]);
        expect([...new Set(revs)]).toEqual(Array.from({ length: head - from }, (_, i) => from + 1 + i));
        handle.stop();
      });

      it("filters by kind and starts after fromRevision", async () => {
        await store.create(worker("w1"));
        const t1 = await store.create(task("t1"));
        await store.create(task("t2"));
        const { events } = await collect("Task", rvOf(t1));
        await store.create(worker("w2"));
        await store.delete("Task", "t1");
        const got = await beforeSentinel(events, "Task");
        expect(got.map((e) => `${e.type} ${e.object.kind}/${e.object.metadata.name}`)).toEqual([
          "ADDED Task/t2",
          "DELETED Task/t1",
        ]);
      });

      it("from a revision ahead of the head, delivers only events after it", async () => {
        await store.create(worker("w1"));
        const { events } = await collect(undefined, r0 + 3);
        for (let i = 2; i <= 5; i++) await store.create(worker(`w${i}`));
        const got = await beforeSentinel(events);
        expect(got.map((e) => e.revision)).toEqual([r0 + 4, r0 + 5]);
      });

      it("never calls back inside a write", async () => {
        let inWrite = false;
        const seen: boolean[] = [];
        await store.watch(undefined, 0, () => seen.push(inWrite));
        for (let i = 0; i < 5; i++) {
          inWrite = true;
          const p = store.create(worker(`w${i}`));
          inWrite = false;
          await p;
        }
        await eventually(() => seen.length === 5, "5 events");
        expect(seen).toEqual([false, false, false, false, false]);
      });

      it("delivers all events of one revision before yielding", async () => {
        const counts: number[] = [];
        const events: WatchEvent[] = [];
        await store.watch(undefined, 0, (ev) => {
          events.push(ev);
          if (events.length === 1) queueMicrotask(() => counts.push(events.length));
        });
        await store.txn([1, 2, 3, 4].map((i) => ({ op: "create", object: task(`t${i}`) })));
        await eventually(() => counts.length === 1, "the microtask");
        expect(counts).toEqual([4]);
      });

      it("a DELETED event carries the last state at the deletion's revision", async () => {
        const w = await store.updateStatus({ ...(await store.create(worker("w1"))), status: { active_count: 3 } });
        const { events } = await collect("Worker", rvOf(w));
        const deleted = await store.delete("Worker", "w1");
        await eventually(() => events.length === 1, "the deletion");
        expect(events[0].type).toBe("DELETED");
        expect(events[0].revision).toBe(rvOf(w) + 1);
        expect(events[0].object.status).toEqual({ active_count: 3 });
        expect(events[0].object.metadata.uid).toBe(deleted.metadata.uid);
        expect(events[0].object.metadata.resourceVersion).toBe(String(rvOf(w) + 1));
      });

      it("stop ends delivery, even within the revision being delivered", async () => {
        // All events of a revision go out in one synchronous run, so a microtask queued by the
        // first callback runs after every event this watcher would get of that revision.
        const events: string[] = [];
        let afterRun: string[] | undefined;
        const handle = await store.watch(undefined, await store.revision(), (ev) => {
          events.push(ev.object.metadata.name);
          handle.stop();
          queueMicrotask(() => (afterRun = [...events]));
        });
        await store.txn([1, 2, 3].map((i) => ({ op: "create", object: worker(`w${i}`) })));
        await eventually(() => afterRun !== undefined, "the first event");
        expect(afterRun).toHaveLength(1);
      });

      it("a callback may write to the store; its write is delivered after the current event", async () => {
        const seen: string[] = [];
        await store.watch("Worker", 0, (ev) => {
          seen.push(`${ev.type} ${ev.object.metadata.name}`);
          if (ev.object.metadata.name === "w1" && ev.type === "ADDED") void store.create(worker("w2"));
        });
        await store.create(worker("w1"));
        await eventually(() => seen.length === 2, "two events");
        expect(seen).toEqual(["ADDED w1", "ADDED w2"]);
      });

      it("watching from a compacted revision is Gone (410); from the compacted revision itself it works", async () => {
        for (let i = 0; i < 6; i++) await store.create(worker(`w${i}`));
        const at = r0 + 4;
        await store.compact(at);
        expect(await store.revision()).toBe(r0 + 6);
        expect((await store.list("Worker")).items).toHaveLength(6);
        const err = await storeError(store.watch(undefined, at - 1, () => undefined));
        expect(err.reason).toBe("Gone");
        expect(err.code).toBe(410);
        const err0 = await storeError(store.watch("Worker", 0, () => undefined));
        expect(err0.reason).toBe("Gone");
        const { events } = await collect(undefined, at);
        await store.create(worker("w6"));
        await eventually(() => events.length === 3, "events after the compaction");
        expect(events.map((e) => e.revision)).toEqual([r0 + 5, r0 + 6, r0 + 7]);
      });
    });

    describe("the lease guard: no write adds a lease its worker cannot hold", () => {
      const cap = { cpu_millis: 1000, memory_mb: 1024, disk_mb: 0, gpu_count: 0 };
      const lease = (
        w: string,
        placement: "shared" | "exclusive",
        reservation: Record<string, number>,
        state = "leased",
      ) => ({
        state,
        attempt: 1,
        lease: {
          worker: w,
          epoch: 1,
          mode: "pull",
          leased_at: "2026-01-01T00:00:00.000Z",
          lease_until: "2026-01-01T01:00:00.000Z",
          placement,
          reservation: { cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0, ...reservation },
        },
      });
      async function seed(maxConcurrency = 4) {
        await store.create(
          worker("w1", undefined, { max_concurrency: maxConcurrency, initial_concurrency: 1, resource_capacity: cap }),
        );
        for (const n of ["t1", "t2", "t3"]) await store.create(task(n));
      }
      const withStatus = async (name: string, status: unknown) => ({
        ...(await store.get<StoredObject>("Task", name))!,
        status,
      });

      it("refuses a lease that would over-reserve a dimension, naming it, and stores nothing", async () => {
        await seed();
        await store.updateStatus(await withStatus("t1", lease("w1", "shared", { cpu_millis: 1000 })));
        const rev = await store.revision();
        const e = await storeError(
          store.updateStatus(await withStatus("t2", lease("w1", "shared", { cpu_millis: 1000 }))),
        );
        expect(e.reason).toBe("Conflict");
        expect(e.code).toBe(409);
        expect(e.causes.map((c) => c.field)).toEqual(["status.lease.reservation.cpu_millis"]);
        expect(e.message).toContain("cpu_millis");
        expect(await store.revision()).toBe(rev);
        expect((await store.get<StoredObject>("Task", "t2"))!.status).toBeUndefined();
      });

      it("checks the leases of one transaction one after another", async () => {
        await seed();
        const e = await storeError(
          store.txn([
            { op: "updateStatus", object: await withStatus("t1", lease("w1", "shared", { memory_mb: 600 })) },
            { op: "updateStatus", object: await withStatus("t2", lease("w1", "shared", { memory_mb: 600 })) },
          ]),
        );
        expect(e.causes.map((c) => c.field)).toEqual(["status.lease.reservation.memory_mb"]);
        expect((await store.get<StoredObject>("Task", "t1"))!.status).toBeUndefined();
      });

      it("a transaction refused after granting a lease leaves nothing of it for the next guard", async () => {
        await seed();
        const t2 = await withStatus("t2", { state: "queued" });
        // The lease on t1 is decided, then the stale write on t2 refuses the whole transaction.
        const e = await storeError(
          store.txn([
            { op: "updateStatus", object: await withStatus("t1", lease("w1", "shared", { memory_mb: 600 })) },
            { op: "updateStatus", object: { ...t2, metadata: { ...t2.metadata, resourceVersion: "1" } } },
          ]),
        );
        expect(e.reason).toBe("Conflict");
        // Were t1's 600 MB still counted, 1,000 more would not fit in 1,024.
        await store.updateStatus(await withStatus("t3", lease("w1", "shared", { memory_mb: 1000 })));
        expect(
          (await storeError(store.updateStatus(await withStatus("t1", lease("w1", "shared", { memory_mb: 100 })))))
            .reason,
        ).toBe("Conflict");
      });

      it("keeps an exclusive lease alone, in both orders", async () => {
        await seed();
        await store.updateStatus(await withStatus("t1", lease("w1", "exclusive", {})));
        expect(
          (await storeError(store.updateStatus(await withStatus("t2", lease("w1", "shared", {}))))).message,
        ).toContain("worker_has_exclusive_task");
        await store.updateStatus(await withStatus("t1", { state: "clean", attempt: 1 }));
        await store.updateStatus(await withStatus("t2", lease("w1", "shared", {})));
        expect(
          (await storeError(store.updateStatus(await withStatus("t3", lease("w1", "exclusive", {}))))).message,
        ).toContain("exclusive_worker_busy");
      });

      it("holds active leases to max_concurrency", async () => {
        await seed(2);
        await store.updateStatus(await withStatus("t1", lease("w1", "shared", {})));
        await store.updateStatus(await withStatus("t2", lease("w1", "shared", {})));
        expect(
          (await storeError(store.updateStatus(await withStatus("t3", lease("w1", "shared", {}))))).message,
        ).toContain("worker_concurrency_reached");
      });

      it("refuses a lease on a worker that does not exist", async () => {
        await seed();
        const e = await storeError(store.updateStatus(await withStatus("t1", lease("nope", "shared", {}))));
        expect(e.causes.map((c) => c.field)).toEqual(["status.lease.worker"]);
      });

      it("lets a lease it already holds be renewed or started after capacity shrank, and a release frees room", async () => {
        await seed();
        await store.updateStatus(await withStatus("t1", lease("w1", "shared", { cpu_millis: 800 })));
        const w = (await store.get<StoredObject>("Worker", "w1"))!;
        await store.update({ ...w, spec: { ...(w.spec as object), resource_capacity: { ...cap, cpu_millis: 500 } } });
        await store.updateStatus(await withStatus("t1", { ...lease("w1", "shared", { cpu_millis: 800 }, "running") }));
        expect(
          (await storeError(store.updateStatus(await withStatus("t2", lease("w1", "shared", { cpu_millis: 100 })))))
            .message,
        ).toContain("cpu_millis");
        await store.delete("Task", "t1");
        await store.updateStatus(await withStatus("t2", lease("w1", "shared", { cpu_millis: 500 })));
      });

      it("a reopened store still knows every worker's leases", async (t) => {
        if (!ctx.reopen) return t.skip();
        await seed();
        await store.updateStatus(await withStatus("t1", lease("w1", "shared", { cpu_millis: 700 })));
        await store.close();
        store = await ctx.reopen();
        expect(
          (await storeError(store.updateStatus(await withStatus("t2", lease("w1", "shared", { cpu_millis: 700 })))))
            .reason,
        ).toBe("Conflict");
      });
    });

    describe("group commit", () => {
      it("apply makes a write visible to pending watchers at once; the rest see it only once durable", async () => {
        const early: WatchEvent[] = [];
        const late: WatchEvent[] = [];
        const from = await store.revision();
        await store.watch(undefined, from, (e) => early.push(e), { pending: true });
        await store.watch(undefined, from, (e) => late.push(e));
        const applied = await store.apply([{ op: "create", object: task("t1") }]);
        expect(applied.revision).toBe(from + 1);
        expect(applied.results.map((o) => o.metadata.name)).toEqual(["t1"]);
        await eventually(() => early.length === 1, "the pending watcher's event");
        await applied.durable;
        await eventually(() => late.length === 1, "the durable watcher's event");
        expect(late[0].revision).toBe(applied.revision);
      });

      it("many concurrent writes all commit, each answered once durable, at the revision its object carries", async () => {
        const written = await Promise.all(Array.from({ length: 64 }, (_, i) => store.create(task(`t${i}`))));
        const head = await store.revision();
        const listed = new Map((await store.list("Task")).items.map((t) => [t.metadata.name, rvOf(t)]));
        expect(listed.size).toBe(64);
        for (const w of written) {
          expect(rvOf(w)).toBeGreaterThan(r0);
          expect(rvOf(w)).toBeLessThanOrEqual(head);
          expect(listed.get(w.metadata.name)).toBe(rvOf(w));
        }
        // A group shares its commit's revision; with no other writer the revisions run without a gap to the head.
        const revs = [...new Set(written.map(rvOf))].sort((a, b) => a - b);
        expect(revs).toEqual(Array.from({ length: revs.length }, (_, i) => r0 + 1 + i));
        expect(revs.at(-1)).toBe(head);
      });

      it("a write that fails fails alone; the others of its group commit", async () => {
        await store.create(task("taken"));
        const results = await Promise.allSettled([
          store.create(task("a")),
          store.create(task("taken")),
          store.create(task("b")),
        ]);
        expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
        expect(names((await store.list("Task")).items)).toEqual(["a", "b", "taken"]);
      });
    });

    describe("durability", () => {
      it("a reopened store finds everything committed, and continues the revision", async (t) => {
        if (!ctx.reopen) return t.skip();
        const w1 = await store.create(worker("w1", { a: "b" }));
        await store.update({ ...w1, spec: { max_concurrency: 8, initial_concurrency: 2 } });
        await store.updateStatus({ ...(await store.get<StoredObject>("Worker", "w1"))!, status: { active_count: 1 } });
        await store.txn([
          { op: "create", object: task("t1") },
          { op: "create", object: task("t2") },
        ]);
        await store.delete("Task", "t2");
        const rejected = await storeError(
          store.txn([
            { op: "create", object: task("t3") },
            { op: "create", object: task("t1") },
          ]),
        );
        expect(rejected.reason).toBe("AlreadyExists");
        const rev = await store.revision();
        const workers = await store.list("Worker");
        const tasks = await store.list("Task");
        await store.close();

        const again = await ctx.reopen();
        extra.push(again);
        expect(await again.revision()).toBe(rev);
        expect(await again.list("Worker")).toEqual(workers);
        expect(await again.list("Task")).toEqual(tasks);
        expect(names(tasks.items)).toEqual(["t1"]);
        expect(((await again.get<StoredObject>("Worker", "w1"))!.status as any).active_count).toBe(1);
        const replay: WatchEvent[] = [];
        await again.watch(undefined, 0, (e) => replay.push(e));
        await eventually(() => replay.length === 6, "the replayed log");
        expect(replay.map((e) => `${e.type} ${e.object.metadata.name}@${e.revision - r0}`)).toEqual([
          "ADDED w1@1",
          "MODIFIED w1@2",
          "MODIFIED w1@3",
          "ADDED t1@4",
          "ADDED t2@4",
          "DELETED t2@5",
        ]);
        const next = await again.create(task("t3"));
        expect(rvOf(next)).toBe(rev + 1);
      });
    });
  });
}
