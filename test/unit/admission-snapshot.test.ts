// A lease stores what admission saw on its worker, and the rest of the admission object is
// derived when it is shown (admission/snapshot.ts). The derived object must be the one the
// claim answered with, field for field and in the same order, for every kind of decision.
import { describe, expect, it } from "vitest";
import { admit, normalise, type LeaseView, type TaskView, type WorkerView } from "../../src/admission/index.ts";
import { grantedAdmission } from "../../src/admission/snapshot.ts";
import { endLease, grantLease } from "../../src/scheduler/lifecycle.ts";
import type { ResourceSpec, Task } from "../../src/resources/types.ts";

const vec = (r: ResourceSpec = {}) => normalise(r);
const NOW = Date.parse("2030-01-01T00:00:00Z");

const worker = (over: Partial<WorkerView> = {}): WorkerView => ({
  name: "w",
  capabilities: ["linux"],
  capacity: vec({ cpu_millis: 8000, memory_mb: 16384, disk_mb: 50_000, gpu_count: 2, gpu_types: ["a100", "t4"] }),
  unknown: [],
  cordoned: false,
  ready: true,
  desired_concurrency: 3,
  max_concurrency: 4,
  reported_active: 0,
  leases: [],
  ...over,
});

const taskView = (over: Partial<TaskView> = {}): TaskView => ({
  name: "t",
  required_capability: "linux",
  placement: "shared",
  requests: vec({ cpu_millis: 1500, memory_mb: 2048 }),
  excluded_workers: [],
  ...over,
});

const held = (task: string, r: ResourceSpec): LeaseView => ({ task, placement: "shared", reservation: vec(r) });

const queuedTask = (): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name: "t", generation: 1 },
  spec: { required_capability: "linux", payload: {} },
  status: { state: "queued", attempt: 1 },
});

const CASES: [string, TaskView, WorkerView][] = [
  ["an empty worker", taskView(), worker()],
  [
    "beside other leases, with a stale heartbeat",
    taskView(),
    worker({
      leases: [held("a", { cpu_millis: 3000, memory_mb: 4096 }), held("b", { disk_mb: 10_000 })],
      reported_active: 1,
    }),
  ],
  [
    "a GPU task of one type",
    taskView({ requests: vec({ cpu_millis: 500, gpu_count: 1, gpu_types: ["a100"] }) }),
    worker({ leases: [held("g", { gpu_count: 1, gpu_types: ["t4"] })] }),
  ],
  ["an exclusive task", taskView({ placement: "exclusive", requests: vec({ memory_mb: 1 }) }), worker()],
  ["a task asking for nothing", taskView({ requests: vec() }), worker({ desired_concurrency: 1 })],
];

describe("a lease stores what admission saw, and shows the whole admission object", () => {
  for (const [name, tv, wv] of CASES)
    it(`${name}: the lease and the attempt derive the object the claim answered with`, () => {
      const d = admit(tv, wv);
      expect(d.ok, d.reasons.join()).toBe(true);
      const status = grantLease(
        queuedTask(),
        {
          worker: "w",
          mode: "pull",
          leaseSeconds: 60,
          placement: tv.placement,
          reservation: tv.requests,
          admission: d.admission,
        },
        NOW,
      );
      const lease = status.lease!;
      // Only the facts are stored: nothing that follows from them is copied into the Task.
      expect(Object.keys(lease.admission!)).toEqual([
        "capacity",
        "reserved_before",
        "active_task_ids",
        "exclusive_active",
        "concurrency",
      ]);
      // The same values in the same order: a watcher, `describe` and the web view print this.
      expect(JSON.stringify(grantedAdmission(lease))).toBe(JSON.stringify(d.admission));

      // Through JSON, as the store keeps it; the attempt keeps the placement and reservation beside it.
      const ended = endLease(JSON.parse(JSON.stringify(status)), "clean", NOW + 1000, "clean", "ResultUploaded");
      const attempt = ended.attempts!.at(-1)!;
      expect(attempt.placement).toBe(tv.placement);
      expect(attempt.reservation).toEqual(lease.reservation);
      expect(JSON.stringify(grantedAdmission(attempt))).toBe(JSON.stringify(d.admission));
    });

  it("a lease that recorded no admission has none to show", () => {
    expect(grantedAdmission({ placement: "shared", reservation: { cpu_millis: 1 } })).toBeUndefined();
  });

  it("an attempt recorded by an earlier Loom, with the whole object, is shown as it was stored", () => {
    const d = admit(taskView(), worker({ leases: [held("a", { cpu_millis: 1000 })] }));
    const stored = JSON.parse(JSON.stringify(d.admission));
    const attempt = { attempt: 1, worker: "w", admission: stored };
    expect(grantedAdmission(attempt)).toBe(stored);
    expect(grantedAdmission(attempt)).toEqual(d.admission);
  });

  it("a stored record missing parts still gives a whole object, with zeros where it is silent", () => {
    const a = grantedAdmission({ placement: "exclusive", admission: { capacity: { cpu_millis: 4000 } } })!;
    expect(a).toMatchObject({
      ok: true,
      reason: null,
      placement: "exclusive",
      requested: vec(),
      available_before: vec({ cpu_millis: 4000 }),
      available_after: vec({ cpu_millis: 4000 }),
      active_task_ids: [],
      exclusive_active: false,
    });
    expect(a.concurrency.effective_limit).toBe(0);
  });
});
