// The admission contract (RESOURCE_ADMISSION.md, RUNNER_PROTOCOL section 4), one describe per rule.
import { describe, expect, it } from "vitest";
import type { Task, Worker } from "../../src/resources/types.ts";
import {
  add,
  admit,
  CHECKS,
  clone,
  defaultCapacityFromHost,
  effectiveCapacity,
  leasesOn,
  normalise,
  overlayCapacity,
  Reason,
  reservedOf,
  sub,
  sum,
  summarize,
  taskView,
  workerView,
  type LeaseView,
  type TaskView,
  type WorkerView,
} from "../../src/admission/index.ts";
import type { ResourceSpec } from "../../src/resources/types.ts";

const vec = (r: ResourceSpec = {}) => normalise(r);

const worker = (over: Partial<WorkerView> = {}): WorkerView => ({
  name: "evaluation-01",
  capabilities: ["linux"],
  capacity: vec({ cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000 }),
  unknown: [],
  cordoned: false,
  ready: true,
  desired_concurrency: 4,
  max_concurrency: 4,
  reported_active: 0,
  leases: [],
  ...over,
});

const task = (over: Partial<TaskView> = {}): TaskView => ({
  name: "demo__case-a__base__run-001",
  required_capability: "linux",
  placement: "shared",
  requests: vec(),
  excluded_workers: [],
  ...over,
});

const lease = (name: string, r: ResourceSpec = {}, placement: "shared" | "exclusive" = "shared"): LeaseView => ({
  task: name,
  placement,
  reservation: vec(r),
});

const meta = (name: string) => ({ name });

const taskResource = (name: string, spec: Task["spec"] = {}, status?: Task["status"]): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: meta(name),
  spec,
  ...(status ? { status } : {}),
});

const workerResource = (name: string, spec: Worker["spec"] = {}, status?: Worker["status"]): Worker => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Worker",
  metadata: meta(name),
  spec,
  ...(status ? { status } : {}),
});

const leased = (
  name: string,
  workerName: string,
  state: "leased" | "running" | "queued" | "clean" | "cancelled",
  extra: Partial<NonNullable<Task["status"]>["lease"]> = {},
  spec: Task["spec"] = {},
) =>
  taskResource(name, spec, {
    state,
    lease: {
      worker: workerName,
      epoch: 1,
      leased_at: "2025-01-01T00:00:00Z",
      lease_until: "2025-01-01T00:10:00Z",
      ...extra,
    },
  });

describe("reason codes: v1 clients get the first failing reason in v1 order, reasons[] lists them all", () => {
  // Each check alone yields its v1 reason (see the rules below); these fail several at once.
  const full = { desired_concurrency: 1, leases: [lease("a", { memory_mb: 6000 })] };
  it.each([
    [
      "cordoned, without the capability, not ready and full",
      task({ required_capability: "gpu" }),
      worker({ cordoned: true, ready: false, capabilities: [], ...full }),
      "worker_blocked",
      ["worker_cordoned", "capability_missing", "worker_not_ready", "worker_concurrency_reached"],
    ],
    [
      "excluded and not ready",
      task({ excluded_workers: ["evaluation-01"] }),
      worker({ ready: false }),
      "worker_not_eligible",
      ["worker_excluded", "worker_not_ready"],
    ],
    [
      "not ready, and busy for an exclusive task",
      task({ placement: "exclusive" }),
      worker({ ready: false, leases: [lease("a")] }),
      "worker_not_ready",
      ["worker_not_ready", "exclusive_worker_busy"],
    ],
    [
      "busy for an exclusive task, short of memory and full",
      task({ placement: "exclusive", requests: vec({ memory_mb: 1024 }) }),
      worker(full),
      "exclusive_worker_busy",
      ["exclusive_worker_busy", "resource_reservation_unavailable", "worker_concurrency_reached"],
    ],
    [
      "holding an exclusive task, and full",
      task(),
      worker({ desired_concurrency: 1, leases: [lease("x", {}, "exclusive")] }),
      "worker_has_exclusive_task",
      ["worker_has_exclusive_task", "worker_concurrency_reached"],
    ],
    [
      "short of memory and full",
      task({ requests: vec({ memory_mb: 1024 }) }),
      worker(full),
      "resource_reservation_unavailable",
      ["resource_reservation_unavailable", "worker_concurrency_reached"],
    ],
  ] as const)("%s: v1 reason %s", (_what, t, w, reason, reasons) => {
    const d = admit(t, w);
    expect([d.ok, d.reason, d.reasons]).toEqual([false, reason, reasons]);
  });

  it("reports every code it uses from the one enum, and each failure names the check that found it", () => {
    const d = admit(
      task({ required_capability: "gpu", placement: "exclusive", requests: vec({ memory_mb: 1024 }) }),
      worker({ cordoned: true, ready: false, capabilities: [], ...full }),
    );
    const codes = new Set<string>(Object.values(Reason));
    expect(d.reasons.length).toBeGreaterThan(3);
    for (const c of d.reasons) expect(codes.has(c), c).toBe(true);
    const checks = new Set(CHECKS.map((c) => c.name));
    for (const f of d.failures) expect(checks.has(f.check), `${f.code} from ${f.check}`).toBe(true);
  });
});

describe("capability eligible: empty requirement, the listed capability, or *", () => {
  it("admits an empty requirement on any worker", () => {
    expect(admit(task({ required_capability: "" }), worker({ capabilities: [] })).ok).toBe(true);
  });

  it("admits when the worker lists the capability", () => {
    expect(admit(task({ required_capability: "gpu" }), worker({ capabilities: ["linux", "gpu"] })).ok).toBe(true);
  });

  it("admits on a worker that lists * (a Runner started without --capability)", () => {
    expect(admit(task({ required_capability: "gpu" }), worker({ capabilities: ["linux", "*"] })).ok).toBe(true);
  });

  it("rejects otherwise as capability_missing, v1 worker_not_eligible, never resolvable on that worker", () => {
    const d = admit(task({ required_capability: "gpu" }), worker({ capabilities: ["linux"] }));
    expect(d.ok).toBe(false);
    expect(d.reason).toBe("worker_not_eligible");
    expect(d.reasons).toEqual(["capability_missing"]);
    expect(d.unresolvable).toBe(true);
    expect(d.failures).toEqual([
      {
        code: "capability_missing",
        check: "capability",
        field: "required_capability",
        shortfall: { available: ["linux"], requested: ["gpu"] },
        resolvable: false,
      },
    ]);
  });

  it("reads the requirement from the Task, trimmed", () => {
    expect(taskView(taskResource("t", { required_capability: "  gpu " })).required_capability).toBe("gpu");
    expect(taskView(taskResource("t")).required_capability).toBe("");
  });
});

describe("a different_worker retry excludes the worker it failed on", () => {
  it("rejects an excluded worker as worker_excluded (v1 worker_not_eligible), unresolvable there", () => {
    const d = admit(task({ excluded_workers: ["evaluation-01"] }), worker());
    expect(d.reasons).toEqual(["worker_excluded"]);
    expect(d.reason).toBe("worker_not_eligible");
    expect(d.unresolvable).toBe(true);
  });

  it("still admits on other workers", () => {
    expect(admit(task({ excluded_workers: ["evaluation-01"] }), worker({ name: "evaluation-02" })).ok).toBe(true);
  });

  it("takes the exclusions from the Task status", () => {
    expect(taskView(taskResource("t", {}, { excluded_workers: ["w1"] })).excluded_workers).toEqual(["w1"]);
  });
});

describe("cordoned and not-ready workers take no new leases", () => {
  it("rejects a cordoned worker as worker_cordoned, v1 worker_blocked, resolvable", () => {
    const d = admit(task(), worker({ cordoned: true }));
    expect([d.ok, d.reason, d.reasons, d.unresolvable]).toEqual([false, "worker_blocked", ["worker_cordoned"], false]);
  });

  it("rejects a worker without a recent heartbeat as worker_not_ready", () => {
    const d = admit(task(), worker({ ready: false }));
    expect([d.ok, d.reason, d.reasons, d.unresolvable]).toEqual([
      false,
      "worker_not_ready",
      ["worker_not_ready"],
      false,
    ]);
  });
});

describe("concurrency: active < min(desired_concurrency, max_concurrency)", () => {
  it("admits below the limit and rejects at it", () => {
    const one = [lease("a")];
    expect(admit(task(), worker({ desired_concurrency: 2, leases: one })).ok).toBe(true);
    const d = admit(task(), worker({ desired_concurrency: 2, leases: [...one, lease("b")] }));
    expect(d.reason).toBe("worker_concurrency_reached");
    expect(d.reasons).toEqual(["worker_concurrency_reached"]);
    expect(d.unresolvable).toBe(false);
  });

  it("counts the Hub's own leases before any heartbeat reports them", () => {
    const d = admit(task(), worker({ desired_concurrency: 2, reported_active: 0, leases: [lease("a"), lease("b")] }));
    expect(d.ok).toBe(false);
    expect(d.admission.concurrency).toEqual({
      reported_active: 0,
      leased_active: 2,
      active_count: 2,
      desired_concurrency: 2,
      max_concurrency: 4,
      effective_limit: 2,
    });
  });

  it("counts runs the Runner reports even without leases (active = max(reported, leased))", () => {
    const d = admit(task(), worker({ desired_concurrency: 2, reported_active: 2, leases: [lease("a")] }));
    expect(d.reasons).toEqual(["worker_concurrency_reached"]);
    expect(d.admission.concurrency.active_count).toBe(2);
  });

  it("clamps desired to [1, max]: desired 0 still allows one, desired above max allows max", () => {
    expect(admit(task(), worker({ desired_concurrency: 0 })).ok).toBe(true);
    expect(admit(task(), worker({ desired_concurrency: 0, leases: [lease("a")] })).reasons).toEqual([
      "worker_concurrency_reached",
    ]);
    const many = [lease("a"), lease("b")];
    expect(admit(task(), worker({ desired_concurrency: 9, max_concurrency: 3, leases: many })).ok).toBe(true);
    const d = admit(task(), worker({ desired_concurrency: 9, max_concurrency: 3, leases: [...many, lease("c")] }));
    expect(d.ok).toBe(false);
    expect(d.admission.concurrency.effective_limit).toBe(3);
    expect(d.admission.concurrency.desired_concurrency).toBe(3);
  });
});

describe("resources: reserved + requested <= capacity in every dimension", () => {
  const busy = worker({ leases: [lease("a", { cpu_millis: 1000, memory_mb: 4096, disk_mb: 10000 })] });

  it("admits exactly up to capacity", () => {
    expect(admit(task({ requests: vec({ cpu_millis: 3000, memory_mb: 2048, disk_mb: 20000 }) }), busy).ok).toBe(true);
  });

  it("rejects one unit over, with the exact shortfall", () => {
    const d = admit(task({ requests: vec({ memory_mb: 3072 }) }), busy);
    expect(d.ok).toBe(false);
    expect(d.reason).toBe("resource_reservation_unavailable");
    expect(d.failures).toEqual([
      {
        code: "resource_reservation_unavailable",
        check: "resource_fit",
        field: "memory_mb",
        shortfall: { capacity: 6144, reserved: 4096, requested: 3072, short: 1024 },
        resolvable: true,
      },
    ]);
    expect(d.admission.shortfalls).toEqual({
      memory_mb: { capacity: 6144, reserved: 4096, requested: 3072, short: 1024 },
    });
  });

  it("reports every short dimension, not only the first", () => {
    const d = admit(task({ requests: vec({ cpu_millis: 3500, memory_mb: 3072, disk_mb: 25000 }) }), busy);
    expect(d.failures.map((f) => [f.field, f.shortfall])).toEqual([
      ["cpu_millis", { capacity: 4000, reserved: 1000, requested: 3500, short: 500 }],
      ["memory_mb", { capacity: 6144, reserved: 4096, requested: 3072, short: 1024 }],
      ["disk_mb", { capacity: 30000, reserved: 10000, requested: 25000, short: 5000 }],
    ]);
    expect(d.reasons).toEqual(["resource_reservation_unavailable"]);
  });

  it("fits again once the lease holding the reservation is released", () => {
    const t = task({ requests: vec({ memory_mb: 3072 }) });
    expect(admit(t, busy).ok).toBe(false);
    expect(admit(t, { ...busy, leases: [] }).ok).toBe(true);
  });

  it("records capacity, reservation and headroom in the admission object, floored at zero", () => {
    const d = admit(task({ requests: vec({ cpu_millis: 500, memory_mb: 3072 }) }), busy);
    expect(d.admission).toEqual({
      ok: false,
      reason: "resource_reservation_unavailable",
      reasons: ["resource_reservation_unavailable"],
      placement: "shared",
      requested: { cpu_millis: 500, memory_mb: 3072, disk_mb: 0, gpu_count: 0, gpu_types: [] },
      capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0, gpu_types: [] },
      reserved_before: { cpu_millis: 1000, memory_mb: 4096, disk_mb: 10000, gpu_count: 0, gpu_types: [] },
      available_before: { cpu_millis: 3000, memory_mb: 2048, disk_mb: 20000, gpu_count: 0, gpu_types: [] },
      available_after: { cpu_millis: 2500, memory_mb: 0, disk_mb: 20000, gpu_count: 0, gpu_types: [] },
      shortfalls: { memory_mb: { capacity: 6144, reserved: 4096, requested: 3072, short: 1024 } },
      active_task_ids: ["a"],
      exclusive_active: false,
      concurrency: {
        reported_active: 0,
        leased_active: 1,
        active_count: 1,
        desired_concurrency: 4,
        max_concurrency: 4,
        effective_limit: 4,
      },
    });
  });

  it("says ok with reason null in the admission object and no reason on the decision", () => {
    const d = admit(task(), worker());
    expect(d.ok).toBe(true);
    expect("reason" in d).toBe(false);
    expect(d.admission.reason).toBeNull();
    expect(d.reasons).toEqual([]);
    expect(d.failures).toEqual([]);
  });
});

describe("reservations are derived from the active leases", () => {
  const profile = { execution_profile: { resources: { memory_mb: 1000 } } };
  const tasks = [
    leased("t-leased", "w1", "leased", { reservation: { memory_mb: 512 } }, profile),
    leased("t-running", "w1", "running", {}, profile),
    leased("t-queued", "w1", "queued", { reservation: { memory_mb: 99 } }),
    leased("t-clean", "w1", "clean", { reservation: { memory_mb: 99 } }),
    leased("t-cancelled", "w1", "cancelled", { reservation: { memory_mb: 99 } }),
    leased("t-other", "w2", "running", { reservation: { memory_mb: 99 } }),
  ];

  it("counts only leased and running tasks on this worker", () => {
    expect(leasesOn("w1", tasks).map((l) => l.task)).toEqual(["t-leased", "t-running"]);
  });

  it("sums the lease's own reservation, or the task's profile when the lease has none", () => {
    const w = workerView(workerResource("w1", { resource_capacity: { memory_mb: 4096 } }), leasesOn("w1", tasks), {
      ready: true,
    });
    expect(reservedOf(w).memory_mb).toBe(1512);
  });

  it("takes the placement from the lease, else from the profile", () => {
    const ex = leased("t-ex", "w1", "running", {}, { execution_profile: { placement: "exclusive" } });
    expect(leasesOn("w1", [ex])[0].placement).toBe("exclusive");
  });
});

describe("resource vectors: sums, differences and copies", () => {
  const a = vec({ cpu_millis: 1000, memory_mb: 512, gpu_count: 1, gpu_types: ["a100"] });
  const b = vec({ cpu_millis: 250, disk_mb: 10, gpu_count: 2, gpu_types: ["h100", "a100"] });

  it("adds every count and unions the GPU types, sorted and de-duplicated", () => {
    expect(add(a, b)).toEqual({
      cpu_millis: 1250,
      memory_mb: 512,
      disk_mb: 10,
      gpu_count: 3,
      gpu_types: ["a100", "h100"],
    });
    expect(sum([a, b, vec({ memory_mb: 8 })])).toEqual({ ...add(a, b), memory_mb: 520 });
    expect(sum([])).toEqual(vec());
  });

  it("floors a difference at zero and keeps the first side's GPU types", () => {
    expect(sub(b, a)).toEqual({ cpu_millis: 0, memory_mb: 0, disk_mb: 10, gpu_count: 1, gpu_types: ["a100", "h100"] });
  });

  it("never returns an array it was given", () => {
    const one = sum([b]);
    expect(one.gpu_types).toEqual(b.gpu_types);
    expect(one.gpu_types).not.toBe(b.gpu_types);
    expect(clone(b).gpu_types).not.toBe(b.gpu_types);
    expect(add(vec(), b).gpu_types).not.toBe(b.gpu_types);
    expect(sub(b, a).gpu_types).not.toBe(b.gpu_types);
  });
});

describe("exclusive placement requires an empty worker", () => {
  const exclusive = task({ placement: "exclusive" });

  it("admits on an empty worker", () => {
    expect(admit(exclusive, worker()).ok).toBe(true);
  });

  it("rejects while any task is leased there", () => {
    const d = admit(exclusive, worker({ leases: [lease("a")] }));
    expect(d.reason).toBe("exclusive_worker_busy");
    expect(d.reasons).toEqual(["exclusive_worker_busy"]);
    expect(d.unresolvable).toBe(false);
  });

  it("rejects while the Runner reports a run the Hub has not leased", () => {
    expect(admit(exclusive, worker({ reported_active: 1 })).reasons).toEqual(["exclusive_worker_busy"]);
  });
});

describe("while an exclusive lease is active the worker rejects other placements", () => {
  const held = worker({ leases: [lease("big", { cpu_millis: 100 }, "exclusive")] });

  it("rejects a shared task as worker_has_exclusive_task", () => {
    const d = admit(task(), held);
    expect(d.reason).toBe("worker_has_exclusive_task");
    expect(d.reasons).toEqual(["worker_has_exclusive_task"]);
    expect(d.admission.exclusive_active).toBe(true);
  });

  it("rejects another exclusive task with both reasons, v1 reason exclusive_worker_busy first", () => {
    const d = admit(task({ placement: "exclusive" }), held);
    expect(d.reasons).toEqual(["exclusive_worker_busy", "worker_has_exclusive_task"]);
    expect(d.reason).toBe("exclusive_worker_busy");
  });

  it("admits shared work again once the exclusive lease ends", () => {
    expect(admit(task(), { ...held, leases: [] }).ok).toBe(true);
  });
});

describe("gpu_types: a subset of the worker's types when GPUs are requested", () => {
  const gpuWorker = worker({
    capacity: vec({ cpu_millis: 8000, memory_mb: 65536, disk_mb: 100000, gpu_count: 2, gpu_types: ["t4", "a100"] }),
  });

  it("admits requested types the worker has", () => {
    expect(admit(task({ requests: vec({ gpu_count: 1, gpu_types: ["a100"] }) }), gpuWorker).ok).toBe(true);
    expect(admit(task({ requests: vec({ gpu_count: 2, gpu_types: ["a100", "t4"] }) }), gpuWorker).ok).toBe(true);
  });

  it("rejects a type the worker lacks as exceeds_worker_capacity, unresolvable, listing both sets", () => {
    const d = admit(task({ requests: vec({ gpu_count: 1, gpu_types: ["h100", "a100"] }) }), gpuWorker);
    expect(d.reason).toBe("resource_reservation_unavailable");
    expect(d.reasons).toEqual(["exceeds_worker_capacity"]);
    expect(d.unresolvable).toBe(true);
    expect(d.admission.shortfalls).toEqual({ gpu_types: { available: ["a100", "t4"], requested: ["a100", "h100"] } });
  });

  it("treats gpu_types without gpu_count as no GPU constraint", () => {
    expect(admit(task({ requests: vec({ gpu_types: ["h100"] }) }), worker()).ok).toBe(true);
  });

  it("keeps a type mismatch resolvable while the worker's GPUs are unknown", () => {
    const d = admit(task({ requests: vec({ gpu_count: 1, gpu_types: ["a100"] }) }), worker({ unknown: ["gpu_count"] }));
    expect(d.reasons).toEqual(["resource_reservation_unavailable"]);
    expect(d.unresolvable).toBe(false);
  });

  it("rejects more GPUs than free, and more than the worker has as never fitting", () => {
    const withOne = { ...gpuWorker, leases: [lease("a", { gpu_count: 1, gpu_types: ["a100"] })] };
    const d = admit(task({ requests: vec({ gpu_count: 2 }) }), withOne);
    expect(d.failures.map((f) => [f.code, f.field, f.shortfall])).toEqual([
      ["resource_reservation_unavailable", "gpu_count", { capacity: 2, reserved: 1, requested: 2, short: 1 }],
    ]);
    expect(admit(task({ requests: vec({ gpu_count: 3 }) }), gpuWorker).reasons).toEqual(["exceeds_worker_capacity"]);
  });
});

describe("an omitted profile means shared with zero resource requirements", () => {
  it("builds a shared, all-zero view", () => {
    const t = taskView(taskResource("t"));
    expect(t.placement).toBe("shared");
    expect(t.requests).toEqual({ cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0, gpu_types: [] });
  });

  it("fills omitted fields of a partial profile with zeros and keeps placement shared", () => {
    const t = taskView(taskResource("t", { execution_profile: { resources: { memory_mb: 4096.9 } } }));
    expect(t.placement).toBe("shared");
    expect(t.requests).toEqual({ cpu_millis: 0, memory_mb: 4096, disk_mb: 0, gpu_count: 0, gpu_types: [] });
  });

  it("admits a zero-request task even on a full-resource worker, but not past the count ceiling", () => {
    const full = worker({
      desired_concurrency: 3,
      leases: [lease("a", { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000 })],
    });
    expect(admit(taskView(taskResource("t")), full).ok).toBe(true);
    expect(admit(taskView(taskResource("t")), { ...full, desired_concurrency: 1 }).reasons).toEqual([
      "worker_concurrency_reached",
    ]);
  });
});

describe("capacity: inventory field, else registration, else conservative host defaults", () => {
  it("derives defaults from the host snapshot as v1 does", () => {
    expect(
      defaultCapacityFromHost({
        cpu_count: 4,
        mem_available_mb: 8000.5,
        mem_total_mb: 16000,
        disk_available_mb: 50000,
        disk_total_mb: 90000,
      }),
    ).toEqual({
      cpu_millis: 4000,
      memory_mb: 8000,
      disk_mb: 50000,
      gpu_count: 0,
      gpu_types: [],
    });
  });

  it("falls back to totals, to 0, and to at least one CPU", () => {
    expect(defaultCapacityFromHost({ cpu_count: 0.5, mem_total_mb: 2048.7, disk_total_mb: 100 })).toEqual({
      cpu_millis: 1000,
      memory_mb: 2048,
      disk_mb: 100,
      gpu_count: 0,
      gpu_types: [],
    });
    expect(defaultCapacityFromHost({})).toEqual({
      cpu_millis: 1000,
      memory_mb: 0,
      disk_mb: 0,
      gpu_count: 0,
      gpu_types: [],
    });
    expect(defaultCapacityFromHost({ cpu_count: "8", mem_available_mb: null })).toEqual({
      cpu_millis: 1000,
      memory_mb: 0,
      disk_mb: 0,
      gpu_count: 0,
      gpu_types: [],
    });
  });

  it("merges a partial override over the defaults, as a Runner does at registration", () => {
    const host = { cpu_count: 4, mem_available_mb: 8000.5, disk_available_mb: 50000 };
    expect(overlayCapacity(defaultCapacityFromHost(host), { memory_mb: 2048 })).toEqual({
      cpu_millis: 4000,
      memory_mb: 2048,
      disk_mb: 50000,
      gpu_count: 0,
      gpu_types: [],
    });
  });

  it("takes each field from the inventory first, then the registration, then the host", () => {
    const w = workerResource(
      "w1",
      { resource_capacity: { memory_mb: 6144 } },
      {
        registration: {
          resource_capacity: { memory_mb: 9999, cpu_millis: 3000, gpu_count: 1, gpu_types: ["t4", "t4"] },
          host_resources: { cpu_count: 16, mem_available_mb: 32000, disk_available_mb: 70000 },
        },
      },
    );
    const eff = effectiveCapacity(w);
    expect(eff.capacity).toEqual({
      cpu_millis: 3000,
      memory_mb: 6144,
      disk_mb: 70000,
      gpu_count: 1,
      gpu_types: ["t4"],
    });
    expect(eff.sources).toEqual({
      cpu_millis: "registration",
      memory_mb: "spec",
      disk_mb: "host",
      gpu_count: "registration",
      gpu_types: "registration",
    });
    expect(eff.unknown).toEqual([]);
  });

  it("marks fields nobody declared as unknown until a Runner registers", () => {
    const eff = effectiveCapacity(workerResource("w1", { resource_capacity: { cpu_millis: 2000 } }));
    expect(eff.unknown).toEqual(["memory_mb", "disk_mb", "gpu_count"]);
    expect(eff.capacity).toEqual({ cpu_millis: 2000, memory_mb: 0, disk_mb: 0, gpu_count: 0, gpu_types: [] });
  });

  it("builds the worker view with inventory values winning over the registration", () => {
    const w = workerResource(
      "w1",
      { max_concurrency: 3, capabilities: ["linux"], unschedulable: true },
      {
        registration: {
          max_concurrency: 8,
          initial_concurrency: 2,
          capabilities: ["linux", "*"],
          host_resources: { cpu_count: 2 },
        },
        desired_concurrency: 2,
        reported_active: 1,
        conditions: [{ type: "Ready", status: "True" }],
      },
    );
    const v = workerView(w, []);
    expect(v).toMatchObject({
      name: "w1",
      capabilities: ["linux"],
      max_concurrency: 3,
      desired_concurrency: 2,
      reported_active: 1,
      cordoned: true,
      ready: true,
      unknown: [],
      capacity: { cpu_millis: 2000, memory_mb: 0, disk_mb: 0, gpu_count: 0, gpu_types: [] },
    });
    expect(workerView(w, [], { ready: false, reported_active: 0 })).toMatchObject({ ready: false, reported_active: 0 });
  });
});

describe("a request that never fits, even on an empty worker, is exceeds_worker_capacity and unsatisfiable", () => {
  it("rejects a request above a known capacity as unresolvable, v1 reason resource_reservation_unavailable", () => {
    const d = admit(task({ requests: vec({ memory_mb: 8192 }) }), worker());
    expect(d.reason).toBe("resource_reservation_unavailable");
    expect(d.reasons).toEqual(["exceeds_worker_capacity"]);
    expect(d.unresolvable).toBe(true);
    expect(d.failures[0]).toMatchObject({
      field: "memory_mb",
      shortfall: { capacity: 6144, reserved: 0, requested: 8192, short: 2048 },
      resolvable: false,
    });
  });

  it("keeps a shortfall in an unknown dimension resolvable", () => {
    const d = admit(
      task({ requests: vec({ memory_mb: 512 }) }),
      worker({ capacity: vec({ cpu_millis: 1000 }), unknown: ["memory_mb", "disk_mb", "gpu_count"] }),
    );
    expect(d.reasons).toEqual(["resource_reservation_unavailable"]);
    expect(d.unresolvable).toBe(false);
  });

  it("calls a task unsatisfiable only when every worker has an unresolvable failure", () => {
    const big = task({ required_capability: "linux", requests: vec({ memory_mb: 8192 }) });
    const small = worker({ name: "small" });
    const cordonedBig = worker({
      name: "cordoned-big",
      cordoned: true,
      capacity: vec({ cpu_millis: 4000, memory_mb: 16384, disk_mb: 30000 }),
    });
    const noLinux = worker({ name: "no-linux", capabilities: ["windows"], capacity: vec({ memory_mb: 16384 }) });
    expect(summarize([admit(big, small), admit(big, noLinux)]).unsatisfiable).toBe(true);
    expect(summarize([admit(big, small), admit(big, cordonedBig)]).unsatisfiable).toBe(false);
    expect(summarize([]).unsatisfiable).toBe(false);
  });
});

describe("every failing check is reported with its numbers; the v1 reason follows v1 order", () => {
  it("lists all failures in check order and all codes in reason order", () => {
    const w = worker({
      cordoned: true,
      ready: false,
      capabilities: ["windows"],
      desired_concurrency: 1,
      leases: [lease("a", { memory_mb: 4096 }, "exclusive")],
    });
    const d = admit(
      task({
        placement: "exclusive",
        required_capability: "linux",
        excluded_workers: ["evaluation-01"],
        requests: vec({ memory_mb: 3072 }),
      }),
      w,
    );
    expect(d.failures.map((f) => [f.check, f.code])).toEqual([
      ["capability", "capability_missing"],
      ["excluded_worker", "worker_excluded"],
      ["cordoned", "worker_cordoned"],
      ["ready", "worker_not_ready"],
      ["exclusive_holder", "worker_has_exclusive_task"],
      ["exclusive_needs_empty", "exclusive_worker_busy"],
      ["concurrency", "worker_concurrency_reached"],
      ["resource_fit", "resource_reservation_unavailable"],
    ]);
    expect(d.reasons).toEqual([
      "worker_cordoned",
      "capability_missing",
      "worker_excluded",
      "worker_not_ready",
      "exclusive_worker_busy",
      "worker_has_exclusive_task",
      "resource_reservation_unavailable",
      "worker_concurrency_reached",
    ]);
    expect(d.reason).toBe("worker_blocked");
    expect(d.admission.shortfalls.memory_mb).toEqual({ capacity: 6144, reserved: 4096, requested: 3072, short: 1024 });
  });

  it.each([
    [{ ready: false, capabilities: ["windows"] }, {}, "worker_not_eligible"],
    [{ ready: false, leases: [lease("a", {}, "exclusive")] }, {}, "worker_not_ready"],
    [{ leases: [lease("a", { memory_mb: 6000 }, "exclusive")] }, { memory_mb: 1000 }, "worker_has_exclusive_task"],
    [
      { desired_concurrency: 1, leases: [lease("a", { memory_mb: 6000 })] },
      { memory_mb: 1000 },
      "resource_reservation_unavailable",
    ],
  ] as [Partial<WorkerView>, ResourceSpec, string][])(
    "picks the first v1 reason in v1 order (%#)",
    (w, requests, v1) => {
      const d = admit(task({ requests: vec(requests) }), worker(w));
      expect(d.failures.length).toBeGreaterThan(1);
      expect(d.reason).toBe(v1);
    },
  );
});

describe("nomination: a worker held for a starving task admits only work that cannot delay it", () => {
  const now = 1_000_000;
  // 6144 MB; a (4000 MB) is what the nominee waits on, b (1000 MB) stays.
  const held = (nominee: TaskView, startsIn = 10_000) =>
    worker({
      leases: [lease("a", { memory_mb: 4000 }), lease("b", { memory_mb: 1000 })],
      nominee: { task: nominee, blockers: ["a"], starts_at: now + startsIn, now },
    });
  const big = task({ name: "big", requests: vec({ memory_mb: 4100 }) });

  it("admits work that fits beside the nominee once its blockers end", () => {
    // After a ends: b 1000 + this 1000 + big 4100 = 6100 <= 6144.
    expect(admit(task({ requests: vec({ memory_mb: 1000 }) }), held(big)).ok).toBe(true);
  });

  it("refuses work that would leave the nominee no room, as worker_nominated (v1: resource_reservation_unavailable)", () => {
    // 1100 fits now (5000 + 1100 <= 6144) but not beside big once a ends (1000 + 1100 + 4100 > 6144).
    const d = admit(task({ requests: vec({ memory_mb: 1100 }) }), held(big));
    expect(d.reasons).toEqual(["worker_nominated"]);
    expect(d.reason).toBe("resource_reservation_unavailable");
    expect(d.unresolvable).toBe(false);
  });

  it("admits work whose declared run time ends before the nominee could start, and refuses longer or undeclared work", () => {
    const excl = task({ name: "excl", placement: "exclusive" });
    expect(admit(task({ declared_seconds: 9 }), held(excl)).ok).toBe(true);
    expect(admit(task({ declared_seconds: 11 }), held(excl)).reasons).toEqual(["worker_nominated"]);
    expect(admit(task({}), held(excl)).reasons).toEqual(["worker_nominated"]);
    // Blockers with no declared run time: the nominee's start is unknown, so no run time is short enough.
    expect(admit(task({ declared_seconds: 1 }), held(excl, Infinity)).reasons).toEqual(["worker_nominated"]);
  });

  it("the nominee itself is judged by the other checks only", () => {
    const w = held(big);
    expect(admit(big, w).reasons).toEqual(["resource_reservation_unavailable"]);
    expect(admit(big, { ...w, leases: w.leases.filter((l) => l.task !== "a") }).ok).toBe(true);
  });
});

describe("a nominee's fit runs every check but nomination", () => {
  it("is derived from CHECKS, so a check added there (the queue quota) counts for a held worker too", async () => {
    const { CHECKS, fitChecks, nomination } = await import("../../src/admission/checks.ts");
    expect(fitChecks().map((c) => c.name)).toEqual(CHECKS.filter((c) => c !== nomination).map((c) => c.name));
    expect(fitChecks().map((c) => c.name)).toContain("queue_quota");
  });
});
