// A v1 user's files, commands, flags and loops against a live Hub on loopback, through the
// `loom` binary: the v1 inventory and manifest shapes (test/fixtures/v1) validate, apply and
// register; every v1 Hub CLI verb exists with v1's flags and prints JSON; dispatch-repo-run
// keeps every --command and makes unique ids; `loom runner` takes the v1 Runner's flags.
// The Hub requires a token, and every call names it with v1's --controller-token-env.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildProgram } from "../../src/cli/main.ts";
import { eventually, get, type TestHub, startHub } from "../support/hub.ts";

type Run = { code: number; stdout: string; stderr: string };
type Json = Record<string, any>;

const ROOT = join(import.meta.dirname, "..", "..");
const FIXTURES = join(ROOT, "test", "fixtures", "v1");
const API = "/apis/loom.dev/v1alpha1";
const TOKEN = "v1-e2e-token-0123456789abcdef";
const auth = { authorization: `Bearer ${TOKEN}` };

function run(args: string[], input?: string): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, V1_HUB_TOKEN: TOKEN };
  delete env.LOOM_HUB_TOKEN;
  delete env.LOOM_CONTROLLER;
  return new Promise((resolve) => {
    const child = execFile(process.execPath, ["bin/loom.mjs", ...args], { cwd: ROOT, env }, (e, stdout, stderr) => {
      resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr });
    });
    if (input !== undefined) child.stdin!.end(input);
  });
}

let h: TestHub;
let dir: string;
const loom = (...args: string[]) => run([...args, "--controller", h.url, "--controller-token-env", "V1_HUB_TOKEN"]);
const json = (r: Run) => {
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as Json;
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-v1-"));
  // The v1 inventory's Direct Runner pushes with LAB_RUNNER_TOKEN, which the operator allows.
  h = await startHub({
    heartbeatGraceSeconds: 3600,
    env: { ...process.env, LOOM_HUB_TOKEN: TOKEN },
    directTokenEnv: ["LOOM_DIRECT_TOKEN_*", "LAB_RUNNER_TOKEN"],
  });
});

afterAll(async () => {
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("v1 files", () => {
  it("the v1 inventory and the three manifest shapes (and `runs`) validate, with every kept field shown", async () => {
    const r = await run(["validate", "-f", FIXTURES]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("valid: 4 Campaigns, 3 Workers, 8 Tasks from campaigns\n");
    expect(r.stderr).toContain(
      "connection_defaults.ssh: not used by Loom; kept on every worker (annotation loom.dev/v1-fields)",
    );
    expect(r.stderr).toContain("workers[0] (lab-small).labels: not used by Loom; kept on the Worker");
    expect(r.stderr).toContain("cases[0].bench_suite: not a Loom field; kept as the template value {bench_suite}");
    expect(r.stderr).toContain("package_id: not used by Loom; kept on the Campaign");
  });

  it("apply stores them: Workers keep their v1-only fields, Tasks carry what v1 normalised", async () => {
    const r = await loom("apply", "-f", FIXTURES);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("worker/lab-small created");
    expect(r.stdout).toContain("campaign/v1-runs created");
    const small = (await get(h.url, `${API}/workers/lab-small`, auth)).body;
    expect(JSON.parse(small.metadata.annotations["loom.dev/v1-fields"])).toEqual({
      ssh: { control_persist: "5m" },
      labels: { rack: "r1-u07" },
    });
    expect(small.spec).toMatchObject({
      user: "loom",
      instance_type: "lab.s2",
      memory_gb: 4,
      source_cache_max_mb: 2048,
      connection_mode: "long-poll",
    });
    const direct = (await get(h.url, `${API}/workers/lab-direct`, auth)).body;
    expect(direct.spec).toMatchObject({
      connection_mode: "direct-worker-api",
      command_port: 9877,
      direct_api_token_env: "LAB_RUNNER_TOKEN",
    });

    const task = async (name: string) =>
      eventually(async () => {
        const t = await get(h.url, `${API}/tasks/${name}`, auth);
        return t.status === 200 && t.body;
      }, `task ${name}`);
    const repo = await task("v1-repo-phases__mail-task-1__plain__run-001");
    expect(repo.spec.payload.source).toEqual({
      type: "git",
      url: "https://git.example.invalid/bench/suite.git",
      ref: "v2.0.1",
      depth: 1,
    });
    expect(repo.spec.payload.phases[1].args).toEqual([
      "--suite",
      "mail",
      "--task",
      "task_1",
      "--model",
      "LOCAL",
      "--out",
      "out/mail-task-1/001",
    ]);
    expect(repo.spec.retry_policy).toEqual({
      max_attempts: 3,
      retry_categories: ["network_unavailable"],
      different_worker: true,
    });
    const oracle = await task("v1-oracle__only__base__run-001");
    expect(oracle.spec.payload.oracle).toMatchObject({ name: "exists-check", oracle_version: "exists-check-1" });
    expect(oracle.spec.payload.trajectory_export).toMatchObject({ export_path: "trace.json", max_bytes: 2048 });
    const b = await task("v1-runs__b__s__run-1");
    expect(b.spec.payload.extensions).toEqual({
      "org.example.dataset": { revision: "2025-02" },
      "com.example.owner": { team: "evals" },
    });
    expect((await task("v1-runs__a__s__run-1")).spec.payload).toMatchObject({
      command: "echo a 1",
      artifact_paths: ["a.log"],
    });
    const admission = await task("v1-admission__alone__base__run-001");
    expect(admission.spec.execution_profile).toEqual({
      placement: "exclusive",
      resources: { cpu_millis: 1000, memory_mb: 2048, disk_mb: 256, gpu_count: 0 },
    });
  });

  it("register-worker-hosts takes the v1 inventory file and prints the Hub's JSON", async () => {
    const body = json(await loom("register-worker-hosts", join(FIXTURES, "inventory.json"), "--operator", "ops"));
    expect(body.ok).toBe(true);
    expect(body.registered.map((w: Json) => w.worker_id)).toEqual(["lab-small", "lab-medium", "lab-direct"]);
    expect(body.registered[2]).toMatchObject({
      connection_mode: "direct-worker-api",
      endpoint: { private_host: "172.16.0.23", command_port: 9877 },
      push_url: "http://172.16.0.23:9877",
    });
    const small = (await get(h.url, `${API}/workers/lab-small`, auth)).body;
    expect(JSON.parse(small.metadata.annotations["loom.dev/v1-fields"]).labels).toEqual({ rack: "r1-u07" });
  });
});

describe("v1 verbs", () => {
  // v1's Hub CLI, verb by verb, with each of its flags (every one also takes --controller and --controller-token-env).
  const V1: Record<string, string[]> = {
    "dispatch-smoke": ["--count", "--prefix", "--required-capability", "--operator", "--command", "--timeout-seconds"],
    "dispatch-repo-run": [
      "--repo-url",
      "--ref",
      "--depth",
      "--source-token-env",
      "--task-id",
      "--package-id",
      "--required-capability",
      "--priority",
      "--operator",
      "--command",
      "--artifact",
      "--env",
      "--timeout-seconds",
      "--materialize-timeout-seconds",
      "--continue-on-error",
      "--placement",
      "--cpu-millis",
      "--memory-mb",
      "--disk-mb",
      "--gpu-count",
      "--gpu-type",
    ],
    "dispatch-spec": ["--operator"],
    "dispatch-oracle": ["--execution-result-id", "--operator"],
    summary: ["--cursor"],
    "worker-capacity": [],
    "worker-cache": [],
    "task-admission": ["--task-id"],
    capabilities: [],
    "set-worker-concurrency": ["--worker-id", "--desired-concurrency", "--operator", "--reason"],
    "register-worker-hosts": ["--operator"],
    "retry-task": ["--task-id", "--operator", "--preserve-excluded-workers"],
    "push-task": ["--task-id", "--worker-id", "--operator", "--lease-seconds", "--push-timeout-seconds"],
  };

  it("every v1 verb exists and its help documents every v1 flag", async () => {
    // The program as `loom` builds it; one process per verb would cost half a second each.
    const program = await buildProgram(["node", "loom"]);
    for (const [verb, flags] of Object.entries(V1)) {
      const cmd = program.commands.find((c) => c.name() === verb);
      expect(cmd, verb).toBeDefined();
      const help = cmd!.helpInformation();
      for (const flag of [...flags, "--controller", "--controller-token-env"])
        expect(help, `${verb} ${flag}`).toMatch(new RegExp(`${flag}[ ,]`));
    }
    const one = await run(["summary", "--help"]);
    expect(one.stdout).toContain("--cursor <n>");
  });

  it("dispatch-repo-run: two --command flags are two steps, --gpu-type repeats, --env and --artifact land; the same second gives two tasks", async () => {
    const args = [
      "dispatch-repo-run",
      "--repo-url",
      "https://git.example.invalid/x.git",
      "--command",
      "make setup",
      "--command",
      "make eval",
      "--gpu-count",
      "1",
      "--gpu-type",
      "l4",
      "--gpu-type",
      "a100",
      "--env",
      "MODE=fast",
      "--env",
      "SEED=7",
      "--artifact",
      "out/**",
      "--depth",
      "3",
      "--ref",
      "main",
      "--source-token-env",
      "GIT_TOKEN",
      "--package-id",
      "pkg-x",
      "--operator",
      "ci",
      "--continue-on-error",
      "--materialize-timeout-seconds",
      "120",
    ];
    // Started together, so both land within the same second.
    const [a, b] = await Promise.all([loom(...args), loom(...args)]);
    const [ra, rb] = [json(a), json(b)];
    expect(ra.created).toHaveLength(1);
    expect(rb.created).toHaveLength(1);
    const ids = [ra.created[0].task_id, rb.created[0].task_id];
    expect(ids[0]).not.toBe(ids[1]);
    const t = (await get(h.url, `${API}/tasks/${ids[0]}`, auth)).body;
    expect(t.spec.payload.commands).toEqual([
      { name: "step-1", command: "make setup" },
      { name: "step-2", command: "make eval" },
    ]);
    expect(t.spec.execution_profile.resources).toEqual({ gpu_count: 1, gpu_types: ["a100", "l4"] });
    expect(t.spec.payload).toMatchObject({
      env: { MODE: "fast", SEED: "7" },
      artifact_paths: ["out/**"],
      continue_on_error: true,
      materialize_timeout_seconds: 120,
    });
    expect(t.spec.payload.source).toEqual({
      type: "git",
      url: "https://git.example.invalid/x.git",
      ref: "main",
      depth: 3,
      token_env: "GIT_TOKEN",
    });
    expect(t.spec.package_id).toBe("pkg-x");
  });

  it("dispatch-repo-run: a repeated --task-id is a clear conflict, exit 1, and nothing new is stored", async () => {
    const args = [
      "dispatch-repo-run",
      "--repo-url",
      "https://git.example.invalid/x.git",
      "--command",
      "true",
      "--task-id",
      "fixed-id",
    ];
    expect(json(await loom(...args)).created).toEqual([expect.objectContaining({ task_id: "fixed-id" })]);
    const before = (await get(h.url, `${API}/tasks`, auth)).body.items.length;
    const again = await loom(...args);
    expect(again.code).toBe(1);
    expect(again.stderr).toBe(
      'error: task_id_conflict: task "fixed-id" already exists (queued); nothing was dispatched. Omit --task-id for a fresh id, or choose another\n',
    );
    const changed = await loom(...args.slice(0, -4), "--command", "false", "--task-id", "fixed-id");
    expect(changed.code).toBe(1);
    expect(changed.stderr).toMatch(/^error: task_id_conflict: /);
    expect((await get(h.url, `${API}/tasks`, auth)).body.items.length).toBe(before);
  });

  it("summary prints one JSON document with v1's keys, each the Hub's own answer", async () => {
    const s = json(await loom("summary"));
    expect(Object.keys(s)).toEqual([
      "health",
      "worker_hosts",
      "workers",
      "worker_capacity",
      "worker_cache",
      "tasks",
      "results",
      "oracle_outcomes",
      "error_rate",
      "control_log",
    ]);
    expect(s.health.ok).toBe(true);
    expect(s.worker_hosts.hosts.map((x: Json) => x.worker_id)).toEqual(["lab-direct", "lab-medium", "lab-small"]);
    expect(s.worker_capacity).toEqual((await get(h.url, "/api/data/worker-capacity", auth)).body);
    expect(s.tasks.total).toBe((await get(h.url, "/api/tasks?limit=1", auth)).body.total);
    expect(s.error_rate.by).toBe("state");
    expect(s.error_rate.rows.find((r: Json) => r.bucket === "queued").total).toBeGreaterThan(0);
    expect(s.control_log.logs.length).toBeGreaterThan(0);
    expect(s.results).toEqual({ cursor: 0, next_cursor: 0, results: [] });
  });

  it("set-worker-concurrency --worker-id W --desired-concurrency N sets it and prints v1's JSON", async () => {
    const body = json(
      await loom(
        "set-worker-concurrency",
        "--worker-id",
        "lab-medium",
        "--desired-concurrency",
        "5",
        "--reason",
        "v1 script",
      ),
    );
    expect(body).toMatchObject({ ok: true, worker_id: "lab-medium", desired_concurrency: 5, max_concurrency: 24 });
    const cap = (await get(h.url, "/api/data/worker-capacity", auth)).body.workers.find(
      (w: Json) => w.worker_id === "lab-medium",
    );
    expect(cap.desired_concurrency).toBe(5);
  });

  it("capabilities, worker-cache, worker-capacity and task-admission print the Hub's JSON when piped", async () => {
    const [caps, cache, cap, adm, table] = await Promise.all([
      loom("capabilities"),
      loom("worker-cache"),
      loom("worker-capacity"),
      loom("task-admission", "--task-id", "v1-admission__alone__base__run-001"),
      loom("worker-capacity", "-o", "table"),
    ]);
    expect(json(caps)).toEqual((await get(h.url, "/api/meta", auth)).body);
    expect(json(cache).workers.map((w: Json) => w.worker_id)).toEqual(["lab-direct", "lab-medium", "lab-small"]);
    expect(json(cap)).toEqual((await get(h.url, "/api/data/worker-capacity", auth)).body);
    expect(json(adm).task_id).toBe("v1-admission__alone__base__run-001");
    expect(table.stdout).toMatch(/^WORKER\s+STATUS\s+ACTIVE\/LIMIT/);
  });

  it("dispatch-spec (from stdin), retry-task, push-task and dispatch-oracle map onto the Hub's API", async () => {
    const spec = JSON.stringify({ schema_version: 1, tasks: [{ task_id: "spec-1", payload: { runner: "noop" } }] });
    const created = json(
      await run(["dispatch-spec", "-", "--controller", h.url, "--controller-token-env", "V1_HUB_TOKEN"], spec),
    );
    expect(created.created).toEqual([expect.objectContaining({ task_id: "spec-1", state: "queued" })]);
    const retried = json(await loom("retry-task", "--task-id", "spec-1", "--operator", "ops"));
    expect(retried).toMatchObject({ ok: true, task_id: "spec-1", new_state: "retry_queued" });
    // lab-direct has no Runner behind it: the Hub says so, and the verb exits 1 with its reason.
    const push = await loom(
      "push-task",
      "--task-id",
      "spec-1",
      "--worker-id",
      "lab-direct",
      "--push-timeout-seconds",
      "10",
    );
    expect(push.code).toBe(1);
    expect(push.stderr).toMatch(/^error: \w+/);
    const oracle = await loom("dispatch-oracle", "--execution-result-id", "result-x", join(FIXTURES, "inventory.json"));
    expect(oracle.code).toBe(1);
    expect(oracle.stderr).toMatch(/^error: oracle_dispatch_not_supported: /);
  });
});

describe("v1 Runner flags", () => {
  it("loom runner --controller-token-env V --connection-mode poll registers, runs a dispatched task and exits", async () => {
    const smoke = json(
      await loom(
        "dispatch-smoke",
        "--prefix",
        "v1-smoke",
        "--required-capability",
        "v1-runner",
        "--command",
        "echo smoke",
      ),
    );
    expect(smoke.created.map((t: Json) => t.task_id)).toEqual(["v1-smoke-1"]);
    const r = await run([
      "runner",
      "--controller",
      h.url,
      "--controller-token-env",
      "V1_HUB_TOKEN",
      "--connection-mode",
      "poll",
      "--worker-id",
      "v1-runner",
      "--capability",
      "v1-runner",
      "--max-concurrency",
      "2",
      "--once",
      "--poll-seconds",
      "1",
      "--work-dir",
      join(dir, "runner"),
      "--source-cache-max-mb",
      "0",
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim().split("\n").at(-1)!)).toMatchObject({ worker_id: "v1-runner", completed: 1 });
    expect(r.stderr).toContain("mode prestarted");
    const t = (await get(h.url, `${API}/tasks/v1-smoke-1`, auth)).body;
    expect(t.status.state).toBe("clean");
    const w = (await get(h.url, `${API}/workers/v1-runner`, auth)).body;
    // v1's default initial concurrency is 1, whatever the max
    expect(w.status.registration).toMatchObject({ initial_concurrency: 1, max_concurrency: 2 });
  });
});
