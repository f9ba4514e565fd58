// The pull Runner against a real Hub on loopback. A transparent recorder sits between them so
// the tests can see what the Runner sends; every reply it gets is the Hub's own.
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { readZip } from "../../src/results/zip.ts";
import { HubClient, HubError } from "../../src/runner/client.ts";
import { runnerCommand } from "../../src/runner/command.ts";
import { PullLoop, type PullOptions } from "../../src/runner/pull.ts";
import { eventually, get, post, startHub, type TestHub } from "../support/hub.ts";
import { freePort, Recorder } from "../support/recorder.ts";

const HUB_TOKEN = "hub-token-for-pull-tests";
const AUTH = { authorization: `Bearer ${HUB_TOKEN}` };
const WORKER = "w-pull";
let tmp: string;
let hub: TestHub;
let rec: Recorder;
let logs: string[];

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-pull-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function setup(hubOpts: Parameters<typeof startHub>[0] = {}): Promise<void> {
  hub = await startHub({ env: { LOOM_HUB_TOKEN: HUB_TOKEN }, ...hubOpts });
  rec = new Recorder(hub.url);
  await rec.start();
}
beforeEach(async () => {
  logs = [];
  await setup();
});
afterEach(async () => {
  await rec?.stop();
  await hub?.close();
});

function options(extra: Partial<PullOptions> = {}): PullOptions {
  return {
    client: new HubClient({ baseUrl: rec.url, token: HUB_TOKEN }),
    workerId: WORKER,
    workDir: path.join(tmp, "work"),
    capabilities: ["linux", "*"],
    maxConcurrency: 2,
    initialConcurrency: 2,
    concurrencyPolicy: "fixed",
    leaseSeconds: 60,
    scrubEnv: [],
    log: (l) => logs.push(l),
    claimWaitSeconds: 0,
    pollSeconds: 1,
    once: true,
    maxTasks: 0,
    graceSeconds: 5,
    retryDelaysMs: [50],
    maxBackoffMs: 200,
    killGraceMs: 200,
    ...extra,
  };
}

// Operator calls go straight to the Hub, not through the recorder.
const api = (p: string, body?: unknown) => (body === undefined ? get(hub.url, p, AUTH) : post(hub.url, p, body, AUTH));

async function dispatch(tasks: Record<string, unknown>[]): Promise<void> {
  const r = await api("/api/tasks/dispatch", {
    schema_version: 1,
    operator: "test",
    tasks: tasks.map((t) => ({ required_capability: "linux", ...t })),
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

async function rows(): Promise<Record<string, Record<string, any>>> {
  const r = await api("/api/tasks?limit=500");
  return Object.fromEntries(r.body.tasks.map((t: Record<string, any>) => [t.task_id, t]));
}
const states = async () => Object.fromEntries(Object.entries(await rows()).map(([id, t]) => [id, t.state]));

const shell = (command: string) => ({ runner: "shell", command });
/** A shell task that runs until the test creates `file`: no guessing how long anything takes. */
const gated = (file: string, then = "true") => shell(`while [ ! -e '${file}' ]; do sleep 0.05; done; ${then}`);
let gateNo = 0;
const newGate = () => path.join(tmp, `gate-${process.pid}-${++gateNo}`);
const open = (gate: string) => writeFileSync(gate, "");

describe("pull loop", () => {
  it("registers, heartbeats, claims, runs and completes, then exits after an idle round (--once)", async () => {
    await dispatch([{ task_id: "a", package_id: "pkg-a" }, { task_id: "b" }, { task_id: "c" }]);
    const s = await new PullLoop(options()).run();
    expect(s).toMatchObject({ claimed: 3, completed: 3, stopped: false });
    const paths = rec.paths();
    expect(paths[0]).toBe("/api/workers/register");
    expect(paths[1]).toBe("/api/workers/heartbeat");
    expect(paths.at(-1)).toBe("/api/workers/heartbeat");
    expect(rec.calls.at(-1)!.body).toMatchObject({
      worker_id: WORKER,
      current_runs: [],
      health: { phase: "completed" },
    });
    const reg = rec.callsTo("/api/workers/register")[0].body;
    expect(reg).toMatchObject({
      runner_api_version: 1,
      max_concurrency: 2,
      initial_concurrency: 2,
      concurrency_policy: "fixed",
    });
    expect(reg.health).toHaveProperty("resources.cpu_count");
    expect(reg.health).toHaveProperty("source_cache.enabled", false);
    for (const c of rec.callsTo("/api/tasks/claim")) {
      expect(c.body).toMatchObject({ worker_id: WORKER, lease_seconds: 60 });
      expect(c.body.limit).toBeLessThanOrEqual(2);
      expect(c.body).not.toHaveProperty("wait_seconds");
    }
    expect(
      rec
        .callsTo("/api/tasks/complete")
        .map((c) => c.body.task_id)
        .sort(),
    ).toEqual(["a", "b", "c"]);
    const complete = rec.callsTo("/api/tasks/complete")[0].body;
    expect(complete).toHaveProperty("result.exit_code", 0);
    expect(complete).toHaveProperty("upload.result_id");
    expect(rec.calls.every((c) => c.headers.authorization === `Bearer ${HUB_TOKEN}` && (c.status ?? 0) < 300)).toBe(
      true,
    );
    expect(await states()).toEqual({ a: "clean", b: "clean", c: "clean" });
    const cap = (await api("/api/data/worker-capacity")).body.workers.find(
      (w: { worker_id: string }) => w.worker_id === WORKER,
    );
    expect(cap.active_task_ids).toEqual([]);
  });

  it("claims again as soon as a slot frees up, without waiting for the whole batch", async () => {
    const gate = newGate();
    // claim order within one dispatch is task_id order
    await dispatch([
      { task_id: "a-long", payload: gated(gate) },
      { task_id: "b-short", payload: shell("true") },
      { task_id: "c-next", payload: shell("true") },
    ]);
    const done = new PullLoop(options()).run();
    // c-next can only start while a-long still runs if the Runner claims per free slot
    await eventually(
      () => rec.forTask("c-next").some((c) => c.path === "/api/tasks/complete"),
      "c-next to finish while a-long runs",
      20_000,
    );
    expect(
      rec
        .forTask("a-long")
        .map((c) => c.path)
        .filter((p) => p !== "/api/tasks/renew"),
    ).toEqual(["/api/tasks/start"]);
    open(gate);
    expect(await done).toMatchObject({ claimed: 3, completed: 3 });
    const limits = rec.callsTo("/api/tasks/claim").map((c) => c.body.limit);
    expect(limits[0]).toBe(2);
    expect(limits).toContain(1);
    expect(await states()).toEqual({ "a-long": "clean", "b-short": "clean", "c-next": "clean" });
  });

  it("clamps desired_concurrency to --max-concurrency and sends current_runs in heartbeats", async () => {
    // The inventory allows 50, so the Hub tells the Runner 50; the Runner's own max is 2.
    expect(
      (
        await api("/api/admin/register-worker-hosts", {
          hosts: [{ worker_id: WORKER, max_concurrency: 50, initial_concurrency: 50 }],
        })
      ).status,
    ).toBe(200);
    const gate = newGate();
    await dispatch(["1", "2", "3"].map((n) => ({ task_id: `t${n}`, package_id: `p${n}`, payload: gated(gate) })));
    const done = new PullLoop(options({ maxConcurrency: 2 })).run();
    const busy = await eventually(
      () => rec.callsTo("/api/workers/heartbeat").find((c) => (c.body.current_runs as unknown[]).length === 2),
      "a heartbeat with two runs",
      20_000,
    );
    open(gate);
    await done;
    expect(rec.callsTo("/api/workers/register")[0].reply).toMatchObject({
      desired_concurrency: 50,
      max_concurrency: 50,
    });
    expect(Math.max(...rec.callsTo("/api/tasks/claim").map((c) => Number(c.body.limit)))).toBe(2);
    expect(busy.body.current_runs).toEqual(
      expect.arrayContaining([expect.objectContaining({ task_id: "t1", package_id: "p1" })]),
    );
    expect(busy.body).toHaveProperty("health.phase", "running");
    expect(await states()).toEqual({ t1: "clean", t2: "clean", t3: "clean" });
  });

  it("sends wait_seconds with claims in long-poll mode", async () => {
    const s = await new PullLoop(options({ claimWaitSeconds: 1 })).run();
    expect(s.claimed).toBe(0);
    const claim = rec.callsTo("/api/tasks/claim")[0];
    expect(claim.body).toMatchObject({ wait_seconds: 1, wait_poll_seconds: 1 });
    expect(claim).toMatchObject({ status: 200, reply: { tasks: [] } });
  });

  it("stops after --max-tasks", async () => {
    await dispatch(["a", "b", "c", "d"].map((task_id) => ({ task_id })));
    const s = await new PullLoop(options({ once: false, maxTasks: 2 })).run();
    expect(s).toMatchObject({ claimed: 2, completed: 2 });
    expect(await states()).toEqual({ a: "clean", b: "clean", c: "queued", d: "queued" });
  });

  it("does not complete when the upload queued an automatic retry", async () => {
    await dispatch([
      {
        task_id: "retry-me",
        payload: {
          ...shell("echo '429 Too Many Requests' >&2; exit 1"),
          retry_policy: { max_attempts: 2, retry_categories: ["rate_limited"] },
        },
      },
    ]);
    const s = await new PullLoop(options({ once: false, maxTasks: 1 })).run();
    expect(s.reports[0]).toMatchObject({ state: "auto_retry", verdict: "run_error" });
    expect(rec.callsTo("/api/results/upload")[0].reply).toMatchObject({ auto_retry: { queued: true, attempt_no: 2 } });
    expect(rec.callsTo("/api/tasks/complete")).toHaveLength(0);
    expect(rec.callsTo("/api/tasks/fail")).toHaveLength(0);
    expect((await rows())["retry-me"]).toMatchObject({ state: "retry_queued", attempt_no: 2 });
  });

  it("stops the task's processes when renew answers 409 (the task was cancelled), and reports nothing", async () => {
    await dispatch([{ task_id: "doomed", payload: shell("sleep 60") }]);
    const done = new PullLoop(options({ renewIntervalMs: 200 })).run();
    await eventually(
      () => rec.forTask("doomed").some((c) => c.path === "/api/tasks/start" && c.status === 200),
      "doomed to start",
    );
    expect((await api("/api/admin/cancel-task", { task_id: "doomed" })).status).toBe(200);
    const s = await done;
    expect(s.reports[0]).toMatchObject({ task_id: "doomed", state: "lease_lost", exit_code: 143 });
    expect(rec.forTask("doomed").find((c) => c.path === "/api/tasks/renew" && c.status === 409)!.reply).toMatchObject({
      error: "task_cancelled",
    });
    for (const p of ["/api/results/upload", "/api/tasks/complete", "/api/tasks/fail"])
      expect(rec.callsTo(p)).toHaveLength(0);
    expect(logs.some((l) => l.includes("lease lost (task_cancelled)"))).toBe(true);
    expect((await rows()).doomed.state).toBe("cancelled");
  });

  it("keeps renewing while the task runs, and each renew moves the lease on", async () => {
    const gate = newGate();
    await dispatch([{ task_id: "renewed", payload: gated(gate) }]);
    const done = new PullLoop(options({ renewIntervalMs: 150 })).run();
    await eventually(
      () => rec.callsTo("/api/tasks/renew").filter((c) => c.status === 200).length >= 3,
      "three renews",
      20_000,
    );
    open(gate);
    await done;
    const renews = rec.callsTo("/api/tasks/renew");
    expect(renews[0].body).toMatchObject({ worker_id: WORKER, task_id: "renewed", lease_seconds: 60 });
    const claimed = rec.callsTo("/api/tasks/claim").find((c) => c.reply?.tasks?.length)!.reply.tasks[0].lease_until;
    // a renew still in flight when the task ends may be answered after it, so look at the accepted ones
    const accepted = renews.filter((c) => c.status === 200);
    expect(Date.parse(accepted.at(-1)!.reply.lease_until)).toBeGreaterThan(Date.parse(claimed));
    expect((await rows()).renewed.state).toBe("clean");
  });

  it("reports an upload the Hub refuses with fail {type, detail}, and the Hub records it", async () => {
    await rec.stop();
    await hub.close();
    await setup({ uploadLimitBytes: 64 });
    await dispatch([{ task_id: "x" }]);
    const s = await new PullLoop(options()).run();
    expect(s.reports[0]).toMatchObject({ task_id: "x", state: "failed" });
    expect(rec.callsTo("/api/results/upload")[0].status).toBe(413);
    const fail = rec.callsTo("/api/tasks/fail")[0];
    expect(fail.body).toMatchObject({
      task_id: "x",
      error: { type: "HubError", detail: expect.stringContaining("body_too_large") },
    });
    expect(fail.reply).toMatchObject({ ok: true, new_state: "run_error" });
    expect((await rows()).x).toMatchObject({ state: "run_error", error: { type: "HubError" } });
  });

  it("does not run or report a task whose start is refused", async () => {
    await dispatch([{ task_id: "not-mine" }]);
    // an operator cancels the task between the Runner's claim and its start
    rec.before = async (call) => {
      if (call.path === "/api/tasks/start") await api("/api/admin/cancel-task", { task_id: call.body.task_id });
    };
    const s = await new PullLoop(options()).run();
    expect(s.reports[0]).toMatchObject({ state: "start_failed" });
    expect(rec.callsTo("/api/tasks/start")[0]).toMatchObject({ status: 409, reply: { error: "task_cancelled" } });
    for (const p of ["/api/results/upload", "/api/tasks/complete", "/api/tasks/fail"])
      expect(rec.callsTo(p)).toHaveLength(0);
    expect((await rows())["not-mine"].state).toBe("cancelled");
  });

  it("backs off and carries on when claims are refused, instead of crashing", async () => {
    // A blocked worker's claims get 403 worker_not_available; a v1 Runner crashes on that.
    await post(
      hub.url,
      "/api/workers/register",
      { worker_id: WORKER, runner_api_version: 1, max_concurrency: 2, initial_concurrency: 2 },
      AUTH,
    );
    expect((await api("/api/admin/block-worker", { worker_id: WORKER })).status).toBe(200);
    await dispatch([{ task_id: "eventually" }]);
    const done = new PullLoop(options()).run();
    await eventually(
      () => rec.callsTo("/api/tasks/claim").filter((c) => c.status === 403).length >= 2,
      "two refused claims",
    );
    expect(rec.callsTo("/api/tasks/claim")[0].reply).toMatchObject({ error: "worker_not_available" });
    expect((await api("/api/admin/unblock-worker", { worker_id: WORKER })).status).toBe(200);
    const s = await done;
    expect(s.completed).toBe(1);
    expect(logs.filter((l) => /claim failed/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect((await rows()).eventually.state).toBe("clean");
  });

  it("carries on through a Hub restart: its calls fail while the Hub is down, then work resumes", async () => {
    const dir = path.join(tmp, "restart-hub");
    await rec.stop();
    await hub.close();
    hub = await startHub({ env: { LOOM_HUB_TOKEN: HUB_TOKEN } }, dir);
    const port = Number(new URL(hub.url).port);
    rec = new Recorder(hub.url);
    await rec.start();
    const loop = new PullLoop(options({ once: false, maxTasks: 1, claimWaitSeconds: 1 }));
    const done = loop.run();
    await eventually(() => rec.callsTo("/api/tasks/claim").length >= 1, "a first claim");
    await hub.close();
    await eventually(
      () => logs.filter((l) => /(heartbeat|claim) failed/.test(l)).length >= 2,
      "failures while the Hub is down",
    );
    hub = await startHub({ env: { LOOM_HUB_TOKEN: HUB_TOKEN }, port }, dir);
    await dispatch([{ task_id: "after-restart" }]);
    const s = await done;
    expect(s).toMatchObject({ claimed: 1, completed: 1 });
    expect((await rows())["after-restart"].state).toBe("clean");
  });

  it("waits for an unreachable Hub, retrying registration", async () => {
    const port = await freePort();
    const loop = new PullLoop(
      options({ client: new HubClient({ baseUrl: `http://127.0.0.1:${port}`, token: HUB_TOKEN }) }),
    );
    const done = loop.run();
    await eventually(() => logs.filter((l) => l.startsWith("register failed")).length >= 2, "register retries");
    // The Hub comes up on the port the Runner has been trying.
    const late = await startHub({ env: { LOOM_HUB_TOKEN: HUB_TOKEN }, port });
    try {
      expect(await done).toMatchObject({ stopped: false });
      const workers = (await get(late.url, "/api/data/worker-capacity", AUTH)).body.workers;
      expect(workers.map((w: { worker_id: string }) => w.worker_id)).toEqual([WORKER]);
    } finally {
      await late.close();
    }
  });

  it("a refused token is fatal", async () => {
    const loop = new PullLoop(options({ client: new HubClient({ baseUrl: rec.url, token: "wrong" }) }));
    const err = await loop.run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubError);
    expect((err as HubError).status).toBe(401);
    expect(String(err)).not.toContain("wrong");
    expect(rec.paths()).toEqual(["/api/workers/register"]);
  });

  it("on a stop request: no more claims; running tasks get the grace period, then are stopped and reported", async () => {
    await dispatch([{ task_id: "a-slow", payload: shell("sleep 60") }, { task_id: "b-never-claimed" }]);
    const loop = new PullLoop(
      options({ once: false, maxConcurrency: 1, initialConcurrency: 1, graceSeconds: 0.3, renewIntervalMs: 120_000 }),
    );
    const done = loop.run();
    await eventually(
      () => rec.forTask("a-slow").some((c) => c.path === "/api/tasks/start" && c.status === 200),
      "task start",
    );
    loop.requestStop("test");
    const s = await done;
    expect(s).toMatchObject({ stopped: true, claimed: 1 });
    expect(rec.callsTo("/api/tasks/fail")[0].body).toMatchObject({
      task_id: "a-slow",
      error: { type: "RunnerStopped" },
    });
    expect(rec.calls.at(-1)!.body).toMatchObject({ health: { phase: "completed" } });
    const r = await rows();
    expect(r["b-never-claimed"].state).toBe("queued");
    expect(r["a-slow"]).toMatchObject({ state: "run_error", error: { type: "RunnerStopped" } });
  });
});

describe("loom runner command", () => {
  it("runs the pull loop from flags (--once) against the Hub", async () => {
    await dispatch([
      { task_id: "cli-task", required_capability: "gpu", payload: shell("echo from-cli") },
      { task_id: "linux-task", required_capability: "linux" },
    ]);
    process.env.LOOM_TEST_HUB_TOKEN = HUB_TOKEN;
    const writes: string[] = [];
    const orig = process.stdout.write.bind(process.stdout);
    process.stdout.write = (chunk: string) => (writes.push(String(chunk)), true);
    const errWrite = process.stderr.write.bind(process.stderr);
    process.stderr.write = () => true;
    try {
      await runnerCommand().parseAsync(
        [
          "--controller",
          rec.url,
          "--worker-id",
          "cli-w",
          "--once",
          "--poll-seconds",
          "1",
          "--auth-token-env",
          "LOOM_TEST_HUB_TOKEN",
          "--work-dir",
          path.join(tmp, "cli"),
          "--capability",
          "gpu",
          "--resource-capacity-json",
          '{"memory_mb":1024}',
        ],
        { from: "user" },
      );
    } finally {
      process.stdout.write = orig;
      process.stderr.write = errWrite;
      delete process.env.LOOM_TEST_HUB_TOKEN;
    }
    expect(JSON.parse(writes.join(""))).toEqual({ worker_id: "cli-w", claimed: 1, completed: 1 });
    const reg = rec.callsTo("/api/workers/register")[0].body;
    expect(reg).toMatchObject({
      worker_id: "cli-w",
      capabilities: ["gpu"],
      max_concurrency: 1,
      initial_concurrency: 1,
      resource_capacity: { memory_mb: 1024, gpu_count: 0, gpu_types: [] },
    });
    const cap = (await api("/api/data/worker-capacity")).body.workers.find(
      (w: { worker_id: string }) => w.worker_id === "cli-w",
    );
    expect(cap.capacity.memory_mb).toBe(1024);
    // the Runner advertised only gpu, so the linux task stays queued
    const r = await rows();
    expect(r["linux-task"].state).toBe("queued");
    expect(r["cli-task"].state).toBe("clean");
    const zip = await fetch(`${hub.url}/api/results/${r["cli-task"].result_id}`, { headers: AUTH });
    expect((await readZip(Buffer.from(await zip.arrayBuffer()))).get("stdout.txt")!.toString()).toBe("from-cli\n");
    expect(existsSync(path.join(tmp, "cli"))).toBe(true);
  });
});
