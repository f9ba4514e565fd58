// Decisions as text (only at print time) and as a summary the Admitted / Unsatisfiable conditions use.
import { describe, expect, it } from "vitest";
import {
  admit,
  explainTask,
  explainWorker,
  normalise,
  summarize,
  type LeaseView,
  type TaskView,
  type WorkerView,
} from "../../src/admission/index.ts";
import type { ResourceSpec } from "../../src/resources/types.ts";

const vec = (r: ResourceSpec = {}) => normalise(r);
const lease = (task: string, r: ResourceSpec = {}, placement: "shared" | "exclusive" = "shared"): LeaseView => ({
  task,
  placement,
  reservation: vec(r),
});

const worker = (name: string, over: Partial<WorkerView> = {}): WorkerView => ({
  name,
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
  name: "campaign__case__setting__run-001",
  required_capability: "",
  placement: "shared",
  requests: vec({ memory_mb: 3072 }),
  excluded_workers: [],
  ...over,
});

describe("one line per worker, with the numbers", () => {
  it("explains a memory shortfall as need / free / capacity / reserved / short", () => {
    const d = admit(task(), worker("evaluation-01", { leases: [lease("a", { memory_mb: 4096 })] }));
    expect(explainWorker(d)).toBe("memory_mb: need 3072, free 2048 (capacity 6144, reserved 4096, short 1024)");
  });

  it("says ok for a worker that admits", () => {
    expect(explainWorker(admit(task(), worker("evaluation-01")))).toBe("ok");
  });

  it("joins every failure on the worker", () => {
    const d = admit(
      task({ required_capability: "gpu" }),
      worker("w", { ready: false, desired_concurrency: 1, leases: [lease("a", { memory_mb: 4096 })] }),
    );
    expect(explainWorker(d)).toBe(
      "capability_missing: needs gpu, worker offers linux; " +
        "worker_not_ready: no heartbeat within the grace period; " +
        "worker_concurrency_reached: active 1, limit 1 (desired 1, max 4); " +
        "memory_mb: need 3072, free 2048 (capacity 6144, reserved 4096, short 1024)",
    );
  });

  it("says a request larger than the whole worker never fits", () => {
    const d = admit(task({ requests: vec({ memory_mb: 8192 }) }), worker("w"));
    expect(explainWorker(d)).toBe(
      "memory_mb: need 8192, capacity 6144: never fits, even empty (exceeds_worker_capacity)",
    );
  });

  it("notes a capacity that is not reported yet", () => {
    const d = admit(
      task({ requests: vec({ memory_mb: 512 }) }),
      worker("w", { capacity: vec({ cpu_millis: 1000 }), unknown: ["memory_mb", "disk_mb", "gpu_count"] }),
    );
    expect(explainWorker(d)).toBe(
      "memory_mb: need 512, free 0 (capacity 0, reserved 0, short 512); capacity not reported yet",
    );
  });

  it("lists the accelerator types on both sides", () => {
    const d = admit(
      task({ requests: vec({ gpu_count: 1, gpu_types: ["h100"] }) }),
      worker("w", { capacity: vec({ gpu_count: 1, gpu_types: ["t4"], memory_mb: 4096, cpu_millis: 1000 }) }),
    );
    expect(explainWorker(d)).toBe("gpu_types: need [h100], worker has [t4] (exceeds_worker_capacity)");
  });

  it("names the exclusive and cordon reasons", () => {
    const d = admit(
      task({ placement: "exclusive", requests: vec() }),
      worker("w", { cordoned: true, leases: [lease("x", {}, "exclusive")] }),
    );
    expect(explainWorker(d)).toBe(
      "worker_cordoned: cordoned, no new leases; worker_has_exclusive_task: an exclusive lease is active; " +
        "exclusive_worker_busy: exclusive placement needs an empty worker, 1 active",
    );
  });
});

describe("a task summary over all workers, keeping each worker's detail", () => {
  const decisions = () => {
    const t = task({ required_capability: "linux" });
    return [
      admit(t, worker("evaluation-01", { leases: [lease("a", { memory_mb: 4096 })] })),
      admit(t, worker("evaluation-02", { leases: [lease("b", { memory_mb: 3584 })] })),
      admit(t, worker("gpu-01", { capabilities: ["gpu"] })),
    ];
  };

  it("prints 0/N with counts by code and the numbers per worker", () => {
    expect(explainTask(decisions())).toBe(
      "0/3 workers admit: 2 resource_reservation_unavailable (memory_mb short 1024 on evaluation-01, short 512 on evaluation-02), " +
        "1 capability_missing (linux on gpu-01)",
    );
  });

  it("returns the same facts as data", () => {
    expect(summarize(decisions())).toEqual({
      total: 3,
      admittable: [],
      dominant: "resource_reservation_unavailable",
      counts: { resource_reservation_unavailable: 2, capability_missing: 1 },
      unsatisfiable: false,
    });
  });

  it("names the workers that admit", () => {
    const t = task();
    const ds = [admit(t, worker("a")), admit(t, worker("b", { cordoned: true }))];
    expect(explainTask(ds)).toBe("1/2 workers admit (a): 1 worker_cordoned (b)");
    expect(summarize(ds).admittable).toEqual(["a"]);
    expect(explainTask([admit(t, worker("a"))])).toBe("1/1 workers admit (a)");
  });

  it("counts a worker under each of its codes and breaks count ties by reason order", () => {
    const t = task({ requests: vec({ memory_mb: 3072, cpu_millis: 4500 }) });
    const ds = [
      admit(t, worker("a", { ready: false })),
      admit(t, worker("b", { cordoned: true, capacity: vec({ cpu_millis: 8000, memory_mb: 8192 }) })),
    ];
    const s = summarize(ds);
    expect(s.counts).toEqual({ worker_not_ready: 1, worker_cordoned: 1, exceeds_worker_capacity: 1 });
    expect(s.dominant).toBe("worker_cordoned");
    expect(explainTask(ds)).toBe(
      "0/2 workers admit: 1 worker_cordoned (b), 1 worker_not_ready (a), 1 exceeds_worker_capacity (cpu_millis short 500 on a)",
    );
  });

  it("marks a task no worker can ever fit as unsatisfiable", () => {
    const t = task({ required_capability: "linux", requests: vec({ memory_mb: 8192 }) });
    const ds = [
      admit(t, worker("evaluation-01")),
      admit(t, worker("windows-01", { capabilities: ["windows"], capacity: vec({ memory_mb: 9000 }) })),
    ];
    const s = summarize(ds);
    expect(s.unsatisfiable).toBe(true);
    expect(s.dominant).toBe("capability_missing");
    expect(explainTask(ds)).toBe(
      "0/2 workers admit: 1 capability_missing (linux on windows-01), 1 exceeds_worker_capacity (memory_mb short 2048 on evaluation-01); " +
        "unsatisfiable: no worker fits it even when empty",
    );
  });

  it("handles no workers at all", () => {
    expect(explainTask([])).toBe("0/0 workers admit: no workers");
    expect(summarize([])).toEqual({ total: 0, admittable: [], counts: {}, unsatisfiable: false });
  });
});

describe("the task-wide line stays small with many workers", () => {
  it("names five workers per group and counts the rest", () => {
    const ws = Array.from({ length: 12 }, (_, i) =>
      worker(`w${String(i).padStart(2, "0")}`, { leases: [lease("a", { memory_mb: 4096 })] }),
    );
    const line = explainTask(ws.map((w) => admit(task(), w)));
    expect(line).toBe(
      "0/12 workers admit: 12 resource_reservation_unavailable (memory_mb short 1024 on w00, short 1024 on w01, short 1024 on w02, short 1024 on w03, short 1024 on w04, +7 more)",
    );
  });

  it("groups thousands of workers that lack a capability, and by field those short of several resources", () => {
    const ws = Array.from({ length: 2000 }, (_, i) => worker(`w${String(i).padStart(4, "0")}`));
    const gpu = ws.map((w) => admit(task({ required_capability: "gpu" }), w));
    expect(explainTask(gpu)).toBe(
      "0/2000 workers admit: 2000 capability_missing (gpu on w0000, w0001, w0002, w0003, w0004, +1995 more); " +
        "unsatisfiable: no worker fits it even when empty",
    );
    // Two fields short on each of three workers: sorted by field, each field named once.
    const big = ws.slice(0, 3).map((w) => admit(task({ requests: vec({ cpu_millis: 99_000, memory_mb: 99_000 }) }), w));
    expect(explainTask(big)).toBe(
      "0/3 workers admit: 3 exceeds_worker_capacity (cpu_millis short 95000 on w0000, short 95000 on w0001, " +
        "short 95000 on w0002, memory_mb short 92856 on w0000, short 92856 on w0001, +1 more); " +
        "unsatisfiable: no worker fits it even when empty",
    );
  });
});
