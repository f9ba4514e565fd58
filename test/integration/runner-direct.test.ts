// The Direct Runner API against a real Hub on loopback: the Hub pushes through
// POST /api/admin/push-task, and the Runner reports back through the Runner API. Transparent
// recorders show what each side sent; every reply is the other side's own.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readZip } from "../../src/results/zip.ts";
import { HubClient } from "../../src/runner/client.ts";
import { DirectServer, type DirectOptions } from "../../src/runner/direct.ts";
import { eventually, get, post, startHub, type TestHub } from "../support/hub.ts";
import { Recorder } from "../support/recorder.ts";
import { runnerOptions } from "../support/runner.ts";

const TOKEN = "runner-test-token-0123456789";
const HUB_TOKEN = "hub-token-for-direct-tests";
const HUB_AUTH = { authorization: `Bearer ${HUB_TOKEN}` };
const WORKER = "w-direct";
let tmp: string;
let hub: TestHub;
/** Runner -> Hub traffic. */
let rec: Recorder;
let server: DirectServer;
let base: string;
let logs: string[];

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-direct-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function options(extra: Partial<DirectOptions> = {}): DirectOptions {
  return runnerOptions(
    new HubClient({ baseUrl: rec.url, token: HUB_TOKEN }),
    WORKER,
    path.join(tmp, "work"),
    (l) => logs.push(l),
    { runnerToken: TOKEN, ...extra },
  );
}

async function setup(hubOpts: Parameters<typeof startHub>[0] = {}): Promise<void> {
  // The Hub pushes with the Runner token from its own environment.
  hub = await startHub({ env: { LOOM_HUB_TOKEN: HUB_TOKEN, LOOM_RUNNER_TOKEN: TOKEN }, ...hubOpts });
  rec = new Recorder(hub.url);
  await rec.start();
  server = new DirectServer(options());
  base = await server.start();
}
async function teardown(): Promise<void> {
  await server?.close(0);
  await rec?.stop();
  await hub?.close();
}
beforeEach(async () => {
  logs = [];
  await setup();
});
afterEach(teardown);

const auth = { Authorization: `Bearer ${TOKEN}` };
async function call(method: string, p: string, body?: unknown, headers: Record<string, string> = auth, at = base) {
  const res = await fetch(at + p, {
    method,
    headers: { ...headers, ...(body !== undefined ? { "Content-Type": "application/json" } : {}) },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any>, headers: res.headers };
}

// Operator calls go straight to the Hub.
const api = (p: string, body?: unknown) =>
  body === undefined ? get(hub.url, p, HUB_AUTH) : post(hub.url, p, body, HUB_AUTH);

async function dispatch(tasks: Record<string, unknown>[]): Promise<void> {
  const r = await api("/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}
const row = async (id: string) => (await api(`/api/tasks?task_id=${id}`)).body.tasks[0];

/** The worker's Direct Runner endpoint, as an inventory would declare it. */
async function registerHost(workerUrl: string, maxConcurrency = 1): Promise<void> {
  const r = await api("/api/admin/register-worker-hosts", {
    operator: "test",
    hosts: [
      {
        worker_id: WORKER,
        initial_concurrency: maxConcurrency,
        max_concurrency: maxConcurrency,
        connection_mode: "direct-worker-api",
        worker_url: workerUrl,
      },
    ],
  });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
}
const registered = (n = 1) =>
  eventually(
    () => rec.callsTo("/api/workers/register").filter((c) => c.status === 200).length >= n,
    "the Runner to register",
  );
const push = (task_id: string) => api("/api/admin/push-task", { task_id, worker_id: WORKER, operator: "test" });

/** A task as push-task sends it, for calls made to the Runner directly. */
const pushed = (taskId: string, payload: Record<string, unknown> = { runner: "noop" }, assigned = WORKER) => ({
  task: {
    task_id: taskId,
    task_kind: "execution",
    attempt_no: 1,
    assigned_worker_id: assigned,
    package_id: `pkg-${taskId}`,
    lease_until: new Date(Date.now() + 600_000).toISOString(),
    payload,
    controller_concurrency: {
      desired_concurrency: 1,
      max_concurrency: 1,
      resource_admission: { ok: true },
      dispatch_mode: "direct-push",
    },
    controller_push: { push_id: `push-${taskId}`, leased_at: new Date().toISOString() },
  },
});

let gateNo = 0;
const newGate = () => path.join(tmp, `gate-${process.pid}-${++gateNo}`);
const gated = (file: string, then: string) => ({
  runner: "shell",
  command: `while [ ! -e '${file}' ]; do sleep 0.05; done; ${then}`,
});

describe("Runner token", () => {
  it("is required on every path when set, compared as a whole", async () => {
    expect(await call("GET", "/api/healthz", undefined, {})).toMatchObject({
      status: 401,
      body: { error: "unauthorized" },
    });
    expect((await call("GET", "/api/healthz", undefined, { Authorization: `Bearer ${TOKEN}x` })).status).toBe(401);
    expect((await call("GET", "/api/healthz", undefined, { Authorization: "Bearer r" })).status).toBe(401);
    expect((await call("GET", "/api/meta", undefined, { Authorization: `Basic ${TOKEN}` })).status).toBe(401);
    expect((await call("POST", "/api/tasks/execute", pushed("t-unauth"), {})).status).toBe(401);
    expect((await call("GET", "/api/nothing-here", undefined, {})).status).toBe(401);
    expect(rec.callsTo("/api/tasks/start")).toHaveLength(0);
  });

  it("is accepted as Bearer (any case) or X-Loom-Token", async () => {
    const h = await call("GET", "/api/healthz", undefined, { Authorization: `bearer ${TOKEN}` });
    expect(h.status).toBe(200);
    expect(h.headers.get("cache-control")).toBe("no-store");
    expect(h.body).toMatchObject({
      ok: true,
      worker_id: WORKER,
      running: false,
      active_pushes: [],
      runner_api_version: 1,
    });
    expect(h.body).toHaveProperty("last_result");
    expect((await call("GET", "/api/meta", undefined, { "X-Loom-Token": TOKEN })).body).toMatchObject({
      service: "runner",
      auth_required: true,
      worker_id: WORKER,
    });
  });

  it("a non-loopback bind without a token is refused", () => {
    expect(() => new DirectServer(options({ host: "0.0.0.0", runnerToken: undefined }))).toThrow(
      /without a Runner token/,
    );
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
    await registered();
    const reg = rec.callsTo("/api/workers/register")[0];
    expect(reg.headers.authorization).toBe(`Bearer ${HUB_TOKEN}`);
    expect(reg.body).toMatchObject({
      worker_id: WORKER,
      runner_api_version: 1,
      max_concurrency: 1,
      initial_concurrency: 1,
      concurrency_policy: "fixed",
      capabilities: ["linux", "*"],
    });
    expect(Object.keys(reg.body.resource_capacity as object).sort()).toEqual([
      "cpu_millis",
      "disk_mb",
      "gpu_count",
      "gpu_types",
      "memory_mb",
    ]);
    const cap = (await api("/api/data/worker-capacity")).body.workers.find(
      (w: { worker_id: string }) => w.worker_id === WORKER,
    );
    expect(cap).toMatchObject({ status: "ready", capacity: reg.body.resource_capacity, max_concurrency: 1 });
  });

  it("POST /api/register registers again, and reports a Hub refusal as 502", async () => {
    await registered();
    expect(await call("POST", "/api/register")).toMatchObject({
      status: 200,
      body: { ok: true, register: { ok: true, worker_id: WORKER } },
    });
    // A worker id the Hub will not accept: the Hub's 400 comes back as a 502 with its status.
    const refused = new DirectServer(options({ workerId: "-not-a-name", workDir: path.join(tmp, "refused") }));
    const url = await refused.start();
    try {
      expect(await call("POST", "/api/register", undefined, auth, url)).toMatchObject({
        status: 502,
        body: { error: "hub_register_failed", hub_status: 400 },
      });
      expect(rec.callsTo("/api/workers/register").find((c) => c.body.worker_id === "-not-a-name")!.reply).toMatchObject(
        { error: "invalid_worker_id" },
      );
    } finally {
      await refused.close(0);
    }
  });

  it("rejects a task assigned to another worker with 409 assigned_worker_mismatch", async () => {
    const r = await call("POST", "/api/tasks/execute", pushed("t-other", { runner: "noop" }, "someone-else"));
    expect(r).toMatchObject({
      status: 409,
      body: { error: "assigned_worker_mismatch", worker_id: WORKER, task_id: "t-other" },
    });
    expect(rec.callsTo("/api/tasks/start")).toHaveLength(0);
  });

  it("rejects a body without a task with 400", async () => {
    expect(await call("POST", "/api/tasks/execute", {})).toMatchObject({
      status: 400,
      body: { error: "task_object_required" },
    });
    expect(await call("POST", "/api/tasks/execute", "{oops")).toMatchObject({ status: 400 });
  });

  it("accepts a Hub push (202), says already_running for a repeat, refuses past its max, then runs start → upload → complete → heartbeat", async () => {
    // Runner-bound traffic goes through its own recorder. The inventory claims 2 slots while
    // the Runner itself has 1, so the Hub admits a second push that the Runner must refuse.
    const toRunner = new Recorder(base);
    await toRunner.start();
    try {
      await registerHost(toRunner.url, 2);
      const gate = newGate();
      await dispatch([
        {
          task_id: "t-slow",
          required_capability: "linux",
          payload: gated(gate, "echo done"),
          execution_profile: { resources: { cpu_millis: 500 } },
        },
        {
          task_id: "t-second",
          required_capability: "linux",
          payload: { runner: "noop" },
          execution_profile: { resources: { cpu_millis: 250 } },
        },
      ]);
      await registered();

      const a = await push("t-slow");
      expect(a).toMatchObject({
        status: 202,
        body: {
          ok: true,
          task_id: "t-slow",
          worker_id: WORKER,
          runner: { ok: true, state: "accepted", task_id: "t-slow", worker_id: WORKER },
          selection: { mode: "explicit" },
        },
      });
      const wire = toRunner.callsTo("/api/tasks/execute")[0];
      expect(wire.headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(wire.body.task).toMatchObject({
        task_id: "t-slow",
        assigned_worker_id: WORKER,
        attempt_no: 1,
        controller_concurrency: { dispatch_mode: "direct-push", resource_admission: { ok: true } },
      });
      expect(wire.body.task.controller_push.push_id).toEqual(expect.any(String));
      expect(wire.body.task.controller_concurrency).not.toHaveProperty("claim_batch_id");

      // the same task again, straight to the Runner
      expect(await call("POST", "/api/tasks/execute", wire.raw.toString())).toMatchObject({
        status: 202,
        body: { state: "already_running", task_id: "t-slow" },
      });

      // the Runner's own cap: its 429 is a definite refusal, so the Hub requeues and frees the reservation
      const full = await push("t-second");
      expect(full).toMatchObject({
        status: 429,
        body: {
          error: "worker_capacity_reached",
          state: "queued",
          runner_status: 429,
          runner: { error: "worker_capacity_reached", active_pushes: ["t-slow"], max_concurrency: 1 },
        },
      });
      expect(await row("t-second")).toMatchObject({ state: "queued", attempt_no: 1 });
      const capNow = (await api("/api/data/worker-capacity")).body.workers.find(
        (w: { worker_id: string }) => w.worker_id === WORKER,
      );
      expect(capNow).toMatchObject({ active_task_ids: ["t-slow"], reserved: { cpu_millis: 500 } });
      expect((await call("GET", "/api/healthz")).body.active_pushes).toEqual(["t-slow"]);

      writeFileSync(gate, "");
      await eventually(() => server.activePushes.length === 0, "push to finish", 15_000);
      const completeSeq = await eventually(() => rec.callsTo("/api/tasks/complete")[0]?.seq, "complete");
      const hb = await eventually(
        () => rec.callsTo("/api/workers/heartbeat").find((c) => c.seq > completeSeq),
        "completion heartbeat",
      );
      expect(hb.body).toMatchObject({ worker_id: WORKER, current_runs: [], health: { phase: "completed" } });
      expect(rec.forTask("t-slow").map((c) => [c.path, c.status])).toEqual([
        ["/api/tasks/start", 200],
        ["/api/results/upload", 201],
        ["/api/tasks/complete", 200],
      ]);
      const upload = rec.callsTo("/api/results/upload")[0];
      expect(upload.headers["content-type"]).toBe("application/zip");
      expect(upload.headers["x-worker-id"]).toBe(WORKER);

      const done = await row("t-slow");
      expect(done.state).toBe("clean");
      const zip = await readZip(
        Buffer.from(
          await (await fetch(`${hub.url}/api/results/${done.result_id}`, { headers: HUB_AUTH })).arrayBuffer(),
        ),
      );
      expect(JSON.parse(zip.get("worker-result.json")!.toString())).toMatchObject({
        exit_code: 0,
        verdict: "clean",
        controller_concurrency: { dispatch_mode: "direct-push" },
      });
      expect(zip.get("stdout.txt")!.toString()).toBe("done\n");
      expect((await call("GET", "/api/healthz")).body.last_result).toMatchObject({
        task_id: "t-slow",
        ok: true,
        state: "completed",
        verdict: "clean",
      });

      // the slot is free again
      expect((await push("t-second")).status).toBe(202);
      await eventually(async () => (await row("t-second")).state === "clean", "second push to finish", 15_000);
    } finally {
      await toRunner.stop();
    }
  });

  it("reports an upload the Hub refuses with /api/tasks/fail", async () => {
    await teardown();
    await setup({ uploadLimitBytes: 64 });
    await registerHost(base);
    await dispatch([{ task_id: "t-upfail", required_capability: "linux", payload: { runner: "noop" } }]);
    await registered();
    expect((await push("t-upfail")).status).toBe(202);
    // wait for the Hub's answer, not just the call
    await eventually(() => rec.callsTo("/api/tasks/fail")[0]?.status === 200, "fail call", 15_000);
    const fail = rec.callsTo("/api/tasks/fail")[0];
    expect(fail.body).toMatchObject({
      worker_id: WORKER,
      task_id: "t-upfail",
      controller_concurrency: { dispatch_mode: "direct-push" },
      error: { type: "HubError" },
    });
    expect(String(fail.body.error.detail)).toContain("body_too_large");
    expect(rec.callsTo("/api/tasks/complete")).toHaveLength(0);
    expect(await row("t-upfail")).toMatchObject({ state: "run_error", error: { type: "HubError" } });
  });
});

describe("pull loop and pushes exclude each other", () => {
  it("409 pull_loop_active while the loop runs; 409 push_tasks_active while a push runs", async () => {
    await registered();
    // An empty POST body means {} (v1 Runners and Hubs send Content-Length: 0).
    const started = await fetch(base + "/api/run-loop", {
      method: "POST",
      headers: { ...auth, "Content-Type": "application/json" },
    });
    expect(started.status).toBe(202);
    expect(await started.json()).toMatchObject({ ok: true, state: "started", worker_id: WORKER });
    expect((await call("POST", "/api/run-loop", {})).body).toMatchObject({ state: "already_running" });
    expect((await call("GET", "/api/healthz")).body.running).toBe(true);
    expect(await call("POST", "/api/tasks/execute", pushed("t-during-loop"))).toMatchObject({
      status: 409,
      body: { error: "pull_loop_active" },
    });
    await eventually(() => rec.callsTo("/api/tasks/claim").some((c) => c.status === 200), "loop to claim");
    await server.close(0);

    server = new DirectServer(options());
    base = await server.start();
    await registerHost(base);
    const gate = newGate();
    await dispatch([{ task_id: "t-long", required_capability: "linux", payload: gated(gate, "true") }]);
    await registered(2);
    expect((await push("t-long")).status).toBe(202);
    expect(await call("POST", "/api/run-loop", { once: true })).toMatchObject({
      status: 409,
      body: { error: "push_tasks_active", active_pushes: ["t-long"] },
    });
    writeFileSync(gate, "");
    await eventually(() => server.activePushes.length === 0, "push to finish", 15_000);
    await eventually(async () => (await row("t-long")).state === "clean", "t-long to be clean");
  });

  it("run-loop with once: runs the queued tasks, then stops by itself", async () => {
    await dispatch([
      { task_id: "q1", required_capability: "linux" },
      { task_id: "q2", required_capability: "linux" },
    ]);
    await registered();
    expect((await call("POST", "/api/run-loop", { once: true })).status).toBe(202);
    await eventually(() => !server.loopRunning, "loop to end", 15_000);
    expect(rec.callsTo("/api/tasks/complete").map((c) => c.body.task_id)).toEqual(["q1", "q2"]);
    expect((await call("GET", "/api/healthz")).body).toMatchObject({
      running: false,
      last_result: { ok: true, completed: 2 },
    });
    expect((await row("q1")).state).toBe("clean");
    expect((await row("q2")).state).toBe("clean");
  });
});

describe("push dispatcher", () => {
  it("delivers queued work to a push-mode Direct Runner by itself, through the same admission", async () => {
    const r = await api("/api/admin/register-worker-hosts", {
      operator: "test",
      hosts: [
        {
          worker_id: WORKER,
          initial_concurrency: 1,
          max_concurrency: 1,
          connection_mode: "direct-worker-api",
          worker_url: base,
          direct_api_dispatch_mode: "push",
          resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
        },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    await registered();
    // One task fits; the other asks for more memory than the worker has and must never be pushed.
    await dispatch([
      { task_id: "auto-1", payload: { runner: "noop" }, execution_profile: { resources: { memory_mb: 512 } } },
      { task_id: "too-big", payload: { runner: "noop" }, execution_profile: { resources: { memory_mb: 4096 } } },
    ]);
    const done = await eventually(
      async () => {
        const t = await row("auto-1");
        return t?.state === "clean" && t;
      },
      "the dispatcher to push and the Runner to finish",
      20_000,
    );
    expect(done.lease_worker_id).toBe(WORKER);
    expect(rec.callsTo("/api/results/upload").length).toBeGreaterThanOrEqual(1);
    expect(rec.callsTo("/api/tasks/claim")).toHaveLength(0); // pushed, not pulled
    const big = await row("too-big");
    expect(big.state).toBe("queued");
    expect(big.attempt_no).toBe(1);
  });
});
