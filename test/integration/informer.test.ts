// The informer over a real SQLite store: list + watch into a cache, handlers, indexes,
// read-your-writes with waitForRevision, and recovery from Gone by relisting.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Informer, type InformerEvent } from "../../src/store/cache.ts";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject } from "../../src/store/store.ts";
import { eventually, task, worker } from "../store-contract.ts";

let dir: string;
let store: SqliteStore;
const informers: Informer[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-informer-"));
  store = openSqliteStore(join(dir, "loom.db"));
});
afterEach(async () => {
  for (const i of informers.splice(0)) i.stop();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

function informer(kinds: string | string[], s: Store = store): Informer {
  const inf = new Informer(s, kinds);
  informers.push(inf);
  return inf;
}

const rv = (o: StoredObject) => Number(o.metadata.resourceVersion);
const describeEv = (e: InformerEvent) => `${e.type} ${e.object.kind}/${e.object.metadata.name}`;
const leasedTo = (t: StoredObject, w: string) => ({
  ...t,
  status: {
    state: "leased",
    lease: { worker: w, epoch: 1, leased_at: "2030-01-01T00:00:00Z", lease_until: "2030-01-01T00:10:00Z" },
  },
});

describe("sync", () => {
  it("lists, reports synced, and hands every existing object to handlers as ADDED", async () => {
    await store.create(worker("w2"));
    await store.create(worker("w1"));
    await store.create(task("t1"));
    const inf = informer("Worker");
    const seen: string[] = [];
    inf.on((e) => seen.push(describeEv(e)));
    expect(inf.synced).toBe(false);
    await inf.start();
    expect(inf.synced).toBe(true);
    expect(seen.sort()).toEqual(["ADDED Worker/w1", "ADDED Worker/w2"]);
    expect(inf.list("Worker").map((o) => o.metadata.name)).toEqual(["w1", "w2"]);
    expect(inf.get("Worker", "w1")).toEqual(await store.get("Worker", "w1"));
    expect(inf.revision).toBe(await store.revision());
    expect(inf.lastEventAt).toBeGreaterThan(0);
    expect(() => inf.list("Task")).toThrow(/does not cache kind Task/);
  });

  it("caches several kinds at once", async () => {
    await store.create(worker("w1"));
    await store.create(task("t1"));
    const inf = informer(["Worker", "Task"]);
    await inf.start();
    expect(inf.list("Worker").map((o) => o.metadata.name)).toEqual(["w1"]);
    expect(inf.list("Task").map((o) => o.metadata.name)).toEqual(["t1"]);
    const t2 = await store.create(task("t2"));
    await inf.waitForRevision(rv(t2));
    expect(inf.get("Task", "t2")).toEqual(t2);
  });
});

describe("events", () => {
  it("applies watch events in order and passes the previous object along", async () => {
    const inf = informer("Worker");
    await inf.start();
    const events: InformerEvent[] = [];
    inf.on((e) => events.push(e));
    const v1 = await store.create(worker("w1"));
    const v2 = await store.update({ ...v1, spec: { max_concurrency: 5, initial_concurrency: 1 } });
    await store.create(task("t1")); // another kind: not seen by this informer's handlers
    const before = inf.lastEventAt!;
    await store.delete("Worker", "w1");
    await inf.waitForRevision(await store.revision());
    expect(events.map(describeEv)).toEqual(["ADDED Worker/w1", "MODIFIED Worker/w1", "DELETED Worker/w1"]);
    expect(events[1].old).toEqual(v1);
    expect(events[1].object).toEqual(v2);
    expect(events[2].old).toEqual(v2);
    expect(events.every((e) => !e.synthetic)).toBe(true);
    expect(inf.get("Worker", "w1")).toBeUndefined();
    expect(inf.lastEventAt).toBeGreaterThanOrEqual(before);
  });

  it("returns the cached object itself (readers must not mutate it)", async () => {
    const inf = informer("Worker");
    await inf.start();
    let fromHandler: StoredObject | undefined;
    inf.on((e) => (fromHandler = e.object));
    const w = await store.create(worker("w1"));
    await inf.waitForRevision(rv(w));
    expect(inf.get("Worker", "w1")).toBe(fromHandler);
    expect(inf.list("Worker")[0]).toBe(fromHandler);
  });

  it("a throwing handler does not stop the others or the cache", async () => {
    const inf = informer("Worker");
    await inf.start();
    const seen: string[] = [];
    const errors: unknown[] = [];
    const orig = console.error;
    console.error = (...a: unknown[]) => errors.push(a);
    try {
      inf.on(() => {
        throw new Error("boom");
      });
      inf.on((e) => seen.push(e.object.metadata.name));
      const w = await store.create(worker("w1"));
      await inf.waitForRevision(rv(w));
    } finally {
      console.error = orig;
    }
    expect(seen).toEqual(["w1"]);
    expect(errors).toHaveLength(1);
    expect(inf.get("Worker", "w1")).toBeDefined();
  });

  it("stop ends updates and unsubscribe removes a handler", async () => {
    const inf = informer("Worker");
    await inf.start();
    const a: string[] = [];
    const b: string[] = [];
    const off = inf.on((e) => a.push(e.object.metadata.name));
    inf.on((e) => b.push(e.object.metadata.name));
    const w1 = await store.create(worker("w1"));
    await inf.waitForRevision(rv(w1));
    off();
    const w2 = await store.create(worker("w2"));
    await inf.waitForRevision(rv(w2));
    // Stopped by a handler on the first event of a revision that adds two workers: the store
    // delivers a revision in one synchronous run, so a microtask queued then sees all of it.
    let afterRun: string[] | undefined;
    inf.on((e) => {
      if (e.object.metadata.name !== "w3") return;
      inf.stop();
      queueMicrotask(() => (afterRun = [...b]));
    });
    await store.txn([
      { op: "create", object: worker("w3") },
      { op: "create", object: worker("w4") },
    ]);
    await eventually(() => afterRun !== undefined, "the handler to stop the informer");
    expect(a).toEqual(["w1"]);
    expect(afterRun).toEqual(["w1", "w2", "w3"]);
    expect(inf.get("Worker", "w4")).toBeUndefined();
    await expect(inf.waitForRevision(1000)).rejects.toThrow(/stopped/);
  });
});

describe("waitForRevision", () => {
  it("lets a writer read its own write, including every object of a txn", async () => {
    const inf = informer(["Worker", "Task"]);
    await inf.start();
    const w = await store.create(worker("w1"));
    const t = await store.create(task("t1"));
    const writing = store.txn([
      { op: "updateStatus", object: leasedTo(t, "w1") },
      { op: "updateStatus", object: { ...w, status: { active_count: 1 } } },
      { op: "create", object: task("t2") },
    ]);
    // The cache lags the store: this is why writers wait for their revision.
    expect(inf.get("Task", "t2")).toBeUndefined();
    const written = await writing;
    const rev = rv(written[0]);
    await inf.waitForRevision(rev);
    expect(inf.revision).toBeGreaterThanOrEqual(rev);
    expect(inf.get("Task", "t1")).toEqual(written[0]);
    expect(inf.get("Worker", "w1")).toEqual(written[1]);
    expect(inf.get("Task", "t2")).toEqual(written[2]);
  });

  it("resolves for a revision written to a kind the informer does not cache", async () => {
    const inf = informer("Worker");
    await inf.start();
    const t = await store.create(task("t1"));
    await expect(inf.waitForRevision(rv(t), 2000)).resolves.toBeUndefined();
    expect(inf.revision).toBe(rv(t));
  });

  it("resolves at once for a revision already applied, and can time out", async () => {
    const w = await store.create(worker("w1"));
    const inf = informer("Worker");
    const early = inf.waitForRevision(rv(w));
    await inf.start();
    await early;
    await expect(inf.waitForRevision(rv(w))).resolves.toBeUndefined();
    await expect(inf.waitForRevision(rv(w) + 5, 30)).rejects.toThrow(/did not reach revision/);
  });
});

describe("indexes", () => {
  it("indexes objects by derived values and keeps the index current", async () => {
    const w = await store.create(worker("w1"));
    await store.create(worker("w2")); // a lease must name a worker that exists
    const t1 = await store.updateStatus(leasedTo(await store.create(task("t1")), "w1"));
    await store.create(task("t2"));
    const inf = informer(["Worker", "Task"]);
    // An index added before start is filled by the list; one added after start by what is cached.
    inf.addIndex("Task", "worker", (o) => {
      const lease = (o.status as any)?.lease;
      return lease ? [lease.worker] : [];
    });
    await inf.start();
    inf.addIndex("Task", "campaign", (o) => [(o.spec as any).campaign_id]);
    expect(inf.byIndex("Task", "worker", "w1").map((o) => o.metadata.name)).toEqual(["t1"]);
    expect(inf.byIndex("Task", "campaign", "c").map((o) => o.metadata.name)).toEqual(["t1", "t2"]);
    expect(inf.byIndex("Task", "worker", "w2")).toEqual([]);

    const t2 = (await store.get<StoredObject>("Task", "t2"))!;
    await store.updateStatus(leasedTo(t2, "w1"));
    const moved = await store.updateStatus(leasedTo(t1, "w2"));
    await inf.waitForRevision(rv(moved));
    expect(inf.byIndex("Task", "worker", "w1").map((o) => o.metadata.name)).toEqual(["t2"]);
    expect(inf.byIndex("Task", "worker", "w2").map((o) => o.metadata.name)).toEqual(["t1"]);
    expect(inf.byIndex("Task", "worker", "w2")[0]).toBe(inf.get("Task", "t1"));
    expect(inf.indexCounts("Task", "worker")).toEqual(
      new Map([
        ["w1", 1],
        ["w2", 1],
      ]),
    );
    expect(inf.indexCounts("Task", "campaign")).toEqual(new Map([["c", 2]]));
    // A write that leaves the index value as it was: the index hands out the new version.
    const cur = (await store.get<StoredObject>("Task", "t2"))!;
    const touched = await store.updateStatus({ ...cur, status: { ...(cur.status as object), attempt: 7 } });
    await inf.waitForRevision(rv(touched));
    expect(inf.byIndex("Task", "worker", "w1").map((o) => o.metadata.resourceVersion)).toEqual([
      touched.metadata.resourceVersion,
    ]);
    expect(inf.byIndex("Task", "worker", "w1")[0]).toBe(inf.get("Task", "t2"));

    await store.delete("Task", "t2");
    const done = await store.updateStatus({
      ...(await store.get<StoredObject>("Task", "t1"))!,
      status: { state: "clean" },
    });
    await inf.waitForRevision(rv(done));
    expect(inf.byIndex("Task", "worker", "w1")).toEqual([]);
    expect(inf.byIndex("Task", "worker", "w2")).toEqual([]);
    expect(inf.byIndex("Task", "campaign", "c").map((o) => o.metadata.name)).toEqual(["t1"]);
    expect(() => inf.byIndex("Task", "nope", "x")).toThrow(/no index/);
    expect(() => inf.addIndex("Task", "worker", () => [])).toThrow(/already exists/);
    expect(w.metadata.name).toBe("w1");
  });
});

describe("relist after Gone", () => {
  it("relists when the log was compacted past its list, emitting the differences", async () => {
    const w1 = await store.create(worker("w1"));
    const w2 = await store.create(worker("w2"));
    let lists = 0;
    let watches = 0;
    // A store whose first list is overtaken by writes and a compaction before the watch starts.
    const racing = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === "list")
          return async (kind: string) => {
            const res = await target.list(kind);
            if (++lists === 1) {
              await target.delete("Worker", "w1");
              await target.update({ ...w2, spec: { max_concurrency: 6, initial_concurrency: 1 } });
              await target.create(worker("w3"));
              await target.compact(await target.revision());
            }
            return res;
          };
        if (prop === "watch")
          return (...args: Parameters<Store["watch"]>) => {
            watches++;
            return target.watch(...args);
          };
        const v = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const inf = informer("Worker", racing);
    const events: InformerEvent[] = [];
    inf.on((e) => events.push(e));
    await inf.start();

    expect(lists).toBe(2);
    expect(watches).toBe(2);
    expect(events.map(describeEv)).toEqual([
      "ADDED Worker/w1",
      "ADDED Worker/w2",
      "DELETED Worker/w1",
      "MODIFIED Worker/w2",
      "ADDED Worker/w3",
    ]);
    expect(events.every((e) => e.synthetic)).toBe(true);
    expect(events[3].old).toEqual(w2);
    expect((events[3].object.spec as any).max_concurrency).toBe(6);
    expect(events[2].object).toEqual(w1);
    expect(inf.list("Worker")).toEqual((await store.list("Worker")).items);
    expect(inf.revision).toBe(await store.revision());

    // The stream goes on after the relist.
    const w4 = await store.create(worker("w4"));
    await inf.waitForRevision(rv(w4));
    expect(events.map(describeEv).at(-1)).toBe("ADDED Worker/w4");
    expect(events.at(-1)!.synthetic).toBeFalsy();
  });

  it("kinds listed at different revisions neither lose nor repeat events", async () => {
    const w1 = await store.create(worker("w1"));
    let first = true;
    // Writes land between the Worker list and the Task list.
    const racing = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === "list")
          return async (kind: string) => {
            const res = await target.list(kind);
            if (kind === "Worker" && first) {
              first = false;
              await target.create(task("t9"));
              await target.update({ ...w1, metadata: { ...w1.metadata, labels: { moved: "yes" } } });
            }
            return res;
          };
        const v = Reflect.get(target, prop, receiver);
        return typeof v === "function" ? v.bind(target) : v;
      },
    });
    const inf = informer(["Worker", "Task"], racing);
    const events: string[] = [];
    inf.on((e) => events.push(`${describeEv(e)}${e.synthetic ? " (list)" : ""}`));
    await inf.start();
    await inf.waitForRevision(await store.revision());
    expect(events).toEqual(["ADDED Worker/w1 (list)", "ADDED Task/t9 (list)", "MODIFIED Worker/w1"]);
    expect(inf.get("Worker", "w1")?.metadata.labels).toEqual({ moved: "yes" });
  });

  it("an explicit relist with nothing changed emits nothing and keeps streaming", async () => {
    await store.create(worker("w1"));
    const inf = informer("Worker");
    await inf.start();
    const events: string[] = [];
    inf.on((e) => events.push(describeEv(e)));
    await inf.relist();
    expect(events).toEqual([]);
    await store.create(worker("w2"));
    // Exactly once: the superseded watch must not deliver it a second time. A later write
    // marks the end: what came before its event is all the informer gives for w2.
    const sentinel = await store.create(worker("sentinel"));
    await inf.waitForRevision(rv(sentinel));
    expect(events).toEqual(["ADDED Worker/w2", "ADDED Worker/sentinel"]);
  });
});
