// A write that keeps a task's lease as it was (a start, a renewal) keeps its lease view: the
// store's guard sees no allocation change without building the view again, and a worker's
// view compared lease by lease sees the same object. Anything the view is made of that
// changes makes a new one.
import { describe, expect, it } from "vitest";
import { leaseView, shareLeaseView } from "../../src/admission/view.ts";
import { allocationChange } from "../../src/store/ops.ts";
import type { Task, TaskStatus } from "../../src/resources/types.ts";
import { taskWith } from "../support/task.ts";

const reservation = { cpu_millis: 500, memory_mb: 256, disk_mb: 0, gpu_count: 0 };

function leased(): Task {
  const status: TaskStatus = {
    state: "leased",
    attempt: 1,
    lease: { worker: "w1", epoch: 1, mode: "pull", leased_at: "a", lease_until: "b", placement: "shared", reservation },
  };
  return taskWith(status);
}

/** What a start writes: the same lease with started_at, the same spec. */
const started = (t: Task): Task => ({
  ...t,
  metadata: { ...t.metadata, resourceVersion: "2" },
  status: { ...t.status, state: "running", lease: { ...t.status!.lease!, started_at: "c" } },
});

const change = (a: Task, b: Task | undefined) => allocationChange("Task", a, b);

describe("a write that keeps the lease keeps its view", () => {
  it("a start shares the leased task's view, and the store sees no allocation change", () => {
    const t = leased();
    const view = leaseView(t)!;
    const s = started(t);
    expect(shareLeaseView(t, s)).toBe(true);
    expect(leaseView(s)).toBe(view);
    expect(change(t, s)).toBeUndefined();
  });

  it("an equal reservation in a new object is still the same allocation, with a view of its own", () => {
    const t = leased();
    const s = started(t);
    const copy: Task = {
      ...s,
      status: { ...s.status, lease: { ...s.status!.lease!, reservation: { ...reservation } } },
    };
    expect(shareLeaseView(t, copy)).toBe(false);
    expect(change(t, copy)).toBeUndefined();
    expect(leaseView(copy)).not.toBe(leaseView(t));
    expect(leaseView(copy)).toEqual(leaseView(t));
  });

  it("a lease moved to another worker, a new spec or a lease that ended is a change", () => {
    const t = leased();
    const s = started(t);
    const moved: Task = { ...s, status: { ...s.status, lease: { ...s.status!.lease!, worker: "w2" } } };
    expect(shareLeaseView(t, moved)).toBe(false);
    expect(change(t, moved)).toMatchObject({ was: { worker: "w1" }, now: { worker: "w2" } });

    const queued: Task = { ...s, spec: { ...s.spec, queue: "team-a" } };
    expect(shareLeaseView(t, queued)).toBe(false);
    expect(leaseView(queued)?.queue).toBe("team-a");
    expect(change(t, queued)).toMatchObject({ now: { lease: { queue: "team-a" } } });

    const ended: Task = { ...s, status: { ...s.status, state: "returned" } };
    expect(shareLeaseView(t, ended)).toBe(false);
    expect(change(t, ended)).toEqual({ was: expect.objectContaining({ worker: "w1" }), now: undefined });
  });

  it("a task that held no active lease before shares nothing", () => {
    const t = leased();
    const before: Task = { ...t, status: { ...t.status, state: "returned" } };
    const after: Task = { ...t, status: { ...t.status, state: "running" } };
    expect(shareLeaseView(before, after)).toBe(false);
    expect(change(before, after)).toMatchObject({ was: undefined, now: { worker: "w1" } });
  });
});
