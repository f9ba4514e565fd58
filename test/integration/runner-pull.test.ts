import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { HubClient, HubError } from "../../src/runner/client.ts";
import { runnerCommand } from "../../src/runner/command.ts";
import { PullLoop, type PullOptions } from "../../src/runner/pull.ts";
import { HubPeer, until } from "./runner-hub-peer.ts";

const WORKER = "w-pull";
let tmp: string;
let peer: HubPeer;
let logs: string[];

beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-pull-"));
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
beforeEach(async () => {
  logs = [];
  peer = new HubPeer({ token: "hub-token", desiredConcurrency: 2 });
  await peer.start();
});
afterEach(async () => {
  await peer.stop();
});

function options(extra: Partial<PullOptions> = {}): PullOptions {
  return {
    client: new HubClient({ baseUrl: peer.url, token: "hub-token" }),
    workerId: WORKER,
    workDir: path.join(tmp, "work"),
    capabilities: ["linux", "*"],
    maxConcurrency: 2,
    initialConcurrency: 1,
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

const shell = (command: string) => ({ runner: "shell", command });

describe("pull loop", () => {
  it("registers, heartbeats, claims, runs and completes, then exits after an idle round (--once)", async () => {
    peer.queue.push({ task_id: "a", package_id: "pkg-a" }, { task_id: "b" }, { task_id: "c" });
    const s = await new PullLoop(options()).run();
    expect(s).toMatchObject({ claimed: 3, completed: 3, stopped: false });
    const paths = peer.paths();
    expect(paths[0]).toBe("/api/workers/register");
    expect(paths[1]).toBe("/api/workers/heartbeat");
    expect(paths.at(-1)).toBe("/api/workers/heartbeat");
    expect(peer.calls.at(-1)!.body).toMatchObject({ worker_id: WORKER, current_runs: [], health: { phase: "completed" } });
    const reg = peer.callsTo("/api/workers/register")[0]!.body;
    expect(reg).toMatchObject({ runner_api_version: 1, max_concurrency: 2, initial_concurrency: 1, concurrency_policy: "fixed" });
    expect(reg.health).toHaveProperty("resources.cpu_count");
    expect(reg.health).toHaveProperty("source_cache.enabled", false);
    for (const c of peer.callsTo("/api/tasks/claim")) {
      expect(c.body).toMatchObject({ worker_id: WORKER, lease_seconds: 60 });
      expect(c.body.limit).toBeLessThanOrEqual(2);
      expect(c.body).not.toHaveProperty("wait_seconds");
    }
    expect(peer.callsTo("/api/tasks/complete").map((c) => c.body.task_id).sort()).toEqual(["a", "b", "c"]);
    const complete = peer.callsTo("/api/tasks/complete")[0]!.body;
    expect(complete).toHaveProperty("result.exit_code", 0);
    expect(complete).toHaveProperty("upload.result_id");
    expect(peer.calls.every((c) => c.authorization === "Bearer hub-token")).toBe(true);
  });

  it("claims again as soon as a slot frees up, without waiting for the whole batch", async () => {
    peer.queue.push({ task_id: "long", payload: shell("sleep 2") }, { task_id: "short", payload: shell("sleep 0.2") }, { task_id: "next", payload: shell("true") });
    await new PullLoop(options()).run();
    const at = (p: string, id: string) => peer.calls.find((c) => c.path === p && c.body.task_id === id)!.at;
    expect(at("/api/tasks/start", "next")).toBeLessThan(at("/api/tasks/complete", "long"));
    const limits = peer.callsTo("/api/tasks/claim").map((c) => c.body.limit);
    expect(limits[0]).toBe(2);
    expect(limits).toContain(1);
  });

  it("clamps desired_concurrency to --max-concurrency and sends current_runs in heartbeats", async () => {
    peer.opts.desiredConcurrency = 50;
    peer.queue.push(...["1", "2", "3"].map((id) => ({ task_id: `t${id}`, package_id: `p${id}`, payload: shell("sleep 1.2") })));
    await new PullLoop(options({ maxConcurrency: 2 })).run();
    expect(Math.max(...peer.callsTo("/api/tasks/claim").map((c) => Number(c.body.limit)))).toBe(2);
    const busy = peer.callsTo("/api/workers/heartbeat").find((c) => (c.body.current_runs as unknown[]).length === 2);
    expect(busy!.body.current_runs).toEqual(expect.arrayContaining([expect.objectContaining({ task_id: "t1", package_id: "p1" })]));
    expect(busy!.body).toHaveProperty("health.phase", "running");
  });

  it("sends wait_seconds with claims in long-poll mode", async () => {
    const s = await new PullLoop(options({ claimWaitSeconds: 1 })).run();
    expect(s.claimed).toBe(0);
    expect(peer.callsTo("/api/tasks/claim")[0]!.body).toMatchObject({ wait_seconds: 1, wait_poll_seconds: 1 });
  });

  it("stops after --max-tasks", async () => {
    peer.queue.push(...["a", "b", "c", "d"].map((task_id) => ({ task_id })));
    const s = await new PullLoop(options({ once: false, maxTasks: 2 })).run();
    expect(s).toMatchObject({ claimed: 2, completed: 2 });
    expect(peer.queue).toHaveLength(2);
  });

  it("does not complete when the upload queued an automatic retry", async () => {
    peer.queue.push({ task_id: "retry-me", payload: shell("echo 429 >&2; exit 1") });
    peer.opts.override = (p) => (p === "/api/results/upload" ? { status: 201, body: { ok: true, result_id: "result-x", verdict: "run_error", auto_retry: { queued: true, attempt_no: 2 } } } : undefined);
    const s = await new PullLoop(options()).run();
    expect(s.reports[0]).toMatchObject({ state: "auto_retry", verdict: "run_error" });
    expect(peer.callsTo("/api/tasks/complete")).toHaveLength(0);
    expect(peer.callsTo("/api/tasks/fail")).toHaveLength(0);
  });

  it("stops the task's processes when renew answers 409 (the lease is gone), and reports nothing", async () => {
    peer.queue.push({ task_id: "doomed", payload: shell("sleep 30") });
    peer.opts.override = (p) => (p === "/api/tasks/renew" ? { status: 409, body: { error: "lease_worker_mismatch" } } : undefined);
    const t0 = Date.now();
    const s = await new PullLoop(options({ renewIntervalMs: 200 })).run();
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(s.reports[0]).toMatchObject({ task_id: "doomed", state: "lease_lost", exit_code: 143 });
    for (const p of ["/api/results/upload", "/api/tasks/complete", "/api/tasks/fail"]) expect(peer.callsTo(p)).toHaveLength(0);
    expect(logs.some((l) => l.includes("lease lost (lease_worker_mismatch)"))).toBe(true);
  });

  it("keeps renewing while the task runs", async () => {
    peer.queue.push({ task_id: "renewed", payload: shell("sleep 0.8") });
    await new PullLoop(options({ renewIntervalMs: 150 })).run();
    const renews = peer.callsTo("/api/tasks/renew");
    expect(renews.length).toBeGreaterThanOrEqual(3);
    expect(renews[0]!.body).toMatchObject({ worker_id: WORKER, task_id: "renewed", lease_seconds: 60 });
  });

  it("reports an exception in complete with fail {type, detail}", async () => {
    peer.queue.push({ task_id: "x" });
    peer.opts.override = (p) => (p === "/api/tasks/complete" ? { status: 404, body: { error: "task_not_found" } } : undefined);
    await new PullLoop(options()).run();
    expect(peer.callsTo("/api/tasks/fail")[0]!.body).toMatchObject({ task_id: "x", error: { type: "HubError", detail: expect.stringContaining("task_not_found") } });
  });

  it("does not run or report a task whose start is refused", async () => {
    peer.queue.push({ task_id: "not-mine" });
    peer.opts.override = (p) => (p === "/api/tasks/start" ? { status: 409, body: { error: "lease_worker_mismatch" } } : undefined);
    const s = await new PullLoop(options()).run();
    expect(s.reports[0]).toMatchObject({ state: "start_failed" });
    for (const p of ["/api/results/upload", "/api/tasks/complete", "/api/tasks/fail"]) expect(peer.callsTo(p)).toHaveLength(0);
  });

  it("backs off and carries on when heartbeat or claim fail, instead of crashing", async () => {
    let failures = 0;
    peer.queue.push({ task_id: "eventually" });
    peer.opts.override = (p) => {
      if ((p === "/api/workers/heartbeat" || p === "/api/tasks/claim") && failures < 3) {
        failures++;
        return p === "/api/tasks/claim" ? { status: 403, body: { error: "worker_not_available" } } : { status: 503, body: { error: "busy" } };
      }
      return undefined;
    };
    const s = await new PullLoop(options()).run();
    expect(s.completed).toBe(1);
    expect(logs.filter((l) => /(heartbeat|claim) failed/.test(l)).length).toBeGreaterThanOrEqual(1);
  });

  it("waits for an unreachable Hub, retrying registration", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const loop = new PullLoop(options({ client: new HubClient({ baseUrl: `http://127.0.0.1:${port}`, token: "hub-token" }) }));
    const done = loop.run();
    await until(() => logs.filter((l) => l.startsWith("register failed")).length >= 2, 5000, "register retries");
    const late = new HubPeer({ token: "hub-token" });
    // The Hub comes up on the port the Runner has been trying.
    await late.start(port);
    try {
      expect(await done).toMatchObject({ stopped: false });
      expect(late.callsTo("/api/workers/register")).toHaveLength(1);
    } finally {
      await late.stop();
    }
  });

  it("a refused token is fatal", async () => {
    const loop = new PullLoop(options({ client: new HubClient({ baseUrl: peer.url, token: "wrong" }) }));
    const err = await loop.run().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HubError);
    expect((err as HubError).status).toBe(401);
    expect(String(err)).not.toContain("wrong");
  });

  it("on a stop request: no more claims; running tasks get the grace period, then are stopped and reported", async () => {
    peer.queue.push({ task_id: "slow", payload: shell("sleep 30") }, { task_id: "never-claimed" });
    const loop = new PullLoop(options({ once: false, maxConcurrency: 1, graceSeconds: 0.3 }));
    const done = loop.run();
    await until(() => peer.callsTo("/api/tasks/start").length === 1, 5000, "task start");
    await new Promise((r) => setTimeout(r, 200));
    loop.requestStop("test");
    const s = await done;
    expect(s).toMatchObject({ stopped: true, claimed: 1 });
    expect(peer.queue.map((t) => t.task_id)).toEqual(["never-claimed"]);
    expect(peer.callsTo("/api/tasks/fail")[0]!.body).toMatchObject({ task_id: "slow", error: { type: "RunnerStopped" } });
    expect(peer.calls.at(-1)!.body).toMatchObject({ health: { phase: "completed" } });
  });
});

describe("loom runner command", () => {
  it("runs the pull loop from flags (--once) against the Hub", async () => {
    peer.queue.push({ task_id: "cli-task", payload: shell("echo from-cli") });
    process.env.LOOM_TEST_HUB_TOKEN = "hub-token";
    const writes: string[] = [];
    const orig = process.stdout.write.bind(process.stdout);
    process.stdout.write = ((chunk: string) => (writes.push(String(chunk)), true)) as typeof process.stdout.write;
    const errWrite = process.stderr.write.bind(process.stderr);
    process.stderr.write = (() => true) as typeof process.stderr.write;
    try {
      await runnerCommand().parseAsync(
        ["--controller", peer.url, "--worker-id", "cli-w", "--once", "--poll-seconds", "1", "--auth-token-env", "LOOM_TEST_HUB_TOKEN", "--work-dir", path.join(tmp, "cli"), "--capability", "gpu", "--resource-capacity-json", '{"memory_mb":1024}'],
        { from: "user" },
      );
    } finally {
      process.stdout.write = orig;
      process.stderr.write = errWrite;
      delete process.env.LOOM_TEST_HUB_TOKEN;
    }
    expect(JSON.parse(writes.join(""))).toEqual({ worker_id: "cli-w", claimed: 1, completed: 1 });
    const reg = peer.callsTo("/api/workers/register")[0]!.body;
    expect(reg).toMatchObject({ worker_id: "cli-w", capabilities: ["gpu"], max_concurrency: 1, initial_concurrency: 1, resource_capacity: { memory_mb: 1024, gpu_count: 0, gpu_types: [] } });
    expect(peer.uploads.get("cli-task")!.zip.get("stdout.txt")!.toString()).toBe("from-cli\n");
  });
});
