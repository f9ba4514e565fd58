// The WORKER column of tasks: the lease's worker while leased, the last attempt's worker once
// finished (so a finished quick start still says where each task ran), none while requeued.
import { describe, expect, it } from "vitest";
import { columnsFor } from "../../src/resources/columns.ts";

const cell = (status: object) => {
  const col = columnsFor("Task").find((c) => c.name === "WORKER")!;
  return col.cell(
    { apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name: "t" }, spec: {}, status },
    new Date(),
  );
};

describe("tasks' WORKER column", () => {
  it("follows the lease, keeps the worker of a finished task, and is empty while requeued", () => {
    expect(
      cell({ state: "running", lease: { worker: "w2", epoch: 2 }, attempts: [{ attempt: 1, worker: "w1" }] }),
    ).toBe("w2");
    expect(
      cell({
        state: "clean",
        attempts: [
          { attempt: 1, worker: "w1" },
          { attempt: 2, worker: "w2" },
        ],
      }),
    ).toBe("w2");
    expect(cell({ state: "retry_queued", attempts: [{ attempt: 1, worker: "w1" }] })).toBe("<none>");
    expect(cell({ state: "queued" })).toBe("<none>");
  });
});
