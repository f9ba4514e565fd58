// kubectl's output habits in the CLI's printers: AGE, alignment, the JSONPath subset of CRD
// printer columns, and the column sets `loom get` derives from the CRDs.
import { describe, expect, it } from "vitest";
import { campaignColumns, taskColumns, workerColumns } from "../../src/cli/columns.ts";
import {
  age,
  cellText,
  crdColumn,
  evalJsonPath,
  formatRequests,
  formatShortfalls,
  formatTable,
  formatVector,
  humanDuration,
  parseJsonPath,
  PrefixWriter,
  tabwrite,
  visibleColumns,
  type Column,
} from "../../src/cli/printers.ts";
import { bar } from "../../src/cli/top.ts";

const s = 1000;
const m = 60 * s;
const h = 60 * m;
const d = 24 * h;

describe("AGE is apimachinery's HumanDuration", () => {
  it.each([
    [0, "0s"],
    [-900, "0s"], // clock skew under two seconds reads as now
    [-5 * s, "<invalid>"],
    [90 * s, "90s"],
    [119 * s, "119s"],
    [2 * m, "2m"],
    [5 * m + 30 * s, "5m30s"],
    [9 * m + 59 * s, "9m59s"],
    [10 * m + 30 * s, "10m"],
    [179 * m, "179m"],
    [3 * h, "3h"],
    [3 * h + 25 * m, "3h25m"],
    [8 * h + 25 * m, "8h"],
    [47 * h, "47h"],
    [2 * d, "2d"],
    [6 * d + 4 * h, "6d4h"],
    [8 * d + 4 * h, "8d"],
    [400 * d, "400d"],
    [2 * 365 * d, "2y"],
    [3 * 365 * d + 10 * d, "3y10d"],
    [9 * 365 * d + 10 * d, "9y"],
  ])("%d ms -> %s", (ms, want) => {
    expect(humanDuration(ms)).toBe(want);
  });

  it("ages a timestamp, and says <none> without one", () => {
    const now = new Date("2026-01-01T00:05:30Z");
    expect(age("2026-01-01T00:00:00Z", now)).toBe("5m30s");
    expect(age(undefined, now)).toBe("<none>");
    expect(age("not a time", now)).toBe("<invalid>");
  });
});

describe("alignment", () => {
  it("pads every column to its widest cell plus two spaces, and never pads the last", () => {
    expect(tabwrite(["NAME\tSTATE\tAGE", "a-long-name\tq\t5s", "b\tleased\t10m"])).toEqual([
      "NAME         STATE   AGE",
      "a-long-name  q       5s",
      "b            leased  10m",
    ]);
  });

  it("aligns only runs of lines that share a column (describe's Key: value blocks)", () => {
    expect(tabwrite(["Name:\tx", "Annotations:\t<none>", "Spec:", "  Host:\th", "  Connection Mode:\tssh"])).toEqual([
      "Name:         x",
      "Annotations:  <none>",
      "Spec:",
      "  Host:             h",
      "  Connection Mode:  ssh",
    ]);
  });

  it("measures cells without their ANSI colors", () => {
    const [a, b] = tabwrite(["\x1b[32m##\x1b[0m\tx", "####\ty"]);
    expect(a).toBe("\x1b[32m##\x1b[0m    x");
    expect(b).toBe("####  y");
  });

  it("keeps the widths a watch printed first, so later rows stay in their columns", () => {
    expect(tabwrite(["a\tb"], 2, [8])).toEqual(["a       b"]);
  });

  it("prints headers in caps, <none> for empty cells, cuts a cell at its first newline, and shows priority-1 columns only when wide", () => {
    type Row = { n: string; note?: string };
    const cols: Column<Row>[] = [
      { name: "name", priority: 0, cell: (r) => r.n },
      { name: "Note", priority: 0, cell: (r) => r.note ?? "" },
      { name: "extra", priority: 1, cell: () => "wide-only" },
    ];
    const rows: Row[] = [{ n: "a", note: "first line\nsecond line" }, { n: "bb" }];
    expect(formatTable(visibleColumns(cols, false), rows, new Date())).toBe(
      "NAME  NOTE\na     first line\nbb    <none>\n",
    );
    expect(formatTable(visibleColumns(cols, true), rows, new Date()).split("\n")[0]).toBe("NAME  NOTE        EXTRA");
    expect(cellText("a\tb\nc")).toBe("a b");
  });

  it("describe writes `Key:  value` aligned per section and tables one level in", () => {
    const w = new PrefixWriter();
    w.kv(0, "Name", "t1");
    w.kv(0, "Labels", undefined);
    w.section(0, "Conditions", ["TYPE", "STATUS"], [["Admitted", "False"]]);
    w.section(0, "Events", ["TYPE"], []);
    expect(w.toString()).toBe(
      "Name:    t1\nLabels:  <none>\nConditions:\n  TYPE      STATUS\n  Admitted  False\nEvents:  <none>\n",
    );
  });
});

describe("the JSONPath subset of additionalPrinterColumns", () => {
  const obj = {
    metadata: { name: "w", labels: { "loom.dev/campaign": "c1" } },
    status: {
      state: "queued",
      attempt: 0,
      conditions: [
        { type: "Registered", status: "True" },
        { type: "Ready", status: "False", reason: "HeartbeatMissing" },
      ],
      list: [1, 2, 3],
    },
  };

  it("reads fields, indexes, wildcards, quoted keys and ==-filters", () => {
    expect(evalJsonPath(obj, ".status.state")).toEqual(["queued"]);
    expect(evalJsonPath(obj, ".status.attempt")).toEqual([0]);
    expect(evalJsonPath(obj, '.status.conditions[?(@.type=="Ready")].status')).toEqual(["False"]);
    expect(evalJsonPath(obj, ".status.conditions[?(@.type=='Registered')].status")).toEqual(["True"]);
    expect(evalJsonPath(obj, ".status.list[1]")).toEqual([2]);
    expect(evalJsonPath(obj, ".status.list[-1]")).toEqual([3]);
    expect(evalJsonPath(obj, ".status.conditions[*].type")).toEqual(["Registered", "Ready"]);
    expect(evalJsonPath(obj, ".metadata.labels['loom.dev/campaign']")).toEqual(["c1"]);
    expect(evalJsonPath(obj, "{.metadata.name}")).toEqual(["w"]);
  });

  it("selects nothing for a missing field or a filter with no match", () => {
    expect(evalJsonPath(obj, ".status.lease.worker")).toEqual([]);
    expect(evalJsonPath(obj, '.status.conditions[?(@.type=="Leased")].status')).toEqual([]);
  });

  it("rejects what it does not understand instead of printing something wrong", () => {
    expect(() => parseJsonPath(".a[?(@.x>1)]")).toThrow(/unsupported selector/);
    expect(() => parseJsonPath("a.b")).toThrow(/invalid JSONPath/);
  });

  it("turns a CRD column into a cell: <none> when missing, AGE for a date", () => {
    const now = new Date("2026-01-01T01:00:00Z");
    const ready = crdColumn({
      name: "Ready",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Ready")].status',
    });
    const ageCol = crdColumn({ name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp", priority: 0 });
    const wide = crdColumn({ name: "Host", type: "string", jsonPath: ".spec.host", priority: 1 });
    expect(ready.name).toBe("READY");
    expect(ready.cell(obj, now)).toBe("False");
    expect(ready.cell({}, now)).toBe("<none>");
    expect(ageCol.cell({ metadata: { creationTimestamp: "2026-01-01T00:54:30Z" } }, now)).toBe("5m30s");
    expect(wide.priority).toBe(1);
  });
});

describe("loom get's columns come from the CRDs, plus Loom's admission columns", () => {
  const names = (cols: Column[], wide: boolean) => visibleColumns(cols, wide).map((c) => c.name);
  const now = new Date("2026-01-01T00:10:00Z");

  it("tasks: STATE WORKER ATTEMPT REQUESTS REASON AGE, and PLACEMENT CAMPAIGN when wide", () => {
    expect(names(taskColumns(), false)).toEqual(["NAME", "STATE", "WORKER", "ATTEMPT", "REQUESTS", "REASON", "AGE"]);
    expect(names(taskColumns(), true)).toEqual([
      "NAME",
      "STATE",
      "WORKER",
      "ATTEMPT",
      "PLACEMENT",
      "REQUESTS",
      "CAMPAIGN",
      "REASON",
      "AGE",
    ]);
  });

  it("a task's REQUESTS and its REASON only while it is not admitted", () => {
    const cell = (name: string, t: object) =>
      taskColumns()
        .find((c) => c.name === name)!
        .cell(t as never, now);
    const queued = {
      metadata: { name: "t", creationTimestamp: "2026-01-01T00:00:00Z" },
      spec: {
        execution_profile: { placement: "shared", resources: { cpu_millis: 750, memory_mb: 1536, disk_mb: 2048 } },
      },
      status: {
        state: "queued",
        conditions: [{ type: "Admitted", status: "False", reason: "resource_reservation_unavailable" }],
      },
    };
    expect(cell("REQUESTS", queued)).toBe("cpu=750m,mem=1536Mi,disk=2048Mi");
    expect(cell("REASON", queued)).toBe("resource_reservation_unavailable");
    expect(
      cell("REASON", { ...queued, status: { conditions: [{ type: "Admitted", status: "True", reason: "Admitted" }] } }),
    ).toBe("<none>");
    expect(cell("REQUESTS", { spec: {} })).toBe("-");
    expect(cell("AGE", queued)).toBe("10m");
  });

  it("workers: READY ACTIVE/LIMIT and reserved/capacity per dimension, cordon shown as SchedulingDisabled", () => {
    expect(names(workerColumns(), false)).toEqual([
      "NAME",
      "READY",
      "ACTIVE/LIMIT",
      "CPU",
      "MEM",
      "DISK",
      "GPU",
      "AGE",
    ]);
    expect(names(workerColumns(), true)).toEqual([
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
    const w = {
      metadata: { name: "w" },
      spec: { unschedulable: true },
      status: {
        conditions: [{ type: "Ready", status: "True" }],
        active_count: 1,
        effective_limit: 4,
        capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
        reserved: { cpu_millis: 1500, memory_mb: 1536, disk_mb: 0, gpu_count: 0 },
      },
    };
    const row = visibleColumns(workerColumns(), false).map((c) => c.cell(w as never, now));
    expect(row.slice(0, 7)).toEqual([
      "w",
      "True,SchedulingDisabled",
      "1/4",
      "1500m/4000m",
      "1536/6144Mi",
      "0/30000Mi",
      "0/0",
    ]);
    expect(
      visibleColumns(workerColumns(), false)
        .map((c) => c.cell({ metadata: { name: "x" } } as never, now))
        .slice(1, 4),
    ).toEqual(["<none>", "<none>", "<none>"]);
  });

  it("campaigns: the CRD's columns as they are", () => {
    expect(names(campaignColumns(), false)).toEqual(["NAME", "TASKS", "PENDING", "FINAL", "AGE"]);
  });
});

describe("units", () => {
  it("requests leave zeros out; snapshots keep every dimension", () => {
    expect(formatRequests({ cpu_millis: 750, memory_mb: 1536, disk_mb: 2048, gpu_count: 0 })).toBe(
      "cpu=750m,mem=1536Mi,disk=2048Mi",
    );
    expect(formatRequests({ gpu_count: 1, gpu_types: ["a100", "h100"] })).toBe("gpu=1[a100|h100]");
    expect(formatRequests({})).toBe("-");
    expect(formatVector({ cpu_millis: 0, memory_mb: 1536 })).toBe("cpu=0m,mem=1536Mi,disk=0Mi,gpu=0");
  });

  it("a shortfall is need/free per dimension, a type set need/have", () => {
    expect(
      formatShortfalls({
        memory_mb: { capacity: 6144, reserved: 4096, requested: 3072, short: 1024 },
        cpu_millis: { capacity: 1000, reserved: 1500, requested: 500, short: 1000 },
      }),
    ).toBe("memory_mb 3072/2048, cpu_millis 500/0");
    expect(formatShortfalls({ gpu_types: { requested: ["a100"], available: ["t4"] } })).toBe("gpu_types [a100]/[t4]");
    expect(formatShortfalls({})).toBe("<none>");
  });

  it("top's bars: filled to the share reserved, no color unless asked", () => {
    expect(bar(2000, 4000, "m", false)).toBe("[#####.....]  50% 2000m/4000m");
    expect(bar(0, 0, "", false)).toBe("[..........]    - 0/0");
    expect(bar(3900, 4000, "m", true)).toBe("[\x1b[31m##########\x1b[0m]  98% 3900m/4000m");
    expect(bar(undefined, undefined, "m", false)).toBe("<none>");
  });
});
