// Events as an operator reads them: in time order (by lastTimestamp, as kubectl sorts), a
// repeat folded into one Event with a count, and a watched file named file:/path.
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventColumns } from "../../src/resources/columns.ts";
import { EventRecorder, type EventObject } from "../../src/reconciler/events.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { apiResourceList } from "../../src/api/discovery.ts";
import { eventually, get, hubSlot, startHub } from "../support/hub.ts";

const slot = hubSlot();
afterEach(slot.teardown);

const task = (name: string) => ({ apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name } });

describe("Event budget per reason", () => {
  it("records a burst, then what the reason's rate refills, and counts what it drops; another reason has its own budget", async () => {
    slot.dir = await mkdtemp(join(tmpdir(), "loom-events-"));
    const store = openSqliteStore(join(slot.dir, "loom.db"));
    let clock = 1_000_000;
    const dropped: string[] = [];
    const rec = new EventRecorder(store, {
      maxEvents: 1000,
      flushMs: 5,
      budget: { perSecond: 10, burst: 20 },
      now: () => clock,
      onDrop: (r) => dropped.push(r),
    });
    try {
      const burst = Array.from({ length: 50 }, (_, i) =>
        rec.record({ object: task(`t${i}`), type: "Normal", reason: "LeaseGranted", message: "leased" }),
      );
      expect(burst.filter(Boolean)).toHaveLength(20);
      expect(dropped).toHaveLength(30);
      expect(rec.record({ object: task("x"), type: "Warning", reason: "PushRefused", message: "refused" })).toBe(true);
      clock += 500; // half a second refills 5
      const later = Array.from({ length: 10 }, (_, i) =>
        rec.record({ object: task(`u${i}`), type: "Normal", reason: "LeaseGranted", message: "leased" }),
      );
      expect(later.filter(Boolean)).toHaveLength(5);
      await rec.flush();
      const { items } = await store.list<EventObject>("Event");
      expect(items.filter((e) => e.reason === "LeaseGranted")).toHaveLength(25);
      expect(items.filter((e) => e.reason === "PushRefused")).toHaveLength(1);
      expect(new Set(dropped)).toEqual(new Set(["LeaseGranted"]));
    } finally {
      await rec.close();
      await store.close();
    }
  });
  it("replicas split the rate: a share of 1/3 refills a third as fast, and the burst stays whole", async () => {
    slot.dir = await mkdtemp(join(tmpdir(), "loom-events-"));
    const store = openSqliteStore(join(slot.dir, "loom.db"));
    let clock = 1_000_000;
    let replicas = 3;
    const rec = new EventRecorder(store, {
      maxEvents: 1000,
      flushMs: 5,
      budget: { perSecond: 30, burst: 20 },
      now: () => clock,
      share: () => 1 / replicas,
    });
    const leased = (n: number, at: string) =>
      Array.from({ length: n }, (_, i) =>
        rec.record({ object: task(`${at}${i}`), type: "Normal", reason: "LeaseGranted", message: "leased" }),
      ).filter(Boolean).length;
    try {
      expect(leased(30, "a")).toBe(20);
      clock += 1000; // 30 a second over three replicas: 10 for this one
      expect(leased(30, "b")).toBe(10);
      replicas = 1; // the others left: the whole rate again
      clock += 500;
      expect(leased(30, "c")).toBe(15);
      await rec.flush();
      const { items } = await store.list<EventObject>("Event");
      expect(items).toHaveLength(45);
    } finally {
      await rec.close();
      await store.close();
    }
  });
});

describe("Event aggregation and order", () => {
  it("a repeat bumps count and lastTimestamp of one Event; a different message is its own", async () => {
    slot.dir = await mkdtemp(join(tmpdir(), "loom-events-"));
    const store = openSqliteStore(join(slot.dir, "loom.db"));
    const rec = new EventRecorder(store, { maxEvents: 100, flushMs: 5 });
    try {
      rec.record({ object: task("t1"), type: "Warning", reason: "PushRefused", message: "runner w1 answered 503" });
      rec.record({ object: task("t1"), type: "Warning", reason: "PushRefused", message: "runner w1 answered 503" });
      await rec.flush();
      const first = (await store.list<EventObject>("Event")).items;
      expect(first).toHaveLength(1);
      expect(first[0].count).toBe(2);
      await new Promise((r) => setTimeout(r, 15));
      rec.record({ object: task("t1"), type: "Warning", reason: "PushRefused", message: "runner w1 answered 503" });
      rec.record({ object: task("t1"), type: "Warning", reason: "PushRefused", message: "runner w2 answered 503" });
      await rec.flush();
      const { items } = await store.list<EventObject>("Event");
      expect(items).toHaveLength(2);
      const agg = items.find((e) => e.message.includes("w1"))!;
      expect(agg.metadata.name).toBe(first[0].metadata.name);
      expect(agg.count).toBe(3);
      expect(agg.firstTimestamp).toBe(first[0].firstTimestamp);
      expect(agg.lastTimestamp > first[0].lastTimestamp).toBe(true);
    } finally {
      await rec.close();
      await store.close();
    }
  });

  it("the API lists Events by lastTimestamp, names a file as file:/path, and keeps `ev` for core Events", async () => {
    slot.dir = await mkdtemp(join(tmpdir(), "loom-events-"));
    const inv = join(slot.dir, "inventory.json");
    await writeFile(inv, "{ not json");
    slot.h = await startHub({ gitopsPaths: [slot.dir], gitopsDebounceMs: 30 });
    const ev = slot.h.hub.events;
    ev.record({ object: task("b"), type: "Normal", reason: "LeaseGranted", message: "leased" });
    await ev.flush();
    await new Promise((r) => setTimeout(r, 15));
    ev.record({ object: task("a"), type: "Normal", reason: "LeaseGranted", message: "leased" });
    await ev.flush();
    await new Promise((r) => setTimeout(r, 15));
    ev.record({ object: task("b"), type: "Normal", reason: "LeaseGranted", message: "leased" }); // b's Event is now the newest
    await ev.flush();
    const items = await eventually(async () => {
      const r = (await get(slot.h!.url, "/api/v1/events")).body.items as EventObject[];
      return r.some((e) => e.reason === "FileRejected") && r;
    }, "the FileRejected event");
    const stamps = items.map((e) => e.lastTimestamp);
    expect(stamps).toEqual([...stamps].sort());
    const tasks = items
      .filter((e) => e.involvedObject.kind === "Task")
      .map((e) => `${e.involvedObject.name}:${e.count}`);
    expect(tasks).toEqual(["a:1", "b:2"]);
    const file = items.find((e) => e.reason === "FileRejected")!;
    const object = eventColumns.find((c) => c.name === "OBJECT")!.cell(file, new Date());
    expect(object).toBe(`file:${inv}`);
    expect(object).not.toContain("//");
    const loomEvents = apiResourceList().resources.find((r) => r.name === "events")!;
    expect(loomEvents.shortNames).toEqual(["lev"]);
  });
});
