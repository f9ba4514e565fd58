// task-admission's per-worker entries are written from parts encoded ahead (the worker's
// part is kept from one answer to the next). Each entry must be, byte for byte, the JSON of
// the entry built the plain way from admit(): after leases come and go, heartbeats change
// what a Runner reports, and a worker's capacity changes, no answer may show a stale part.
// An admitting entry is kept whole and given to the next answer for a task of the same
// shape: "hold-twin" asks for what "hold" asks for, and is answered after it each time. The
// worker views the scheduler keeps between answers must equal views built afresh throughout.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { admit, explainWorker, leasesOn, taskView, workerView } from "../../src/admission/index.ts";
import { ByteWriter, ReplyBufferPool, writeJson } from "../../src/api/large-reply.ts";
import { affinityFor, sourceCacheKey } from "../../src/scheduler/affinity.ts";
import { AdmittedEntries } from "../../src/scheduler/admission-entry.ts";
import { JsonText } from "../../src/protocol/json-text.ts";
import type { Scheduler } from "../../src/scheduler/scheduler.ts";
import { blockingLeases } from "../../src/scheduler/why.ts";
import { get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Json = Record<string, any>;

let h: TestHub;
beforeEach(async () => {
  h = await startHub();
});
afterEach(async () => {
  await h?.close();
});

const scheduler = (): Scheduler => h.hub.scheduler;

/** Each worker's entry built the plain way: the admission object of admit(), spread, then the rest. */
function plainEntries(taskId: string): string[] {
  const ctx = scheduler().ctx;
  const task = ctx.task(taskId)!;
  const tv = taskView(task);
  const queued = (task.status?.state ?? "queued") === "queued";
  const key = sourceCacheKey(task.spec.payload);
  return ctx.cache.list("Worker").map((w) => {
    const view = ctx.workerView(w);
    const d = admit(tv, view);
    const b = queued ? blockingLeases(ctx, tv, view, d) : undefined;
    return JSON.stringify({
      worker_id: w.metadata.name,
      ...d.admission,
      reason: d.admission.reason,
      reasons: d.reasons,
      explanation: explainWorker(d),
      cache_affinity: affinityFor(key, ctx.liveness.get(w.metadata.name)),
      ...(b ? { blocking_leases: b.leases, ...(b.until ? { blocking_until: b.until } : {}) } : {}),
    });
  });
}

/** The views the scheduler keeps (SchedulerContext.workerView) equal views built afresh. */
function expectViewsFresh(): void {
  const ctx = scheduler().ctx;
  const tasks = ctx.cache.list("Task");
  for (const w of ctx.cache.list("Worker")) {
    const name = w.metadata.name;
    const fresh = workerView(w, leasesOn(name, tasks), {
      ready: ctx.liveness.ready(name, ctx.now()),
      reported_active: ctx.liveness.get(name)?.reportedActive ?? 0,
    });
    expect(ctx.workerView(w)).toEqual(fresh);
  }
}

/** The entries as the reply carries them, and the whole answer as the HTTP reply writes it. */
function expectEntriesMatch(taskId: string): void {
  expectViewsFresh();
  const reply = scheduler().taskAdmissionReply(taskId);
  expect(reply.workers.map((e) => e.json)).toEqual(plainEntries(taskId));
  const w = new ByteWriter(new ReplyBufferPool());
  writeJson(w, reply, 0);
  expect(w.buf.subarray(0, w.length).toString("utf8")).toBe(JSON.stringify(reply));
}

async function ok(path: string, body: Json): Promise<Json> {
  const r = await post(h.url, path, body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}

const task = (task_id: string, resources: Json, extra: Json = {}) => ({
  task_id,
  required_capability: "",
  payload: { runner: "noop" },
  execution_profile: { placement: "shared", resources },
  ...extra,
});

describe("task-admission entries", () => {
  it("equal the plain JSON of each worker's decision while leases, heartbeats and capacity change", async () => {
    const small = { cpu_millis: 1000, memory_mb: 2048, disk_mb: 1000 };
    await ok(
      "/api/workers/register",
      registerBody("small", { max_concurrency: 1, initial_concurrency: 1, resource_capacity: small }),
    );
    await ok(
      "/api/workers/register",
      registerBody("large", { max_concurrency: 4, resource_capacity: { cpu_millis: 8000, memory_mb: 8192 } }),
    );
    await ok(
      "/api/workers/register",
      registerBody("gpu", { resource_capacity: { cpu_millis: 4000, gpu_count: 2, gpu_types: ["a100"] } }),
    );
    await ok("/api/workers/register", registerBody("cordoned"));
    await ok("/api/admin/block-worker", { worker_id: "cordoned" });
    await ok("/api/tasks/dispatch", {
      schema_version: 1,
      operator: "test",
      tasks: [
        task("hold", { cpu_millis: 500, memory_mb: 1000 }),
        task("hold-twin", { cpu_millis: 500, memory_mb: 1000 }),
        task("exclusive", {}, { execution_profile: { placement: "exclusive", resources: { memory_mb: 4000 } } }),
        task("gpu-task", { gpu_count: 1, gpu_types: ["a100"] }),
        task("too-big", { cpu_millis: 64_000 }),
        task(
          "pinned",
          { cpu_millis: 100 },
          {
            payload: { runner: "noop", source: { url: "https://git.example/lab/repo.git", commit: "b".repeat(40) } },
          },
        ),
      ],
    });
    const ids = ["hold", "hold-twin", "exclusive", "gpu-task", "too-big", "pinned"];
    const all = () => ids.forEach(expectEntriesMatch);

    all();
    // Twice: the second answer reuses every worker's part.
    all();

    // A lease on small: its reservation, active tasks and concurrency change.
    const claimed = await ok("/api/tasks/claim", { worker_id: "small", limit: 1, lease_seconds: 60 });
    expect(claimed.tasks.map((t: Json) => t.task_id)).toEqual(["hold"]);
    all();
    // small is full now: the twin's entry for it no longer admits, while large's entry is
    // the one kept from before, the same object from one answer to the next.
    const twin = () => scheduler().taskAdmissionReply("hold-twin").workers;
    const [first, again] = [twin(), twin()];
    const at = (name: string) => first.findIndex((e) => JSON.parse(e.json).worker_id === name);
    expect(JSON.parse(first[at("small")].json).ok).toBe(false);
    expect(JSON.parse(first[at("large")].json).ok).toBe(true);
    expect(again[at("large")]).toBe(first[at("large")]);

    // A heartbeat that reports two runs on large. Liveness changes at once; the Worker's
    // status is written after (a microtask queues it), so an answer in between must take the
    // reported runs from liveness, not from the part kept for the Worker object.
    const stored = scheduler().ctx.worker("large");
    scheduler().ctx.liveness.heartbeat("large", Date.now(), [{ task_id: "elsewhere-1" }, { task_id: "elsewhere-2" }]);
    expect(scheduler().ctx.worker("large")).toBe(stored);
    const large = scheduler()
      .taskAdmissionReply("pinned")
      .workers.map((e) => JSON.parse(e.json))
      .find((e) => e.worker_id === "large");
    expect(large.concurrency.reported_active).toBe(2);
    all();
    // The same over the API, and back to none.
    await ok("/api/workers/heartbeat", { worker_id: "large", current_runs: [{ task_id: "elsewhere-1" }] });
    all();
    await ok("/api/workers/heartbeat", { worker_id: "large", current_runs: [] });
    all();

    // The lease ends: small is empty again.
    await ok("/api/tasks/start", { worker_id: "small", task_id: "hold" });
    await ok("/api/tasks/complete", { worker_id: "small", task_id: "hold", result: {}, upload: {} });
    all();

    // large registers again with another capacity: a new Worker object.
    await ok(
      "/api/workers/register",
      registerBody("large", { max_concurrency: 4, resource_capacity: { cpu_millis: 2000, memory_mb: 1024 } }),
    );
    all();
    const over = (await get(h.url, "/api/data/task-admission?task_id=exclusive")).body.workers.find(
      (w: Json) => w.worker_id === "large",
    );
    expect(over.capacity).toMatchObject({ cpu_millis: 2000, memory_mb: 1024 });
    expect(over.shortfalls.memory_mb).toMatchObject({ capacity: 1024, requested: 4000 });
  });
});

describe("admitting entries kept between answers", () => {
  const entry = (chars: number) => new JsonText(`"${"x".repeat(chars - 2)}"`);

  it("drop the task asked about least recently once the text passes the budget", () => {
    const kept = new AdmittedEntries(250);
    const [w1, w2] = [{}, {}];
    const a = kept.forTask("a");
    kept.add(a, "aff", w1, entry(100));
    const b = kept.forTask("b");
    kept.add(b, "aff", w1, entry(100));
    expect(kept.size).toBe(200);
    // Asking about a again makes b the oldest: b goes when c passes the budget.
    expect(kept.forTask("a").byAffinity.get("aff")?.get(w1)?.json.length).toBe(100);
    const c = kept.forTask("c");
    kept.add(c, "aff", w2, entry(100));
    expect(kept.size).toBe(200);
    expect(kept.forTask("b").byAffinity.size).toBe(0);
    expect(kept.forTask("a").byAffinity.get("aff")?.get(w1)).toBeDefined();
  });

  it("start a task over when it alone passes the budget", () => {
    const kept = new AdmittedEntries(150);
    const a = kept.forTask("a");
    kept.add(a, "aff", {}, entry(100));
    kept.add(a, "aff", {}, entry(100));
    expect(kept.size).toBe(0);
    expect(a.byAffinity.size).toBe(0);
  });
});
