// Every file under examples/ loads with no errors and holds what its name promises; the
// example requests fit the example workers, except the one meant to be unsatisfiable.
import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { loadFile, loadPaths, type LoadResult } from "../../src/resources/load.ts";
import { formatInputErrors } from "../../src/resources/input-errors.ts";
import { RESOURCE_FIELDS, type ResourceSpec, type Task, type Worker } from "../../src/resources/types.ts";

const EXAMPLES = join(import.meta.dirname, "..", "..", "examples");
const at = (rel: string) => join(EXAMPLES, rel);

function allFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? allFiles(p) : [p];
  });
}

const kinds = (r: LoadResult) => {
  const out: Record<string, number> = {};
  for (const o of r.resources) out[o.kind] = (out[o.kind] ?? 0) + 1;
  return out;
};
const workers = (r: LoadResult) => r.resources.filter((o) => o.kind === "Worker");

/** Fits an empty worker: every requested dimension within capacity, GPU types available. */
function fitsEmpty(t: Task, w: Worker): boolean {
  const req: ResourceSpec = t.spec.execution_profile?.resources ?? {};
  const cap: ResourceSpec = w.spec.resource_capacity ?? {};
  if (RESOURCE_FIELDS.some((f) => (req[f] ?? 0) > (cap[f] ?? 0))) return false;
  return (req.gpu_types ?? []).every((g) => (cap.gpu_types ?? []).includes(g));
}

describe("every example file loads with zero errors", () => {
  const files = allFiles(EXAMPLES);
  it("there are example files", () => {
    expect(files.length).toBeGreaterThanOrEqual(8);
  });
  it.each(files.map((f) => relative(EXAMPLES, f)))("%s", (rel) => {
    const r = loadFile(at(rel));
    expect(formatInputErrors(r.errors)).toEqual([]);
    expect(r.resources.length).toBeGreaterThan(0);
  });
  it("the whole folder loads at once (names are unique across examples)", () => {
    expect(formatInputErrors(loadPaths([EXAMPLES]).errors)).toEqual([]);
  });
});

describe("examples/inventory.json: the contract's inventory", () => {
  const r = loadFile(at("inventory.json"));
  it("holds evaluation-01 as in RESOURCE_ADMISSION.md and a second worker", () => {
    expect(kinds(r)).toEqual({ Worker: 2 });
    const [w1, w2] = workers(r);
    expect(w1.metadata.name).toBe("evaluation-01");
    expect(w1.spec).toMatchObject({
      max_concurrency: 4,
      initial_concurrency: 2,
      concurrency_policy: "fixed",
      resource_capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
      capabilities: ["linux"],
    });
    expect(w2.metadata.name).toBe("evaluation-02");
    expect(r.inventories[0].controller_public_url).toMatch(/^http:\/\//);
  });
});

describe("examples/loom-resource-admission.manifest.json", () => {
  const r = loadFile(at("loom-resource-admission.manifest.json"));
  const inv = workers(loadFile(at("inventory.json")));
  const everyWorker = workers(loadPaths([EXAMPLES]));
  const byCase = Object.fromEntries(r.tasks.map((t) => [t.spec.case_id, t]));

  it("is one Campaign of eight tasks, more than the example workers hold at once", () => {
    expect(kinds(r)).toEqual({ Campaign: 1 });
    expect(r.tasks.map((t) => t.spec.case_id)).toEqual([
      "tokenize-a",
      "tokenize-b",
      "tokenize-c",
      "tokenize-d",
      "long-context",
      "long-context-2",
      "full-host",
      "oversized",
    ]);
    expect(r.tasks.map((t) => t.metadata.name)).toContain("loom-resource-admission__full-host__baseline__run-001");
    const slots = inv.reduce((n, w) => n + (w.spec.initial_concurrency ?? w.spec.max_concurrency ?? 1), 0);
    expect(r.tasks.length - 1).toBeGreaterThan(slots);
  });
  it("two long-context tasks that fit one worker, but not both at once (they wait on memory)", () => {
    const mem = byCase["long-context"].spec.execution_profile?.resources?.memory_mb ?? 0;
    expect(byCase["long-context-2"].spec.execution_profile).toEqual(byCase["long-context"].spec.execution_profile);
    const fitting = inv.filter((w) => fitsEmpty(byCase["long-context"], w));
    expect(fitting.length).toBeGreaterThan(0);
    for (const w of fitting) expect(2 * mem).toBeGreaterThan(w.spec.resource_capacity?.memory_mb ?? 0);
  });
  it("tasks that work in steps of LOOM_EXAMPLE_STEP_SECONDS (one second unless set), so they can be watched", () => {
    for (const t of r.tasks) expect(t.spec.payload?.command).toContain('sleep "${LOOM_EXAMPLE_STEP_SECONDS:-1}"');
  });
  it("one multiplexed shared task, with the contract's merged resources", () => {
    expect(byCase["long-context"].spec.execution_profile).toEqual({
      placement: "shared",
      resources: { cpu_millis: 750, memory_mb: 4096, disk_mb: 2048 },
    });
    expect(inv.some((w) => fitsEmpty(byCase["long-context"], w))).toBe(true);
  });
  it("one exclusive task that fits an example worker", () => {
    expect(byCase["full-host"].spec.execution_profile?.placement).toBe("exclusive");
    expect(inv.some((w) => fitsEmpty(byCase["full-host"], w))).toBe(true);
  });
  it("one task that exceeds every example worker (unsatisfiable)", () => {
    expect(everyWorker.length).toBeGreaterThan(2);
    expect(everyWorker.some((w) => fitsEmpty(byCase.oversized, w))).toBe(false);
  });
});

describe("examples/gpu", () => {
  const inv = loadFile(at("gpu/inventory.yaml"));
  const camp = loadFile(at("gpu/campaign.yaml"));
  it("an inventory with a GPU worker (gpu_count and gpu_types) and a CPU worker", () => {
    expect(kinds(inv)).toEqual({ Worker: 2 });
    const gpu = workers(inv).filter((w) => (w.spec.resource_capacity?.gpu_count ?? 0) > 0);
    expect(gpu).toHaveLength(1);
    expect(gpu[0].spec.resource_capacity?.gpu_types?.length).toBeGreaterThan(0);
  });
  it("a campaign whose GPU tasks name gpu_count and gpu_types, and all fit some worker", () => {
    expect(kinds(camp)).toEqual({ Campaign: 1 });
    expect(camp.tasks).toHaveLength(3);
    const gpuTasks = camp.tasks.filter((t) => (t.spec.execution_profile?.resources?.gpu_count ?? 0) > 0);
    expect(gpuTasks).toHaveLength(2);
    for (const t of gpuTasks) expect(t.spec.execution_profile?.resources?.gpu_types).toEqual(["nvidia-l4"]);
    for (const t of camp.tasks) expect(workers(inv).some((w) => fitsEmpty(t, w))).toBe(true);
  });
});

describe("examples/gitops: a folder Loom can sync", () => {
  const r = loadPaths([at("gitops")]);
  it("an inventory and campaigns (manifest YAML, a Campaign resource, JSONL)", () => {
    expect(r.errors).toEqual([]);
    expect(kinds(r)).toEqual({ Worker: 2, Campaign: 3 });
    expect(r.tasks).toHaveLength(4 + 2 + 3);
    const ws = workers(r);
    for (const t of r.tasks) expect(ws.some((w) => fitsEmpty(t, w))).toBe(true);
  });
  it("connection_defaults reach every worker", () => {
    for (const w of workers(r))
      expect(w.spec).toMatchObject({ host: "127.0.0.1", connection_mode: "prestarted", capabilities: ["linux"] });
  });
});

describe("examples/resources.yaml: multi-document Loom resources", () => {
  const r = loadFile(at("resources.yaml"));
  it("a Worker, a Campaign and a Task", () => {
    expect(r.resources.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      "Worker/local-01",
      "Campaign/resources-demo",
      "Task/adhoc-echo",
    ]);
    expect(r.tasks).toHaveLength(2);
  });
  it("all its tasks fit its worker", () => {
    const tasks = [...r.tasks, ...r.resources.filter((o) => o.kind === "Task")];
    for (const t of tasks) expect(fitsEmpty(t, workers(r)[0])).toBe(true);
  });
});

describe("example payloads run anywhere", () => {
  const r = loadPaths([EXAMPLES]);
  const tasks = [...r.tasks, ...r.resources.filter((o) => o.kind === "Task")];
  it.each(tasks.map((t) => [t.metadata.name, t] as const))("%s is a small portable shell command", (_name, t) => {
    const p = t.spec.payload as { runner: string; command: string; timeout_seconds: number };
    expect(p.runner).toBe("shell");
    // A one-second echo, or the quick start's steps of LOOM_EXAMPLE_STEP_SECONDS (a second unless set).
    expect(p.command).toMatch(
      /^echo .*&& sleep 1$|^for step in [\d ]+; do echo .*; sleep "\$\{LOOM_EXAMPLE_STEP_SECONDS:-1\}"; done$/,
    );
    expect(p.timeout_seconds).toBeLessThanOrEqual(60);
  });
  it("worker capacities stay small (a laptop's worth)", () => {
    for (const w of workers(r)) {
      expect(w.spec.max_concurrency).toBeLessThanOrEqual(4);
      expect(w.spec.resource_capacity?.cpu_millis ?? 0).toBeLessThanOrEqual(4000);
      expect(w.spec.resource_capacity?.memory_mb ?? 0).toBeLessThanOrEqual(8192);
    }
  });

  describe("queues/queues.yaml", () => {
    const r = loadFile(at("queues/queues.yaml"));
    it("two Queues, one that borrows and one that lends and preempts", () => {
      expect(formatInputErrors(r.errors)).toEqual([]);
      expect(kinds(r)).toEqual({ Queue: 2 });
      const [a, b] = r.resources as unknown as {
        spec: { borrowing_limit?: unknown; reclaim?: string; weight?: number };
      }[];
      expect(a.spec.borrowing_limit).toEqual({ cpu_millis: 2000 });
      expect(b.spec).toMatchObject({ reclaim: "preempt", weight: 2 });
    });
  });
});
