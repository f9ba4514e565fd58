// The fleet's last hour (observability/history.ts), derived from tasks and NotAdmitted Events:
// queue depth by reason at each step, leases granted per step, each worker's leases, and
// where one task's time went.
import { describe, expect, it } from "vitest";
import { fleetHistory, taskSegments, type NotAdmittedEvent } from "../../src/observability/history.ts";
import type { Task } from "../../src/resources/types.ts";

const T0 = Date.parse("2026-01-01T10:00:00Z");
const at = (min: number) => new Date(T0 + min * 60_000).toISOString();
const NOW = T0 + 60 * 60_000;

const task = (name: string, created: number, status: Record<string, unknown>): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name, creationTimestamp: at(created) },
  spec: { execution_profile: { placement: "shared" } },
  status,
});
const notAdmitted = (name: string, min: number, reason: string): NotAdmittedEvent => ({
  involvedObject: { kind: "Task", name },
  reason: "NotAdmitted",
  message: `${reason}: no worker has room`,
  firstTimestamp: at(min),
});

// a: queued 0-10 on memory, 10-20 on concurrency, leased 20, started 21, clean at 30. Its
// attempt is as an earlier Loom recorded it, with the whole admission object.
const a = task("a", 0, {
  state: "clean",
  finished_at: at(30),
  attempts: [
    {
      attempt: 1,
      worker: "w1",
      leased_at: at(20),
      started_at: at(21),
      ended_at: at(30),
      outcome: "clean",
      admission: { requested: { cpu_millis: 500, memory_mb: 256 }, placement: "shared" },
    },
  ],
});
// b: retried: leased 5-15 on w1 (lease_expired), queued again 15-40, running on w2 since 40.
const b = task("b", 0, {
  state: "running",
  attempts: [
    {
      attempt: 1,
      worker: "w1",
      leased_at: at(5),
      ended_at: at(15),
      outcome: "lease_expired",
      // As Loom records an attempt now: its placement and reservation, and what admission saw.
      placement: "exclusive",
      reservation: { cpu_millis: 100 },
      admission: { capacity: { cpu_millis: 4000 }, reserved_before: {}, active_task_ids: [] },
    },
  ],
  lease: {
    worker: "w2",
    epoch: 2,
    leased_at: at(40),
    started_at: at(40.5),
    lease_until: at(70),
    placement: "shared",
    reservation: { cpu_millis: 100 },
  },
});
// c: queued since minute 50, its Admitted condition False on gpu_count since 55 (an Event said disk at 50).
const c = task("c", 50, {
  state: "queued",
  conditions: [{ type: "Admitted", status: "False", reason: "insufficient_gpu", lastTransitionTime: at(55) }],
});
const events = [
  notAdmitted("a", 0.01, "insufficient_memory"),
  notAdmitted("a", 10, "concurrency_limit"),
  notAdmitted("c", 50, "insufficient_disk"),
  { ...notAdmitted("x", 3, "insufficient_cpu"), involvedObject: { kind: "Worker", name: "x" } },
];

describe("fleet history", () => {
  const h = fleetHistory([a, b, c], events, { now: NOW, minutes: 60 });
  const depth = (reason: string, min: number) => h.queue_depth.find((q) => q.reason === reason)?.counts[min - 1] ?? 0;

  it("samples at the end of each of 60 steps", () => {
    expect(h.times).toHaveLength(60);
    expect(h.times[0]).toBe(at(1));
    expect(h.times[59]).toBe(at(60));
    expect(h.step_seconds).toBe(60);
  });

  it("counts each queued stretch under the reason its Events gave then, averaged over each step", () => {
    expect(depth("insufficient_memory", 5)).toBe(1);
    expect(depth("concurrency_limit", 15)).toBe(1);
    expect(depth("concurrency_limit", 20)).toBe(1); // the step [19, 20): leased at 20
    expect(depth("concurrency_limit", 21)).toBe(0);
    // b's second stretch had no Event: it waited for a claim.
    expect(depth("WorkerAvailable", 30)).toBe(1);
    expect(depth("WorkerAvailable", 41)).toBe(0);
    // c: the Event's reason until its condition flipped, then the condition's, up to now.
    expect(depth("insufficient_disk", 52)).toBe(1);
    expect(depth("insufficient_gpu", 56)).toBe(1);
    expect(depth("insufficient_gpu", 60)).toBe(1);
    expect(h.queued_now).toEqual({ insufficient_gpu: 1 });
    // A Worker's events say nothing about the queue.
    expect(h.queue_depth.map((q) => q.reason)).not.toContain("insufficient_cpu");
  });

  it("a wait shorter than a step counts for its share of the step", () => {
    const quick = task("q", 10.25, {
      state: "running",
      lease: {
        worker: "w1",
        epoch: 1,
        leased_at: at(10.75),
        lease_until: at(70),
        placement: "shared",
        reservation: {},
      },
    });
    const hq = fleetHistory([quick], [], { now: NOW, minutes: 60 });
    expect(hq.queue_depth).toEqual([
      { reason: "WorkerAvailable", counts: hq.times.map((_, i) => (i === 10 ? 0.5 : 0)) },
    ]);
  });

  it("counts leases in the step they were granted", () => {
    expect(h.leases_granted.reduce((x, y) => x + y, 0)).toBe(3);
    expect(h.leases_granted[5]).toBe(1); // b's first, at 5:00: the step [5:00, 6:00)
    expect(h.leases_granted[20]).toBe(1);
    expect(h.leases_granted[40]).toBe(1);
  });

  it("lists each worker's leases with state and reservation, the active one open-ended", () => {
    const w1 = h.workers.find((w) => w.worker === "w1")!;
    expect(w1.leases.map((l) => [l.task, l.state, l.leased_at, l.ended_at])).toEqual([
      ["b", "lease_expired", at(5), at(15)],
      ["a", "clean", at(20), at(30)],
    ]);
    expect(w1.leases[1].reservation).toEqual({ cpu_millis: 500, memory_mb: 256, disk_mb: 0, gpu_count: 0 });
    expect(w1.leases[1].placement).toBe("shared");
    expect(w1.leases[0].reservation).toEqual({ cpu_millis: 100, memory_mb: 0, disk_mb: 0, gpu_count: 0 });
    expect(w1.leases[0].placement).toBe("exclusive");
    const w2 = h.workers.find((w) => w.worker === "w2")!;
    expect(w2.leases).toMatchObject([{ task: "b", state: "running", started_at: at(40.5) }]);
    expect(w2.leases[0].ended_at).toBeUndefined();
  });

  it("leaves out what ended before the window", () => {
    const later = fleetHistory([a, b, c], events, { now: NOW + 35 * 60_000, minutes: 60 });
    expect(later.workers.find((w) => w.worker === "w1")).toBeUndefined(); // both w1 leases ended before minute 35
    expect(later.leases_granted.reduce((x, y) => x + y, 0)).toBe(1); // only b's second lease, at 40
  });
});

describe("where a task's time went", () => {
  it("queued by reason, then leased, then running, to the end", () => {
    const s = taskSegments(
      a,
      events.filter((e) => e.involvedObject.name === "a"),
      NOW,
    );
    expect(s.map((x) => [x.kind, x.kind === "queued" ? x.reason : x.outcome, (x.end - x.start) / 60_000])).toEqual([
      ["queued", "insufficient_memory", 10],
      ["queued", "concurrency_limit", 10],
      ["leased", "clean", 1],
      ["running", "clean", 9],
    ]);
  });

  it("a lease never started is leased throughout; an active one runs up to now", () => {
    const s = taskSegments(b, [], NOW);
    expect(s.map((x) => [x.kind, (x.end - x.start) / 60_000])).toEqual([
      ["queued", 5],
      ["leased", 10],
      ["queued", 25],
      ["leased", 0.5],
      ["running", 19.5],
    ]);
  });
});
