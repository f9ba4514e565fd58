// The Admitted condition under churn: while leases come and go, a queued task's answer
// swings between "a worker has room now" and "waiting for a lease to end". Such a swing is
// written only once it has held for settleMs; a change of any other kind is written at once.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { AdmissionConditions } from "../../src/reconciler/admission-conditions.ts";
import { eventually, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const A = "loom.dev/v1alpha1";
let hub: TestHub | undefined;
let dir: string | undefined;
afterEach(async () => {
  await hub?.close().catch(() => {});
  if (dir) await rm(dir, { recursive: true, force: true });
  hub = dir = undefined;
});

/** One worker with one slot and queued tasks of one shape, claimed in the order named. */
async function start(settleMs: number, names = ["a", "b"]): Promise<TestHub> {
  dir = await mkdtemp(join(tmpdir(), "loom-settle-"));
  const store = openSqliteStore(join(dir, "loom.db"));
  await store.create({
    apiVersion: A,
    kind: "Worker",
    metadata: { name: "w1" },
    spec: {
      max_concurrency: 1,
      initial_concurrency: 1,
      capabilities: ["linux"],
      resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
    },
  });
  for (const [i, name] of names.entries())
    await store.create({
      apiVersion: A,
      kind: "Task",
      metadata: { name },
      spec: {
        required_capability: "linux",
        priority: names.length - i,
        execution_profile: { placement: "shared", resources: { memory_mb: 100 } },
        payload: {},
      },
      status: { state: "queued", attempt: 1 },
    });
  await store.close();
  hub = await startHub({ resyncMs: 200, conditions: { minIntervalMs: 20, settleMs } }, dir);
  await post(hub.url, "/api/workers/register", registerBody("w1", { max_concurrency: 1, initial_concurrency: 1 }));
  return hub;
}

const admitted = (h: TestHub, name: string) =>
  h.hub.cache.get("Task", name)?.status?.conditions?.find((c) => c.type === "Admitted");

/** Resolves once the task's Admitted condition says it waits for the worker's one slot. */
async function waitsOnTheLease(h: TestHub, name: string): Promise<void> {
  const c = await eventually(() => {
    const c = admitted(h, name);
    return c?.status === "False" && c;
  }, `${name} waiting`);
  expect(c.reason).toBe("worker_concurrency_reached");
}

describe("Admitted condition while leases come and go", () => {
  it("does not rewrite a queued task for a swing that has not held for settleMs", async () => {
    const h = await start(60_000);
    await eventually(() => admitted(h, "b")?.status === "True", "b admissible");
    const rv = h.hub.cache.get("Task", "b")!.metadata.resourceVersion;
    // The worker's only slot is taken: b now waits on a lease, a swing from admissible.
    const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["a"]);
    const passes = h.hub.controllers!.admission.passes;
    await eventually(() => h.hub.controllers!.admission.passes >= passes + 5, "five more passes");
    expect(admitted(h, "b")).toMatchObject({ status: "True", reason: "WorkerAvailable" });
    expect(h.hub.cache.get("Task", "b")!.metadata.resourceVersion).toBe(rv);
  });

  it("writes the swing once it has held for settleMs", async () => {
    const h = await start(300);
    await eventually(() => admitted(h, "b")?.status === "True", "b admissible");
    await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    await waitsOnTheLease(h, "b");
  });

  it("does not write 'waiting' while tasks of the shape keep being leased, however seldom a pass sees the room", async () => {
    const names = [...Array.from({ length: 12 }, (_, i) => `t${String(i).padStart(2, "0")}`), "last"];
    const h = await start(300, names);
    await eventually(() => admitted(h, "last")?.status === "True", "last admissible");
    const rv = h.hub.cache.get("Task", "last")!.metadata.resourceVersion;
    // The worker's slot is full but for the moment between a complete and the next claim:
    // passes see "waiting" pass after pass, yet the shape is admitted every 100 ms.
    const t0 = Date.now();
    for (const name of names.slice(0, 11)) {
      const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
      expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([name]);
      await new Promise((r) => setTimeout(r, 100));
      await post(h.url, "/api/tasks/start", { worker_id: "w1", task_id: name });
      await post(h.url, "/api/tasks/complete", { worker_id: "w1", task_id: name, result: {}, upload: {} });
    }
    expect(Date.now() - t0).toBeGreaterThan(3 * 300);
    expect(admitted(h, "last")).toMatchObject({ status: "True", reason: "WorkerAvailable" });
    expect(h.hub.cache.get("Task", "last")!.metadata.resourceVersion).toBe(rv);
    // The last grant: from here the wait holds, and is written once it has for settleMs.
    await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    await waitsOnTheLease(h, "last");
  });

  it("spaces its passes by their length: one asked for right after a pass waits, and writes nothing", async () => {
    const h = await start(300);
    await eventually(() => admitted(h, "b")?.status === "True", "b admissible");
    const conditions = h.hub.controllers!.admission.reconciler as AdmissionConditions;
    await conditions.reconcile();
    const ran = conditions.passesRun;
    const again = await conditions.reconcile();
    expect(conditions.passesRun).toBe(ran);
    expect(again).toMatchObject({ writes: 0 });
    expect(again?.requeueAfterMs).toBeGreaterThan(0);
  });
});
