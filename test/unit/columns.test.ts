import { describe, expect, it } from "vitest";
import { columnsFor } from "../../src/resources/columns.ts";
import { evalJsonPath } from "../../src/resources/jsonpath.ts";
import { toTable } from "../../src/api/table.ts";

describe("columns, defined once for the server-side Table and loom get", () => {
  const worker = {
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name: "w1", creationTimestamp: new Date(Date.now() - 90_000).toISOString() },
    spec: { connection_mode: "ssh-start", unschedulable: true },
    status: {
      active_count: 2,
      effective_limit: 4,
      reserved: { cpu_millis: 1500, memory_mb: 1536, disk_mb: 0, gpu_count: 0 },
      capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
      conditions: [
        { type: "Registered", status: "True" },
        { type: "Ready", status: "False" },
      ],
    },
  };

  it("evaluates the JSONPath subset the CRDs use", () => {
    expect(evalJsonPath(worker, '.status.conditions[?(@.type=="Ready")].status')).toEqual(["False"]);
    expect(evalJsonPath(worker, ".status.conditions[0].type")).toEqual(["Registered"]);
    expect(evalJsonPath(worker, ".spec.nothing")).toEqual([]);
  });

  it("starts from the CRD's printer columns and adds headroom as reserved/capacity", () => {
    const cols = columnsFor("Worker");
    expect(cols.map((c) => c.name)).toEqual([
      "NAME",
      "READY",
      "ACTIVE/LIMIT",
      "CPU",
      "MEM",
      "DISK",
      "GPU",
      "MODE",
      "HOST",
      "AGE",
    ]);
    const now = new Date();
    expect(cols.map((c) => c.cell(worker, now))).toEqual([
      "w1",
      "False,SchedulingDisabled",
      "2/4",
      "1500m/4000m",
      "1536/6144Mi",
      "0/30000Mi",
      "0/0",
      "ssh-start",
      "<none>",
      "90s",
    ]);
  });

  it("renders a Table with those cells, priorities and PartialObjectMetadata rows", () => {
    const t = toTable("Worker", [worker], "7");
    expect(t.kind).toBe("Table");
    expect(t.columnDefinitions.find((c) => c.name === "MODE")?.priority).toBe(1);
    expect(t.rows[0].cells[2]).toBe("2/4");
    expect(t.rows[0].object).toMatchObject({ kind: "PartialObjectMetadata", metadata: { name: "w1" } });
  });
});
