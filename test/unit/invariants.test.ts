// The invariant checker the crash and fuzz tests rely on must catch each breach it names.
import { describe, expect, it } from "vitest";
import type { Task, Worker } from "../../src/resources/types.ts";
import { invariantViolations } from "../support/invariants.ts";

const worker = (name: string, cpu: number, max = 2) =>
  ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name },
    spec: { max_concurrency: max, resource_capacity: { cpu_millis: cpu, memory_mb: 1024, disk_mb: 0, gpu_count: 0 } },
  }) as unknown as Worker;
const leased = (name: string, w: string, cpu: number, placement = "shared", state = "leased") =>
  ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Task",
    metadata: { name },
    spec: { execution_profile: { placement, resources: { cpu_millis: cpu } } },
    status: {
      state,
      attempt: 1,
      lease: {
        worker: w,
        epoch: 1,
        leased_at: "2030-01-01T00:00:00Z",
        lease_until: "2030-01-01T00:10:00Z",
        placement,
        reservation: { cpu_millis: cpu, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
      },
    },
  }) as unknown as Task;

describe("invariantViolations", () => {
  it("is empty for a worker within its capacity", () => {
    expect(invariantViolations([worker("w", 2000)], [leased("a", "w", 1000), leased("b", "w", 1000)])).toEqual([]);
  });
  it("names over-reservation, too many leases, a shared exclusive lease, a lease on no worker, and an active state with no lease", () => {
    const out = invariantViolations(
      [worker("w", 1000, 1)],
      [
        leased("a", "w", 1000, "exclusive"),
        leased("b", "w", 500, "shared", "running"),
        leased("c", "ghost", 1),
        { ...leased("d", "w", 0), status: { state: "leased" } } as unknown as Task,
      ],
    );
    expect(out).toEqual([
      "task c holds a lease on ghost, which does not exist",
      "task d is leased with no lease",
      "worker w: cpu_millis reserved 1500 > capacity 1000",
      "worker w: 2 active leases > max_concurrency 1",
      "worker w: an exclusive lease shares the worker with 1 other(s)",
    ]);
  });
});
