// The claim queue's walk: best task first across every shape and capability heap a worker
// may draw from, shapes skipped for the rest of a walk, and the queue unchanged afterwards.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Task } from "../../src/resources/types.ts";
import { ClaimQueue, claimOrder, type QueueEntry } from "../../src/scheduler/queue.ts";

const task = (name: string, o: { priority: number; created: number; cap: string; cpu: number }): Task =>
  ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Task",
    metadata: { name, creationTimestamp: new Date(Date.UTC(2026, 0, 1) + o.created * 1000).toISOString() },
    spec: { required_capability: o.cap, priority: o.priority, execution_profile: { placement: "shared", resources: { cpu_millis: o.cpu } } },
    status: { state: "queued", attempt: 1 },
  }) as unknown as Task;

const arbTasks = fc.array(
  fc.record({ priority: fc.integer({ min: 0, max: 3 }), created: fc.integer({ min: 0, max: 20 }), cap: fc.constantFrom("", "linux", "gpu", "mac"), cpu: fc.constantFrom(0, 100, 200, 300, 400) }),
  { maxLength: 60 },
);

function entries(ts: Task[], caps: string[], skipCpu: Set<number>) {
  return ts
    .filter((t) => caps.includes("*") || t.spec.required_capability === "" || caps.includes(t.spec.required_capability!))
    .filter((t) => !skipCpu.has(t.spec.execution_profile!.resources!.cpu_millis!))
    .map((t): QueueEntry => ({ name: t.metadata.name, priority: t.spec.priority ?? 0, created: t.metadata.creationTimestamp!, shape: "" }))
    .sort(claimOrder)
    .map((e) => e.name);
}

describe("ClaimQueue.walk", () => {
  it("offers every task a worker's capabilities allow, in claim order, and skips whole shapes", () => {
    fc.assert(
      fc.property(arbTasks, fc.subarray(["linux", "gpu", "mac", "*"]), fc.subarray([100, 300]), (specs, caps, skipCpu) => {
        const q = new ClaimQueue();
        const ts = specs.map((s, i) => task(`t${String(i).padStart(3, "0")}`, s));
        for (const t of ts) q.upsert(t);
        const skip = new Set(skipCpu);
        const seen: string[] = [];
        const walk = q.walk(caps);
        for (let n = walk.next(); n; n = walk.next()) {
          const cpu = n.shape.sample.spec.execution_profile!.resources!.cpu_millis!;
          if (skip.has(cpu)) walk.skip();
          else {
            seen.push(n.entry.name);
            walk.take();
          }
        }
        walk.close();
        expect(seen).toEqual(entries(ts, caps, skip));
        // Nothing was removed: a second walk sees the same tasks.
        const again: string[] = [];
        const w2 = q.walk(caps);
        for (let n = w2.next(); n; n = w2.next()) {
          again.push(n.entry.name);
          w2.take();
        }
        w2.close();
        expect(again).toEqual(entries(ts, caps, new Set()));
        expect(q.size).toBe(ts.length);
      }),
      { numRuns: 300 },
    );
  });

  it("follows removals and priority changes between walks", () => {
    const q = new ClaimQueue();
    q.upsert(task("a", { priority: 0, created: 1, cap: "linux", cpu: 100 }));
    q.upsert(task("b", { priority: 0, created: 2, cap: "linux", cpu: 100 }));
    q.upsert(task("c", { priority: 0, created: 3, cap: "linux", cpu: 200 }));
    q.upsert(task("c", { priority: 5, created: 3, cap: "linux", cpu: 200 }));
    q.remove("a");
    const w = q.walk(["linux"]);
    const order: string[] = [];
    for (let n = w.next(); n; n = w.next()) {
      order.push(n.entry.name);
      w.take();
    }
    w.close();
    expect(order).toEqual(["c", "b"]);
    expect(q.shapeCount).toBe(2);
  });
});

describe("ClaimQueue.countAhead", () => {
  it("counts a shape's entries before any pivot in claim order, and reports the strictly higher priorities", () => {
    fc.assert(
      fc.property(arbTasks, fc.array(fc.nat(), { maxLength: 10 }), (specs, removals) => {
        const q = new ClaimQueue();
        const ts = specs.map((s, i) => task(`t${String(i).padStart(3, "0")}`, s));
        for (const t of ts) q.upsert(t);
        // Some leave the queue (claimed, cancelled), so the heaps are not freshly built.
        for (const r of removals) if (ts.length) q.remove(ts[r % ts.length].metadata.name);
        for (const shape of q.allShapes()) {
          const names = q.namesOf(shape);
          const all = names.map((n) => q.locate(n)!.entry);
          for (const pivot of all) {
            const higher: string[] = [];
            const n = q.countAhead(shape, pivot, (e) => higher.push(e.name));
            const before = all.filter((e) => claimOrder(e, pivot) < 0);
            expect(n).toBe(before.length);
            expect(higher.sort()).toEqual(before.filter((e) => e.priority > pivot.priority).map((e) => e.name).sort());
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
