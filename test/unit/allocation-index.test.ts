// The SQLite store's in-memory allocations (store/allocation-index.ts): leases by worker, and
// each queue's usage summed as demandOf counts it, moved exactly by every change and back.
import { describe, expect, it } from "vitest";
import type { Allocation } from "../../src/admission/guard.ts";
import { demandOf } from "../../src/admission/queues.ts";
import { AllocationIndex } from "../../src/store/allocation-index.ts";

const alloc = (
  task: string,
  worker: string,
  cpu: number,
  queue?: string,
  gpus = 0,
  types: string[] = [],
): Allocation => ({
  task,
  worker,
  lease: {
    task,
    placement: "shared",
    reservation: { cpu_millis: cpu, memory_mb: 10, disk_mb: 0, gpu_count: gpus, gpu_types: types },
    ...(queue ? { queue } : {}),
  },
});

describe("allocation index", () => {
  it("lists a worker's leases and sums each queue's, typed GPUs counted against every type", () => {
    const ix = new AllocationIndex();
    ix.set("a", alloc("a", "w1", 100, "team"));
    ix.set("b", alloc("b", "w1", 200, "team", 2, ["a100", "h100"]));
    ix.set("c", alloc("c", "w2", 50));
    expect(ix.on("w1").map((l) => l.task)).toEqual(["a", "b"]);
    expect(ix.on("w3")).toEqual([]);
    expect(ix.queueUsage("team")).toEqual({
      cpu_millis: 300,
      memory_mb: 20,
      gpu_count: 2,
      "gpu_types.a100": 2,
      "gpu_types.h100": 2,
    });
    // A task with no queue counts against the default queue.
    expect(ix.queueUsage("default")).toEqual(demandOf(alloc("c", "w2", 50).lease.reservation));
  });

  it("a change hands back what it replaced, so setting that back undoes it exactly", () => {
    const ix = new AllocationIndex();
    ix.set("a", alloc("a", "w1", 100, "team"));
    const before = { w1: ix.on("w1"), team: { ...ix.queueUsage("team") } };
    // A lease moved to another worker and queue, then one released: undone last first.
    const undo: [string, Allocation | undefined][] = [];
    undo.push(["a", ix.set("a", alloc("a", "w2", 400, "other"))]);
    undo.push(["b", ix.set("b", alloc("b", "w1", 5, "team"))]);
    undo.push(["b", ix.set("b", undefined)]);
    expect(ix.on("w1")).toEqual([]);
    expect(ix.queueUsage("other")).toEqual({ cpu_millis: 400, memory_mb: 10 });
    expect(ix.queueUsage("team")).toEqual({});
    for (const [task, prev] of undo.reverse()) ix.set(task, prev);
    expect(ix.on("w1")).toEqual(before.w1);
    expect(ix.on("w2")).toEqual([]);
    expect(ix.queueUsage("team")).toEqual(before.team);
    expect(ix.queueUsage("other")).toEqual({});
    expect(ix.get("b")).toBeUndefined();
  });
});
