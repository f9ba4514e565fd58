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
    spec: {
      required_capability: o.cap,
      priority: o.priority,
      execution_profile: { placement: "shared", resources: { cpu_millis: o.cpu } },
    },
    status: { state: "queued", attempt: 1 },
  }) as unknown as Task;

const arbTasks = fc.array(
  fc.record({
    priority: fc.integer({ min: 0, max: 3 }),
    created: fc.integer({ min: 0, max: 20 }),
    cap: fc.constantFrom("", "linux", "gpu", "mac"),
    cpu: fc.constantFrom(0, 100, 200, 300, 400),
  }),
  { maxLength: 60 },
);

function entries(ts: Task[], caps: string[], skipCpu: Set<number>) {
  return ts
    .filter(
      (t) => caps.includes("*") || t.spec.required_capability === "" || caps.includes(t.spec.required_capability!),
    )
    .filter((t) => !skipCpu.has(t.spec.execution_profile!.resources!.cpu_millis!))
    .map((t): QueueEntry => ({
      name: t.metadata.name,
      priority: t.spec.priority ?? 0,
      created: t.metadata.creationTimestamp!,
      shape: "",
    }))
    .sort(claimOrder)
    .map((e) => e.name);
}

describe("ClaimQueue.walk", () => {
  it("offers every task a worker's capabilities allow, in claim order, and skips whole shapes", () => {
    fc.assert(
      fc.property(
        arbTasks,
        fc.subarray(["linux", "gpu", "mac", "*"]),
        fc.subarray([100, 300]),
        (specs, caps, skipCpu) => {
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
        },
      ),
      { numRuns: 300 },
    );
  });

  it("across queues, always offers the task of the lowest-ranked queue next, its rank moving as it takes", () => {
    const arbQueued = fc.array(
      fc.record({
        priority: fc.integer({ min: 0, max: 2 }),
        created: fc.integer({ min: 0, max: 20 }),
        cap: fc.constantFrom("", "linux", "gpu"),
        cpu: fc.constantFrom(100, 200, 300),
        queue: fc.constantFrom("qa", "qb", "qc", "qd"),
      }),
      { maxLength: 80 },
    );
    fc.assert(
      fc.property(
        arbQueued,
        fc.subarray(["linux", "gpu", "*"]),
        fc.record({
          qa: fc.integer({ min: 1, max: 3 }),
          qb: fc.integer({ min: 1, max: 3 }),
          qc: fc.integer({ min: 1, max: 3 }),
          qd: fc.integer({ min: 1, max: 3 }),
        }),
        (specs, caps, weight) => {
          const q = new ClaimQueue();
          const ts = specs.map((s, i) => {
            const t = task(`t${String(i).padStart(3, "0")}`, s);
            t.spec.queue = s.queue;
            return t;
          });
          for (const t of ts) q.upsert(t);
          // A rank that depends on what the queue has taken in this walk, as fair share does.
          const base: Record<string, number> = { qa: 0, qb: 150, qc: 300, qd: 50 };
          const rank = (queue: string, extra: { cpu_millis?: number }) =>
            (base[queue] + (extra.cpu_millis ?? 0)) / weight[queue as keyof typeof weight];
          q.rank = rank;
          const seen: string[] = [];
          const walk = q.walk(caps);
          for (let n = walk.next(); n; n = walk.next()) {
            seen.push(n.entry.name);
            walk.take();
          }
          walk.close();
          // The reference: at every step the lowest (rank, claim order) of what is left.
          const left = ts.filter(
            (t) =>
              caps.includes("*") || t.spec.required_capability === "" || caps.includes(t.spec.required_capability!),
          );
          const taken: Record<string, number> = {};
          const want: string[] = [];
          const entry = (t: Task): QueueEntry => ({
            name: t.metadata.name,
            priority: t.spec.priority ?? 0,
            created: t.metadata.creationTimestamp!,
            shape: "",
          });
          while (left.length) {
            const key = (t: Task) => rank(t.spec.queue!, { cpu_millis: taken[t.spec.queue!] ?? 0 });
            left.sort((a, b) => key(a) - key(b) || claimOrder(entry(a), entry(b)));
            const t = left.shift()!;
            want.push(t.metadata.name);
            taken[t.spec.queue!] = (taken[t.spec.queue!] ?? 0) + t.spec.execution_profile!.resources!.cpu_millis!;
          }
          expect(seen).toEqual(want);
        },
      ),
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

describe("ClaimQueue.standing", () => {
  it("stays exact through many claims from the front, removals anywhere and late arrivals from the past", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("claim", "cancel", "add"), fc.nat()), { minLength: 200, maxLength: 400 }),
        (steps) => {
          const q = new ClaimQueue();
          let n = 0;
          const add = (created: number, priority: number) =>
            q.upsert(task(`t${String(n++).padStart(4, "0")}`, { priority, created, cap: "", cpu: 100 }));
          for (let i = 0; i < 300; i++) add(i, i % 2);
          for (const [op, k] of steps) {
            const shape = [...q.allShapes()][0];
            if (!shape) break;
            const all = q
              .namesOf(shape)
              .map((x) => q.locate(x)!.entry)
              .sort(claimOrder);
            if (op === "claim") q.remove(all[0].name);
            else if (op === "cancel") q.remove(all[k % all.length].name);
            else add(k % 300, k % 2);
          }
          const shape = [...q.allShapes()][0];
          if (!shape) return;
          const all = q
            .namesOf(shape)
            .map((x) => q.locate(x)!.entry)
            .sort(claimOrder);
          for (const [i, pivot] of all.entries()) {
            if (i % 5 !== 0 && i !== all.length - 1) continue;
            const st = q.standing(shape, pivot, 2);
            expect(st.ahead).toBe(i);
            const higher = all.slice(0, i).filter((e) => e.priority > pivot.priority);
            expect(st.higher).toBe(higher.length);
            expect(st.first.map((e) => e.name)).toEqual(higher.slice(0, 2).map((e) => e.name));
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("counts a shape's entries before any pivot in claim order, and names the first of the strictly higher priorities", () => {
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
            const st = q.standing(shape, pivot, 3);
            const before = all.filter((e) => claimOrder(e, pivot) < 0).sort(claimOrder);
            const higher = before.filter((e) => e.priority > pivot.priority);
            expect(st.ahead).toBe(before.length);
            expect(st.higher).toBe(higher.length);
            // The first three of them, best first.
            expect(st.first.map((e) => e.name)).toEqual(higher.slice(0, 3).map((e) => e.name));
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
