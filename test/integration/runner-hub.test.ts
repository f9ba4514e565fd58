// The Runner against Loom's own Hub, on loopback: the wire protocol both sides must agree on.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hub } from "../../src/hub.ts";
import { HubClient } from "../../src/runner/client.ts";
import { DirectServer } from "../../src/runner/direct.ts";
import { PullLoop, type PullOptions } from "../../src/runner/pull.ts";
import { eventually } from "../support/hub.ts";

const HUB_TOKEN = "hub-contract-token-0123456789";
const RUNNER_TOKEN = "runner-contract-token-0123456789";
let tmp: string;
let hub: Hub;
const savedRunnerToken = process.env.LOOM_RUNNER_TOKEN;

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-hub-"));
  // The Hub reads the token it pushes with from its environment.
  process.env.LOOM_RUNNER_TOKEN = RUNNER_TOKEN;
  hub = await Hub.start({
    dataDir: path.join(tmp, "hub"),
    port: 0,
    logLevel: "silent",
    env: { ...process.env, LOOM_HUB_TOKEN: HUB_TOKEN, LOOM_RUNNER_TOKEN: RUNNER_TOKEN },
  });
});
afterAll(async () => {
  await hub?.close();
  if (savedRunnerToken === undefined) delete process.env.LOOM_RUNNER_TOKEN;
  else process.env.LOOM_RUNNER_TOKEN = savedRunnerToken;
  rmSync(tmp, { recursive: true, force: true });
});

async function api(p: string, body?: unknown): Promise<[number, any]> {
  const res = await fetch(hub.url + p, {
    method: body === undefined ? "GET" : "POST",
    headers: { Authorization: `Bearer ${HUB_TOKEN}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return [res.status, await res.json()];
}

const states = async (ids: string[]) => {
  const [, r] = await api(`/api/tasks?task_id=${ids.join(",")}&limit=100`);
  return Object.fromEntries((r.tasks as { task_id: string; state: string }[]).map((t) => [t.task_id, t.state]));
};

const dispatch = (tasks: Record<string, unknown>[]) =>
  api("/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });

function identity(workerId: string, extra: Partial<PullOptions> = {}): PullOptions {
  return {
    client: new HubClient({ baseUrl: hub.url, token: HUB_TOKEN }),
    workerId,
    workDir: path.join(tmp, workerId),
    capabilities: ["linux", "*"],
    maxConcurrency: 2,
    initialConcurrency: 2,
    concurrencyPolicy: "fixed",
    leaseSeconds: 60,
    scrubEnv: [],
    log: () => {},
    claimWaitSeconds: 1,
    pollSeconds: 1,
    once: true,
    maxTasks: 0,
    graceSeconds: 5,
    maxBackoffMs: 500,
    retryDelaysMs: [100],
    ...extra,
  };
}

describe("pull Runner against the Hub", () => {
  it("claims, runs, uploads and completes; verdicts follow exit codes", async () => {
    const [status] = await dispatch([
      {
        task_id: "hub-noop",
        case_id: "c",
        run_id: "1",
        setting_id: "s",
        payload: { runner: "noop", execution_profile: { resources: { cpu_millis: 500, memory_mb: 64 } } },
      },
      {
        task_id: "hub-fail",
        case_id: "c",
        run_id: "2",
        setting_id: "s",
        payload: { runner: "shell", command: "echo boom >&2; exit 3" },
      },
      {
        task_id: "hub-ok",
        case_id: "c",
        run_id: "3",
        setting_id: "s",
        payload: { runner: "shell", command: "echo $LOOM_TASK_ID" },
      },
    ]);
    expect(status).toBe(201);
    const s = await new PullLoop(identity("hub-pull-w")).run();
    expect(s.reports.map((r) => [r.task_id, r.state]).sort()).toEqual([
      ["hub-fail", "completed"],
      ["hub-noop", "completed"],
      ["hub-ok", "completed"],
    ]);
    expect(await states(["hub-noop", "hub-fail", "hub-ok"])).toEqual({
      "hub-noop": "clean",
      "hub-fail": "run_error",
      "hub-ok": "clean",
    });
    const [, cap] = await api("/api/data/worker-capacity");
    const w = cap.workers.find((x: { worker_id: string }) => x.worker_id === "hub-pull-w");
    expect(w.active_task_ids).toEqual([]);
    expect(Object.keys(w.capacity).sort()).toEqual(["cpu_millis", "disk_mb", "gpu_count", "gpu_types", "memory_mb"]);
  });
});

describe("Direct Runner pushed by the Hub", () => {
  it("accepts a push-task, runs it to clean, and the Hub gets 429 while its one slot is busy", async () => {
    const server = new DirectServer({
      ...identity("hub-direct-w", { maxConcurrency: 1, initialConcurrency: 1 }),
      host: "127.0.0.1",
      port: 0,
      runnerToken: RUNNER_TOKEN,
    });
    const url = await server.start();
    try {
      const [hs] = await api("/api/admin/register-worker-hosts", {
        operator: "test",
        hosts: [
          {
            worker_id: "hub-direct-w",
            host: "127.0.0.1",
            connection_mode: "direct-worker-api",
            worker_url: url,
            max_concurrency: 1,
            initial_concurrency: 1,
          },
        ],
      });
      expect(hs).toBe(200);
      // push-1 holds its slot until the gate file exists, so push-2 meets a full worker.
      const gate = path.join(tmp, "push-1-gate");
      await dispatch([
        {
          task_id: "push-1",
          case_id: "c",
          run_id: "1",
          setting_id: "p",
          payload: { runner: "shell", command: `while [ ! -e '${gate}' ]; do sleep 0.05; done` },
        },
        { task_id: "push-2", case_id: "c", run_id: "2", setting_id: "p", payload: { runner: "noop" } },
      ]);
      // registration runs in the background; push once the Hub has it
      await eventually(
        () => hub.scheduler.ctx.worker("hub-direct-w")?.status?.registration,
        "the Direct Runner to register",
      );
      const first = await api("/api/admin/push-task", {
        task_id: "push-1",
        worker_id: "hub-direct-w",
        operator: "test",
      });
      expect(first).toMatchObject([202, { ok: true, task_id: "push-1", runner: { state: "accepted" } }]);
      const [busy, busyBody] = await api("/api/admin/push-task", {
        task_id: "push-2",
        worker_id: "hub-direct-w",
        operator: "test",
      });
      expect([busy, busyBody.error]).toEqual([429, "worker_capacity_reached"]);
      writeFileSync(gate, "");
      await eventually(() => server.activePushes.length === 0, "push to finish");
      expect(await states(["push-1"])).toEqual({ "push-1": "clean" });
    } finally {
      await server.close(0);
    }
  });
});
