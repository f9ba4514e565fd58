// The Event GC controller: Events past the TTL, and the oldest beyond the count, are deleted;
// a second pass deletes nothing more; the recorder is told which ones went. On etcd, where
// Events expire by their leases, a pass counts them and lists them only when it must.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BACKSTOP_PASSES, EventGc } from "../../src/reconciler/event-gc.ts";
import type { EventObject } from "../../src/reconciler/events.ts";
import { openEtcdStore } from "../../src/store/etcd.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store } from "../../src/store/store.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";
import { event } from "../store-contract.ts";

let store: Store;

const T0 = Date.parse("2030-01-01T00:00:00Z");
/** An Event about task t, last seen `minutes` after T0. */
const eventAt = (name: string, minutes: number) =>
  event(name, new Date(T0 + minutes * 60_000).toISOString()) as EventObject;
const names = async () => (await store.list<EventObject>("Event")).items.map((e) => e.metadata.name).sort();

describe("Event GC", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-evgc-"));
    store = openSqliteStore(join(dir, "loom.db"));
  });
  afterEach(async () => {
    await store.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("drops what is past the TTL and the oldest over the count, once; and looks again after everyMs", async () => {
    for (const [n, m] of [
      ["e1", 0],
      ["e2", 10],
      ["e3", 20],
      ["e4", 30],
      ["e5", 40],
      ["e6", 50],
    ] as const)
      await store.create(eventAt(n, m));
    const dropped: string[][] = [];
    // Now is T0 + 65 min: a one-hour TTL takes e1; at most four Events keep e3..e6.
    const gc = new EventGc(store, {
      maxEvents: 4,
      ttlMs: 3_600_000,
      everyMs: 10_000,
      now: () => T0 + 65 * 60_000,
      dropped: (s) => dropped.push([...s].sort()),
    });
    expect(await gc.reconcile()).toEqual({ writes: 2, requeueAfterMs: 10_000 });
    expect(await names()).toEqual(["e3", "e4", "e5", "e6"]);
    expect(dropped).toEqual([["e1", "e2"]]);

    const rev = await store.revision();
    expect(await gc.reconcile()).toEqual({ writes: 0, requeueAfterMs: 10_000 });
    expect(await store.revision()).toBe(rev);
    expect(await names()).toEqual(["e3", "e4", "e5", "e6"]);
  });
});

describe.skipIf(etcdMissing)("Event GC on a store that expires Events itself (etcd)", () => {
  let etcd: EtcdCluster;
  beforeEach(async () => {
    etcd = await startEtcd();
    store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: "/loom-evgc", ttlSeconds: { Event: 3600 } });
    for (const [n, m] of [
      ["e1", 0],
      ["e2", 10],
      ["e3", 20],
      ["e4", 30],
    ] as const)
      await store.create(eventAt(n, m));
  }, 30_000);
  afterEach(async () => {
    await store.close();
    await etcd.stop();
  });

  it("leaves the time rule to the store, keeps the count rule, and lists all once every BACKSTOP_PASSES passes", async () => {
    const rev = await store.revision();
    // T0 + 65 min: e1 is past a one-hour TTL, but etcd deletes it when its lease runs out.
    const gc = (maxEvents: number, minutes: number) =>
      new EventGc(store, { maxEvents, ttlMs: 3_600_000, everyMs: 10_000, now: () => T0 + minutes * 60_000 });
    const roomy = gc(10, 65);
    expect(await roomy.reconcile()).toEqual({ writes: 0, requeueAfterMs: 10_000 });
    expect(await names()).toEqual(["e1", "e2", "e3", "e4"]);
    expect(await store.revision()).toBe(rev);

    // Over the count: the pass lists them, and drops the oldest beyond it and what is past the TTL.
    expect(await gc(3, 65).reconcile()).toEqual({ writes: 1, requeueAfterMs: 10_000 });
    expect(await names()).toEqual(["e2", "e3", "e4"]);

    // Much later every Event is past the TTL: only the backstop pass looks, and drops them
    // (Events stored without a lease, by a Hub before leases, would never go otherwise).
    const late = gc(10, 600);
    for (let i = 1; i < BACKSTOP_PASSES; i++)
      expect(await late.reconcile()).toEqual({ writes: 0, requeueAfterMs: 10_000 });
    expect(await names()).toEqual(["e2", "e3", "e4"]);
    expect(await late.reconcile()).toEqual({ writes: 3, requeueAfterMs: 10_000 });
    expect(await names()).toEqual([]);
  });
});
