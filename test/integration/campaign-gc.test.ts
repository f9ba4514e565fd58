// Deleting a Campaign as Kubernetes' garbage collector deletes an owner: its tasks go after it
// (background, the default) or before it (foreground), or stay with their ownerReferences
// removed (orphan); a task holding a lease has it cancelled and its reservation released.
// `loom delete campaign` says how many tasks went with it.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { EventObject } from "../../src/reconciler/events.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const ROOT = join(import.meta.dirname, "..", "..");
const loom = (...args: string[]) =>
  new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      process.execPath,
      ["bin/loom.mjs", ...args, "--controller", h!.url],
      { cwd: ROOT, timeout: 30_000 },
      (e, stdout, stderr) => resolve({ code: e ? Number(e.code ?? 1) : 0, stdout, stderr }),
    ),
  );

const del = (name: string, body?: unknown) =>
  fetch(`${h!.url}${API_PREFIX}/campaigns/${name}`, {
    method: "DELETE",
    ...(body ? { headers: { "content-type": "application/json" }, body: JSON.stringify(body) } : {}),
  });
const task = (name: string) => h!.hub.cache.get("Task", name);
const names = ["a", "b", "c", "d"].map((c) => `demo__${c}__base__run-1`);
const [A, B, C] = names;

/** Campaign demo with four tasks: A leased, B running, C returned (it ran), D queued. */
async function setUp(): Promise<void> {
  h = await startHub({ heartbeatGraceSeconds: 3600 });
  await post(h.url, "/api/workers/register", registerBody("w1"));
  const created = await post(h.url, `${API_PREFIX}/campaigns`, {
    metadata: { name: "demo" },
    spec: {
      schema_version: 1,
      campaign_id: "demo",
      defaults: {
        setting_id: "base",
        runner: "shell",
        command: "true",
        execution_profile: { resources: { cpu_millis: 500, memory_mb: 256 } },
      },
      cases: ["a", "b", "c", "d"].map((c, i) => ({ case_id: c, run_id: "1", priority: 10 - i })),
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await eventually(() => names.every(task), "four tasks");
  const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 3 });
  expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual([A, B, C]);
  expect((await post(h.url, "/api/tasks/start", { worker_id: "w1", task_id: B })).status).toBe(200);
  expect((await post(h.url, "/api/tasks/complete", { worker_id: "w1", task_id: C })).status).toBe(200);
  expect(names.map((n) => task(n)?.status?.state)).toEqual(["leased", "running", "returned", "queued"]);
}

const reserved = async () => (await get(h!.url, "/api/data/worker-capacity")).body.workers[0].reserved.cpu_millis;

describe("deleting a campaign", () => {
  it("background (the default): the campaign goes at once, then every task it owned; leases are cancelled and reservations released", async () => {
    await setUp();
    expect(await reserved()).toBe(1000);
    const r = await del("demo");
    expect(r.status).toBe(200);
    expect((await get(h!.url, `${API_PREFIX}/campaigns/demo`)).status).toBe(404);
    await eventually(() => names.every((n) => !task(n)), "every owned task deleted");
    expect(await reserved()).toBe(0);
    // The Runner holding B is fenced off.
    const renew = await post(h!.url, "/api/tasks/renew", { worker_id: "w1", task_id: B });
    expect(renew.status).toBeGreaterThanOrEqual(400);
    await h!.hub.events.flush();
    const evs = (await get(h!.url, `${API_PREFIX}/events?fieldSelector=involvedObject.kind=Task`)).body
      .items as EventObject[];
    expect(
      evs
        .filter((e) => e.reason === "OwnerDeleted")
        .map((e) => e.involvedObject.name)
        .sort(),
    ).toEqual([A, B]);
  });

  it("orphan: the tasks stay, with no ownerReferences, their leases untouched", async () => {
    await setUp();
    const r = await del("demo", { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: "Orphan" });
    expect(r.status).toBe(200);
    await eventually(async () => (await get(h!.url, `${API_PREFIX}/campaigns/demo`)).status === 404, "campaign gone");
    expect(names.map((n) => task(n)?.status?.state)).toEqual(["leased", "running", "returned", "queued"]);
    for (const n of names) expect(task(n)?.metadata.ownerReferences).toBeUndefined();
    expect(await reserved()).toBe(1000);
  });

  it("foreground: the campaign is marked for deletion, its tasks go first, then it does", async () => {
    await setUp();
    const r = await del("demo", { propagationPolicy: "Foreground" });
    expect(r.status).toBe(200);
    const marked = (await r.json()) as { metadata: { deletionTimestamp?: string; finalizers?: string[] } };
    expect(marked.metadata.deletionTimestamp).toBeTruthy();
    expect(marked.metadata.finalizers).toEqual(["foregroundDeletion"]);
    await eventually(async () => (await get(h!.url, `${API_PREFIX}/campaigns/demo`)).status === 404, "campaign gone");
    expect(names.filter(task)).toEqual([]);
    expect(await reserved()).toBe(0);
  });

  it("a campaign held by another finalizer stays marked for deletion: no write can clear its deletionTimestamp; it goes once the finalizer is removed", async () => {
    await setUp();
    const path = `${API_PREFIX}/campaigns/demo`;
    const patch = (body: unknown) =>
      fetch(h!.url + path, {
        method: "PATCH",
        headers: { "content-type": "application/merge-patch+json" },
        body: JSON.stringify(body),
      });
    expect((await patch({ metadata: { finalizers: ["example.com/hold"] } })).status).toBe(200);
    expect((await del("demo", { propagationPolicy: "Foreground" })).status).toBe(200);
    await eventually(() => names.every((n) => !task(n)), "the tasks deleted first");
    const held = await eventually(async () => {
      const c = (await get(h!.url, path)).body;
      return c.metadata.finalizers?.length === 1 && c;
    }, "foregroundDeletion removed");
    expect(held.metadata.finalizers).toEqual(["example.com/hold"]);
    const r = await patch({ metadata: { deletionTimestamp: null, labels: { kept: "yes" } } });
    expect(r.status).toBe(200);
    const after = (await r.json()) as { metadata: { deletionTimestamp?: string; labels?: Record<string, string> } };
    expect(after.metadata.deletionTimestamp).toBe(held.metadata.deletionTimestamp);
    expect(after.metadata.labels).toMatchObject({ kept: "yes" });
    expect(names.filter(task)).toEqual([]); // and it made no new tasks
    expect((await patch({ metadata: { finalizers: [] } })).status).toBe(200);
    await eventually(async () => (await get(h!.url, path)).status === 404, "campaign gone");
  });

  it("refuses a propagationPolicy it does not know, deleting nothing", async () => {
    await setUp();
    const r = await del("demo", { propagationPolicy: "Sideways" });
    expect(r.status).toBe(400);
    expect(((await r.json()) as { details: { causes: { field: string }[] } }).details.causes[0].field).toBe(
      "propagationPolicy",
    );
    expect((await get(h!.url, `${API_PREFIX}/campaigns/demo`)).status).toBe(200);
    expect(names.every(task)).toBe(true);
  });

  it("loom delete campaign says how many tasks went with it, or were kept with --cascade=orphan", async () => {
    await setUp();
    const r = await loom("delete", "campaign", "demo");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("campaign/demo deleted (4 task(s) deleted with it)\n");
    expect(names.filter(task)).toEqual([]);
    await h!.close();
    await setUp();
    const o = await loom("delete", "campaign", "demo", "--cascade=orphan");
    expect(o.code, o.stderr).toBe(0);
    expect(o.stdout).toBe("campaign/demo deleted (4 task(s) kept, no longer owned by it)\n");
    expect(names.every(task)).toBe(true);
  });
});
