// The web view's rows (ui/src/model.ts): what they show is taken from the watched objects,
// the figures the Hub wrote to a worker's status and the scheduler's claim order.
import { describe, expect, it } from "vitest";
import {
  campaignRows,
  filterTasks,
  parseSelector,
  sortWorkers,
  taskRow,
  workerObj,
  workerRows,
  type Task,
  type Worker,
} from "../../ui/src/model.ts";

const task = (
  name: string,
  over: {
    state?: string;
    worker?: string;
    placement?: "shared" | "exclusive";
    res?: Record<string, number>;
    campaign?: string;
    priority?: number;
    created?: string;
    labels?: Record<string, string>;
    admitted?: { status: "True" | "False"; reason: string };
  } = {},
): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name, labels: over.labels ?? {}, creationTimestamp: over.created ?? "2026-01-01T00:00:00.000Z" },
  spec: {
    campaign_id: over.campaign,
    priority: over.priority ?? 0,
    execution_profile: { placement: over.placement ?? "shared", resources: over.res ?? {} },
  },
  status: {
    state: (over.state ?? "queued") as never,
    ...(over.worker
      ? {
          lease: {
            worker: over.worker,
            epoch: 1,
            leased_at: "",
            lease_until: "",
            placement: over.placement ?? "shared",
            reservation: over.res,
          },
        }
      : {}),
    conditions: over.admitted ? [{ type: "Admitted", ...over.admitted }] : [],
  },
});

type Figures = {
  reserved?: Record<string, number>;
  active?: string[];
  activeCount?: number;
  limit?: number;
  holder?: string;
};
const worker = (
  name: string,
  over: {
    cap?: Record<string, number>;
    unschedulable?: boolean;
    ready?: boolean;
    labels?: Record<string, string>;
  } & Figures = {},
): Worker => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Worker",
  metadata: { name, labels: over.labels ?? {} },
  spec: { max_concurrency: 4, unschedulable: over.unschedulable },
  status: {
    capacity: over.cap ?? { cpu_millis: 4000, memory_mb: 8192 },
    ...(over.limit === undefined ? {} : { effective_limit: over.limit }),
    ...(over.reserved ? { reserved: over.reserved } : {}),
    ...(over.active ? { active_task_ids: over.active, active_count: over.activeCount ?? over.active.length } : {}),
    ...(over.holder ? { exclusive_holder: over.holder } : {}),
    registration: {},
    conditions: [{ type: "Ready", status: over.ready === false ? "False" : "True" }],
  },
});

describe("worker rows", () => {
  it("show the reserved vector, active tasks, active count and limit the Hub wrote, and name the state", () => {
    const rows = workerRows(
      [
        worker("w1", {
          reserved: { cpu_millis: 1500, memory_mb: 512, gpu_count: 1 },
          active: ["a", "b"],
          activeCount: 3,
          limit: 2,
        }),
        worker("w2", { reserved: { memory_mb: 100 }, active: ["x"], holder: "x", limit: 1 }),
        worker("w3", { unschedulable: true, limit: 2 }),
        worker("w4", { ready: false }),
      ].map(workerObj),
    );
    const by = Object.fromEntries(rows.map((r) => [r.name, r]));
    expect(by.w1.reserved).toEqual({ cpu_millis: 1500, memory_mb: 512, disk_mb: 0, gpu_count: 1 });
    expect(by.w1.active).toEqual(["a", "b"]);
    expect(by.w1.activeCount).toBe(3); // a heartbeat reported a run the Hub holds no lease for
    expect(by.w1.limit).toBe(2);
    expect(by.w1.state).toBe("ready");
    expect(by.w2.state).toBe("exclusive");
    expect(by.w3.state).toBe("cordoned");
    expect(by.w3.reserved).toEqual({ cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0 });
    expect(by.w4.state).toBe("not ready");
    expect(by.w1.capacity.cpu_millis).toBe(4000);
  });

  it("show no limit before the Hub has written one, rather than one of their own", () => {
    expect(workerRows([workerObj(worker("new"))])[0].limit).toBeUndefined();
  });

  it("sort by a label, absent values last, then by name", () => {
    const rows = workerRows(
      [worker("b", { labels: { zone: "b" } }), worker("a"), worker("c", { labels: { zone: "a" } })].map(workerObj),
    );
    expect(sortWorkers(rows, { key: "label:zone", desc: false }).map((r) => r.name)).toEqual(["c", "b", "a"]);
  });
});

describe("label selectors", () => {
  const labels = { pool: "gpu", zone: "eu" };
  it.each([
    ["pool=gpu", true],
    ["pool==gpu", true],
    ["pool=cpu", false],
    ["pool!=cpu", true],
    ["zone", true],
    ["!zone", false],
    ["!rack", true],
    ["pool=gpu, zone=eu", true],
    ["", true],
  ])("%s", (sel, want) => {
    const s = parseSelector(sel);
    expect(s.ok && s.match(labels)).toBe(want);
  });
  it("names the term that does not parse", () => {
    expect(parseSelector("pool=gpu,=x")).toEqual({
      ok: false,
      error: 'label selector term "=x" is not key, !key, key=value or key!=value',
    });
    expect(parseSelector("!a=b").ok).toBe(false);
  });
});

describe("the queue", () => {
  const rows = [
    task("low", {
      priority: 0,
      created: "2026-01-01T00:00:01.000Z",
      campaign: "c1",
      admitted: { status: "False", reason: "insufficient_resources" },
    }),
    task("high", {
      priority: 5,
      created: "2026-01-01T00:00:03.000Z",
      campaign: "c2",
      labels: { team: "x" },
      admitted: { status: "True", reason: "Admitted" },
    }),
    task("early", { priority: 0, created: "2026-01-01T00:00:00.000Z", campaign: "c1", state: "running", worker: "w1" }),
    task("old", { priority: 0, created: "2026-01-01T00:00:02.000Z", campaign: "c1", state: "clean" }),
  ].map(taskRow);
  const all = { campaign: "", state: "", reason: "", worker: "", text: "", selector: () => true };

  it("is in claim order: priority, then arrival", () => {
    expect(filterTasks(rows, all).map((t) => t.name)).toEqual(["high", "early", "low", "old"]);
  });
  it("filters by campaign, state group, reason, worker and label", () => {
    const sel = parseSelector("team=x");
    expect(filterTasks(rows, { ...all, campaign: "c1", state: "pending" }).map((t) => t.name)).toEqual(["low"]);
    expect(filterTasks(rows, { ...all, state: "active" }).map((t) => t.name)).toEqual(["early"]);
    expect(filterTasks(rows, { ...all, state: "final" }).map((t) => t.name)).toEqual(["old"]);
    expect(filterTasks(rows, { ...all, reason: "admitted" }).map((t) => t.name)).toEqual(["high"]);
    expect(filterTasks(rows, { ...all, worker: "w1" }).map((t) => t.name)).toEqual(["early"]);
    expect(sel.ok && filterTasks(rows, { ...all, selector: sel.match }).map((t) => t.name)).toEqual(["high"]);
  });
  it("filters by queue; a task that names none is in default", () => {
    const named = taskRow({
      ...task("teamed", { created: "2026-01-01T00:00:04.000Z" }),
      spec: { ...task("teamed").spec, queue: "team-a" },
    });
    expect(named.queue).toBe("team-a");
    expect(filterTasks([...rows, named], { ...all, queue: "team-a" }).map((t) => t.name)).toEqual(["teamed"]);
    expect(filterTasks([...rows, named], { ...all, queue: "default" }).map((t) => t.name)).toEqual([
      "high",
      "early",
      "low",
      "old",
    ]);
  });
  it("shows the Admitted reason, and admitted when the condition is True", () => {
    expect(rows.map((t) => [t.name, t.reason])).toEqual([
      ["low", "insufficient_resources"],
      ["high", "admitted"],
      ["early", ""],
      ["old", ""],
    ]);
  });
  it("campaign progress counts each task once by state", () => {
    const c = campaignRows(
      [
        { name: "c1", campaignId: "c1" },
        { name: "empty", campaignId: "e" },
      ],
      rows,
    );
    expect(c.map((r) => [r.name, r.total, r.pending, r.active, r.final, r.declared])).toEqual([
      ["c1", 3, 1, 1, 1, true],
      ["c2", 1, 1, 0, 0, false],
      ["empty", 0, 0, 0, 0, true],
    ]);
  });
});

describe("a finished task's worker", () => {
  it("is the worker of its last attempt, so the queue filtered by that worker finds it, holding nothing", () => {
    const done = taskRow({
      ...task("done", { state: "clean" }),
      status: {
        state: "clean",
        attempts: [
          { attempt: 1, worker: "w1" },
          { attempt: 2, worker: "w2" },
        ],
      },
    });
    const requeued = taskRow({
      ...task("again", { state: "retry_queued" }),
      status: { state: "retry_queued", attempts: [{ attempt: 1, worker: "w1" }] },
    });
    expect(done.worker).toBe("w2");
    expect(done.reservation).toBeUndefined();
    expect(requeued.worker).toBe("");
    const all = { campaign: "", state: "", reason: "", text: "", selector: () => true };
    expect(filterTasks([done, requeued], { ...all, worker: "w2" }).map((t) => t.name)).toEqual(["done"]);
  });
});
