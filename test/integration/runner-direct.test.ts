import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { HubClient } from "../../src/runner/client.ts";
import { DirectServer, type DirectOptions } from "../../src/runner/direct.ts";
import { HubPeer, until } from "./runner-hub-peer.ts";

const TOKEN = "runner-test-token-0123456789";
const WORKER = "w-direct";
let tmp: string;
let peer: HubPeer;
let server: DirectServer;
let base: string;
let logs: string[];

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-direct-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function options(extra: Partial<DirectOptions> = {}): DirectOptions {
  return {
    client: new HubClient({ baseUrl: peer.url, token: "hub-token" }),
    workerId: WORKER,
    workDir: path.join(tmp, "work"),
    capabilities: ["linux", "*"],
    maxConcurrency: 1,
    initialConcurrency: 1,
    concurrencyPolicy: "fixed",
    leaseSeconds: 60,
    scrubEnv: [],
    log: (l) => logs.push(l),
    claimWaitSeconds: 0,
    pollSeconds: 1,
    once: false,
    maxTasks: 0,
    graceSeconds: 5,
    host: "127.0.0.1",
    port: 0,
    runnerToken: TOKEN,
    retryDelaysMs: [50],
    killGraceMs: 200,
    ...extra,
  };
}

beforeEach(async () => {
  logs = [];
  peer = new HubPeer({ token: "hub-token" });
  await peer.start();
  server = new DirectServer(options());
  base = await server.start();
});
afterEach(async () => {
  await server.close(0);
  await peer.stop();
});

const auth = { Authorization: `Bearer ${TOKEN}` };
async function call(method: string, p: string, body?: unknown, headers: Record<string, string> = auth) {
  const res = await fetch(base + p, {
    method,
    headers: { ...headers, ...(body !== undefined ? { "Content-Type": "application/json" } : {}) },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any>, headers: res.headers };
}

/** A task as the Hub's push-task sends it: claim-shaped, plus dispatch_mode and controller_push. */
const pushed = (taskId: string, payload: Record<string, unknown> = { runner: "noop" }, assigned = WORKER) => ({
  task: {
    task_id: taskId,
    task_kind: "run",
    attempt_no: 1,
    assigned_worker_id: assigned,
    package_id: `pkg-${taskId}`,
    lease_until: new Date(Date.now() + 600_000).toISOString(),
    payload,
    controller_concurrency: { desired_concurrency: 1, max_concurrency: 1, resource_admission: { ok: true }, dispatch_mode: "direct-push" },
    controller_push: { push_id: `push-${taskId}`, leased_at: new Date().toISOString() },
  },
});

describe("Runner token", () => {
  it("is required on every path when set, compared as a whole", async () => {
    expect(await call("GET", "/api/healthz", undefined, {})).toMatchObject({ status: 401, body: { error: "unauthorized" } });
    expect((await call("GET", "/api/healthz", undefined, { Authorization: `Bearer ${TOKEN}x` })).status).toBe(401);
    expect((await call("GET", "/api/healthz", undefined, { Authorization: "Bearer r" })).status).toBe(401);
    expect((await call("GET", "/api/meta", undefined, { Authorization: `Basic ${TOKEN}` })).status).toBe(401);
    expect((await call("POST", "/api/tasks/execute", pushed("t-unauth"), {})).status).toBe(401);
    expect((await call("GET", "/api/nothing-here", undefined, {})).status).toBe(401);
    expect(peer.callsTo("/api/tasks/start")).toHaveLength(0);
  });

  it("is accepted as Bearer (any case) or X-Loom-Token", async () => {
    const h = await call("GET", "/api/healthz", undefined, { Authorization: `bearer ${TOKEN}` });
    expect(h.status).toBe(200);
    expect(h.headers.get("cache-control")).toBe("no-store");
    expect(h.body).toMatchObject({ ok: true, worker_id: WORKER, running: false, active_pushes: [], runner_api_version: 1 });
    expect(h.body).toHaveProperty("last_result");
    expect((await call("GET", "/api/meta", undefined, { "X-Loom-Token": TOKEN })).body).toMatchObject({ service: "runner", auth_required: true, worker_id: WORKER });
  });

  it("a non-loopback bind without a token is refused", () => {
    expect(() => new DirectServer(options({ host: "0.0.0.0", runnerToken: undefined }))).toThrow(/without a Runner token/);
  });

  it("without a token set, the API is open", async () => {
    const open = new DirectServer(options({ runnerToken: undefined }));
    const url = await open.start();
    try {
      expect((await fetch(url + "/api/healthz")).status).toBe(200);
    } finally {
      await open.close(0);
    }
  });
});

describe("POST /api/tasks/execute", () => {
  it("registered with the Hub on start", async () => {
    await until(() => peer.callsTo("/api/workers/register").length > 0, 5000, "register");
    const reg = peer.callsTo("/api/workers/register")[0]!;
    expect(reg.authorization).toBe("Bearer hub-token");
    expect(reg.body).toMatchObject({ worker_id: WORKER, runner_api_version: 1, max_concurrency: 1, initial_concurrency: 1, concurrency_policy: "fixed", capabilities: ["linux", "*"] });
    expect(Object.keys(reg.body.resource_capacity as object).sort()).toEqual(["cpu_millis", "disk_mb", "gpu_count", "gpu_types", "memory_mb"]);
  });

  it("POST /api/register registers again, and reports a Hub refusal as 502", async () => {
    expect(await call("POST", "/api/register")).toMatchObject({ status: 200, body: { ok: true, register: { ok: true, worker_id: WORKER } } });
    peer.opts.override = (p) => (p === "/api/workers/register" ? { status: 400, body: { error: "invalid_resource_capacity" } } : undefined);
    expect(await call("POST", "/api/register")).toMatchObject({ status: 502, body: { error: "hub_register_failed", hub_status: 400 } });
  });

  it("rejects a task assigned to another worker with 409 assigned_worker_mismatch", async () => {
    const r = await call("POST", "/api/tasks/execute", pushed("t-other", { runner: "noop" }, "someone-else"));
    expect(r).toMatchObject({ status: 409, body: { error: "assigned_worker_mismatch", worker_id: WORKER, task_id: "t-other" } });
    expect(peer.callsTo("/api/tasks/start")).toHaveLength(0);
  });

  it("rejects a body without a task with 400", async () => {
    expect(await call("POST", "/api/tasks/execute", {})).toMatchObject({ status: 400, body: { error: "task_object_required" } });
    expect(await call("POST", "/api/tasks/execute", "{oops")).toMatchObject({ status: 400 });
  });

  it("accepts (202), reports already_running for the same task, 429 past max, then runs start → upload → complete → heartbeat", async () => {
    const slow = pushed("t-slow", { runner: "shell", command: "sleep 1; echo done" });
    const a = await call("POST", "/api/tasks/execute", slow);
    expect(a).toMatchObject({ status: 202, body: { ok: true, state: "accepted", task_id: "t-slow", worker_id: WORKER } });
    expect(await call("POST", "/api/tasks/execute", slow)).toMatchObject({ status: 202, body: { state: "already_running", task_id: "t-slow" } });
    const full = await call("POST", "/api/tasks/execute", pushed("t-second"));
    expect(full).toMatchObject({ status: 429, body: { error: "worker_capacity_reached", active_pushes: ["t-slow"], max_concurrency: 1 } });
    expect((await call("GET", "/api/healthz")).body.active_pushes).toEqual(["t-slow"]);

    await until(() => server.activePushes.length === 0, 10_000, "push to finish");
    await until(() => peer.callsTo("/api/workers/heartbeat").length > 0, 5000, "completion heartbeat");
    const forTask = peer.calls.filter((c) => c.body.task_id === "t-slow" || c.headers["x-task-id"] === "t-slow").map((c) => c.path);
    expect(forTask).toEqual(["/api/tasks/start", "/api/results/upload", "/api/tasks/complete"]);
    const upload = peer.callsTo("/api/results/upload")[0]!;
    expect(upload.headers["content-type"]).toBe("application/zip");
    expect(upload.headers["x-worker-id"]).toBe(WORKER);
    const wr = JSON.parse(peer.uploads.get("t-slow")!.zip.get("worker-result.json")!.toString());
    expect(wr).toMatchObject({ exit_code: 0, verdict: "clean", controller_concurrency: { dispatch_mode: "direct-push" } });
    expect(peer.uploads.get("t-slow")!.zip.get("stdout.txt")!.toString()).toBe("done\n");

    const hb = peer.callsTo("/api/workers/heartbeat").at(-1)!;
    expect(hb.body).toMatchObject({ worker_id: WORKER, current_runs: [], health: { phase: "completed" } });
    expect(hb.at).toBeGreaterThanOrEqual(peer.callsTo("/api/tasks/complete")[0]!.at);
    expect((await call("GET", "/api/healthz")).body.last_result).toMatchObject({ task_id: "t-slow", ok: true, state: "completed", verdict: "clean" });

    // the slot is free again
    expect((await call("POST", "/api/tasks/execute", pushed("t-second"))).status).toBe(202);
    await until(() => server.activePushes.length === 0, 10_000, "second push");
  });

  it("reports a failed upload with /api/tasks/fail", async () => {
    peer.opts.override = (p) => (p === "/api/results/upload" ? { status: 500, body: { error: "DiskFull", detail: "no space left on device" } } : undefined);
    expect((await call("POST", "/api/tasks/execute", pushed("t-upfail"))).status).toBe(202);
    await until(() => peer.callsTo("/api/tasks/fail").length === 1, 10_000, "fail call");
    const fail = peer.callsTo("/api/tasks/fail")[0]!.body;
    expect(fail).toMatchObject({ worker_id: WORKER, task_id: "t-upfail", controller_concurrency: { dispatch_mode: "direct-push" }, error: { type: "HubError" } });
    expect(String((fail.error as { detail: string }).detail)).toContain("no space left on device");
    expect(peer.callsTo("/api/tasks/complete")).toHaveLength(0);
  });
});

describe("pull loop and pushes exclude each other", () => {
  it("409 pull_loop_active while the loop runs; 409 push_tasks_active while a push runs", async () => {
    // An empty POST body means {} (v1 Runners and Hubs send Content-Length: 0).
    const started = await fetch(base + "/api/run-loop", { method: "POST", headers: { ...auth, "Content-Type": "application/json" } });
    expect(started.status).toBe(202);
    expect(await started.json()).toMatchObject({ ok: true, state: "started", worker_id: WORKER });
    expect((await call("POST", "/api/run-loop", {})).body).toMatchObject({ state: "already_running" });
    expect((await call("GET", "/api/healthz")).body.running).toBe(true);
    expect(await call("POST", "/api/tasks/execute", pushed("t-during-loop"))).toMatchObject({ status: 409, body: { error: "pull_loop_active" } });
    await until(() => peer.callsTo("/api/tasks/claim").length > 0, 5000, "loop to claim");
    await server.close(0);

    server = new DirectServer(options());
    base = await server.start();
    expect((await call("POST", "/api/tasks/execute", pushed("t-long", { runner: "shell", command: "sleep 1" }))).status).toBe(202);
    expect(await call("POST", "/api/run-loop", { once: true })).toMatchObject({ status: 409, body: { error: "push_tasks_active", active_pushes: ["t-long"] } });
    await until(() => server.activePushes.length === 0, 10_000, "push to finish");
  });

  it("run-loop with once: runs the queued tasks, then stops by itself", async () => {
    peer.queue.push({ task_id: "q1" }, { task_id: "q2" });
    expect((await call("POST", "/api/run-loop", { once: true })).status).toBe(202);
    await until(() => !server.loopRunning, 15_000, "loop to end");
    expect(peer.callsTo("/api/tasks/complete").map((c) => c.body.task_id)).toEqual(["q1", "q2"]);
    expect((await call("GET", "/api/healthz")).body).toMatchObject({ running: false, last_result: { ok: true, completed: 2 } });
  });
});
