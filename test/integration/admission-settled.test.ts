// Admission conditions agree with the task's state: a lease or a final state leaves no
// Unsatisfiable=True and no Admitted=False behind, whichever path wrote it; and a task that
// cannot be admitted is announced once per primary reason, not once per message.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { EventObject } from "../../src/reconciler/events.ts";
import type { Condition } from "../../src/resources/types.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub | undefined;
let dir: string | undefined;
afterEach(async () => {
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
  h = dir = undefined;
});

const cond = (name: string, type: string) =>
  h!.hub.cache.get("Task", name)?.status?.conditions?.find((c) => c.type === type);
const mergePatch = (path: string, body: unknown) =>
  fetch(h!.url + API_PREFIX + path, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify(body),
  });
const small = { cpu_millis: 1000, memory_mb: 2048, disk_mb: 10_000, gpu_count: 0 };

describe("a lease answers the admission question", () => {
  it("an oversized task leased once a worker grows, then finished, carries no Unsatisfiable=True", async () => {
    h = await startHub({ heartbeatGraceSeconds: 3600, conditions: { minIntervalMs: 10 } });
    await post(h.url, "/api/workers/register", registerBody("w1", { resource_capacity: small }));
    await post(h.url, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [{ task_id: "big", payload: { runner: "noop" }, execution_profile: { resources: { cpu_millis: 4000 } } }],
    });
    await eventually(() => cond("big", "Unsatisfiable")?.status === "True", "big unsatisfiable");
    expect(
      (await mergePatch("/workers/w1", { spec: { resource_capacity: { ...small, cpu_millis: 8000 } } })).status,
    ).toBe(200);
    // Claimed at once, before the conditions controller has looked again.
    const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["big"]);
    expect(cond("big", "Unsatisfiable")).toMatchObject({ status: "False", reason: "Admitted" });
    expect(cond("big", "Admitted")).toMatchObject({ status: "True", message: "admitted on w1" });
    await post(h.url, "/api/tasks/complete", { worker_id: "w1", task_id: "big" });
    expect(h.hub.cache.get("Task", "big")?.status?.state).toBe("returned");
    expect(cond("big", "Unsatisfiable")).toBeUndefined();
    expect(cond("big", "Admitted")).toMatchObject({ status: "True" });
  });

  it("a task cancelled while it cannot be admitted keeps no admission condition", async () => {
    h = await startHub({ heartbeatGraceSeconds: 3600, conditions: { minIntervalMs: 10 } });
    await post(h.url, "/api/workers/register", registerBody("w1", { resource_capacity: small }));
    await post(h.url, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [{ task_id: "big", payload: { runner: "noop" }, execution_profile: { resources: { cpu_millis: 4000 } } }],
    });
    await eventually(() => cond("big", "Unsatisfiable")?.status === "True", "big unsatisfiable");
    await post(h.url, "/api/admin/cancel-task", { task_id: "big" });
    expect(cond("big", "Unsatisfiable")).toBeUndefined();
    expect(cond("big", "Admitted")).toBeUndefined();
    expect(cond("big", "Failed")).toMatchObject({ status: "True", reason: "Cancelled" });
  });

  it("a lease written through the status subresource settles the conditions it was given", async () => {
    h = await startHub({ heartbeatGraceSeconds: 3600 });
    await post(h.url, "/api/workers/register", registerBody("w1"));
    await post(h.url, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [{ task_id: "t", payload: { runner: "noop" } }],
    });
    const now = new Date().toISOString();
    const lease = {
      worker: "w1",
      epoch: 1,
      mode: "pull",
      leased_at: now,
      lease_until: new Date(Date.now() + 600_000).toISOString(),
      placement: "shared",
      reservation: { cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
    };
    const r = await mergePatch("/tasks/t/status", {
      status: {
        state: "leased",
        lease,
        conditions: [
          {
            type: "Unsatisfiable",
            status: "True",
            reason: "exceeds_worker_capacity",
            message: "by hand",
            lastTransitionTime: now,
          },
          {
            type: "Admitted",
            status: "False",
            reason: "worker_not_ready",
            message: "by hand",
            lastTransitionTime: now,
          },
        ],
      },
    });
    expect(r.status).toBe(200);
    const conds = ((await r.json()) as { status: { conditions: Condition[] } }).status.conditions;
    expect(conds.find((c) => c.type === "Unsatisfiable")).toMatchObject({ status: "False", reason: "Admitted" });
    expect(conds.find((c) => c.type === "Admitted")).toMatchObject({
      status: "True",
      reason: "Admitted",
      message: "admitted on w1",
    });
  });

  it("the conditions controller repairs a contradiction stored before the Hub started", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-settled-"));
    const store = openSqliteStore(join(dir, "loom.db"));
    const t0 = "2026-01-01T00:00:00.000Z";
    await store.create({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Task",
      metadata: { name: "old" },
      spec: { payload: {} },
      status: {
        state: "clean",
        attempt: 1,
        conditions: [
          { type: "Admitted", status: "True", reason: "Admitted", message: "admitted on w1", lastTransitionTime: t0 },
          {
            type: "Unsatisfiable",
            status: "True",
            reason: "exceeds_worker_capacity",
            message: "no worker could ever admit this task, even empty",
            lastTransitionTime: t0,
          },
          { type: "Succeeded", status: "True", reason: "Clean", message: "clean", lastTransitionTime: t0 },
        ],
      },
    });
    await store.close();
    h = await startHub({ conditions: { minIntervalMs: 10 } }, dir);
    await eventually(() => cond("old", "Unsatisfiable") === undefined, "Unsatisfiable removed");
    expect(cond("old", "Admitted")).toMatchObject({ status: "True", lastTransitionTime: t0 });
    expect(cond("old", "Succeeded")).toMatchObject({ status: "True" });
  });
});

describe("NotAdmitted is recorded when the primary reason changes", () => {
  it("a message that moves (another worker cordoned and back) records no new Event", async () => {
    h = await startHub({ heartbeatGraceSeconds: 3600, conditions: { minIntervalMs: 10, refreshMs: 0 } });
    for (const w of ["w1", "w2"])
      await post(h.url, "/api/workers/register", registerBody(w, { resource_capacity: small }));
    await post(h.url, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [{ task_id: "big", payload: { runner: "noop" }, execution_profile: { resources: { cpu_millis: 4000 } } }],
    });
    await eventually(() => cond("big", "Admitted")?.reason === "exceeds_worker_capacity", "big not admitted");
    const notAdmitted = async () => {
      const r = await get(
        h!.url,
        `${API_PREFIX}/events?fieldSelector=involvedObject.kind=Task,involvedObject.name=big`,
      );
      return (r.body.items as EventObject[]).filter((e) => e.reason === "NotAdmitted").reduce((n, e) => n + e.count, 0);
    };
    await eventually(async () => (await notAdmitted()) === 1, "one NotAdmitted");
    for (const unschedulable of [true, false, true, false]) {
      const before = cond("big", "Admitted")!.message;
      expect((await mergePatch("/workers/w2", { spec: { unschedulable } })).status).toBe(200);
      // The message names the cordon (or stops naming it); the reason stays.
      await eventually(() => cond("big", "Admitted")!.message !== before, "message rewritten");
      expect(cond("big", "Admitted")!.reason).toBe("exceeds_worker_capacity");
    }
    await h.hub.events.flush();
    expect(await notAdmitted()).toBe(1);
  });
});
