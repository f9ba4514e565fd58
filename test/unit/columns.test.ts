import { describe, expect, it } from "vitest";
import { cellValue, columnsFor, evalJsonPath, humanDuration } from "../../src/resources/columns.ts";

describe("printer columns from the CRDs", () => {
  const worker = {
    metadata: { name: "w1", creationTimestamp: new Date(Date.now() - 90_000).toISOString() },
    spec: { connection_mode: "ssh-start" },
    status: { active_count: 2, effective_limit: 4, conditions: [{ type: "Registered", status: "True" }, { type: "Ready", status: "False" }] },
  };

  it("evaluates the JSONPath subset the CRDs use", () => {
    expect(evalJsonPath(worker, ".status.conditions[?(@.type==\"Ready\")].status")).toEqual(["False"]);
    expect(evalJsonPath(worker, ".status.conditions[0].type")).toEqual(["Registered"]);
    expect(evalJsonPath(worker, ".spec.nothing")).toEqual([]);
    expect(() => evalJsonPath(worker, "status")).toThrow(/invalid JSONPath/);
  });

  it("puts Name first and keeps the CRD's order and priorities", () => {
    const cols = columnsFor("Worker");
    expect(cols[0]).toMatchObject({ name: "Name", format: "name" });
    expect(cols.map((c) => c.name)).toEqual(["Name", "Ready", "Active", "Limit", "Mode", "Host", "Age"]);
    expect(cols.find((c) => c.name === "Mode")?.priority).toBe(1);
  });

  it("renders cells as the API server does: dates as ages, missing as null", () => {
    const cols = columnsFor("Worker");
    const now = Date.now();
    expect(cols.map((c) => cellValue(worker, c, now))).toEqual(["w1", "False", 2, 4, "ssh-start", null, "90s"]);
  });

  it("formats ages like kubectl", () => {
    expect([5_000, 90_000, 330_000, 3 * 3600_000 + 300_000, 6 * 86400_000 + 4 * 3600_000, 400 * 86400_000].map(humanDuration)).toEqual(["5s", "90s", "5m30s", "3h5m", "6d4h", "400d"]);
  });
});
