// The Event GC controller: Events past the TTL, and the oldest beyond the count, are deleted;
// a second pass deletes nothing more; the recorder is told which ones went.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { EventGc } from "../../src/reconciler/event-gc.ts";
import type { EventObject } from "../../src/reconciler/events.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store } from "../../src/store/store.ts";

let dir: string;
let store: Store;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-evgc-"));
  store = openSqliteStore(join(dir, "loom.db"));
});
afterEach(async () => {
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const T0 = Date.parse("2030-01-01T00:00:00Z");
/** An Event about task t, last seen `minutes` after T0. */
const event = (name: string, minutes: number): EventObject => {
  const at = new Date(T0 + minutes * 60_000).toISOString();
  return {
    apiVersion: "v1",
    kind: "Event",
    metadata: { name },
    involvedObject: { apiVersion: "loom.dev/v1alpha1", kind: "Task", name: "t" },
    type: "Normal",
    reason: "LeaseGranted",
    message: name,
    count: 1,
    firstTimestamp: at,
    lastTimestamp: at,
    source: { component: "loom-hub" },
  };
};
const names = async () => (await store.list<EventObject>("Event")).items.map((e) => e.metadata.name).sort();

describe("Event GC", () => {
  it("drops what is past the TTL and the oldest over the count, once; and looks again after everyMs", async () => {
    for (const [n, m] of [
      ["e1", 0],
      ["e2", 10],
      ["e3", 20],
      ["e4", 30],
      ["e5", 40],
      ["e6", 50],
    ] as const)
      await store.create(event(n, m));
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
