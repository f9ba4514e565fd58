import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readZip } from "../../src/results/zip.ts";
import { executeTask, taskDirName, type ClaimedTask } from "../../src/runner/execute.ts";

let tmp: string;
let work: string;
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-exec-"));
  work = path.join(tmp, "work");
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const task = (payload: Record<string, unknown>, extra: Partial<ClaimedTask> = {}): ClaimedTask => ({
  task_id: "demo__case-a__base__run-1",
  task_kind: "run",
  attempt_no: 1,
  assigned_worker_id: "w1",
  case_id: "case-a",
  run_id: "1",
  setting_id: "base",
  package_id: "pkg-demo",
  payload,
  controller_concurrency: {
    desired_concurrency: 1,
    max_concurrency: 2,
    resource_admission: { ok: true, requested: { cpu_millis: 500 } },
    claim_batch_id: "b1",
    claim_batch_size: 1,
  },
  ...extra,
});

async function run(t: ClaimedTask, opts: { signal?: AbortSignal; baseEnv?: NodeJS.ProcessEnv } = {}) {
  const out = await executeTask(t, { workDir: work, workerId: "w1", killGraceMs: 300, ...opts });
  const zip = await readZip(readFileSync(out.zipPath));
  const text = (n: string) => zip.get(n)?.toString("utf8");
  return { out, zip, text, json: (n: string) => JSON.parse(text(n)!) };
}

/** Gone, or a zombie waiting to be reaped by init: either way it no longer runs. */
const running = (pid: number) => {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
};
async function stopsRunning(pid: number, ms = 3000): Promise<boolean> {
  const end = Date.now() + ms;
  while (running(pid)) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 25));
  }
  return true;
}

describe("noop runner", () => {
  it("is the default and packs task.json, worker-result.json, stdout.txt, stderr.txt", async () => {
    const t = task({});
    const { out, zip, json } = await run(t);
    expect(out.zipPath).toBe(path.join(work, t.task_id, "attempt-001.zip"));
    expect([...zip.keys()]).toEqual(["task.json", "worker-result.json", "stdout.txt", "stderr.txt"]);
    expect(json("task.json")).toEqual(t);
    const wr = json("worker-result.json");
    expect(wr).toMatchObject({
      task_id: t.task_id,
      attempt_no: 1,
      worker_id: "w1",
      exit_code: 0,
      verdict: "clean",
      runner: "noop",
    });
    expect(wr.controller_concurrency).toEqual(t.controller_concurrency);
    expect(wr.resource_admission).toEqual({ ok: true, requested: { cpu_millis: 500 } });
    expect(wr.resource_capacity).toHaveProperty("cpu_count");
    expect(wr.resource_usage).toHaveProperty("duration_seconds");
    expect(wr.started_at).toMatch(/\+00:00$/);
  });

  it("an unknown runner exits 2", async () => {
    const { json, text } = await run(task({ runner: "quantum" }));
    expect(json("worker-result.json")).toMatchObject({ exit_code: 2, verdict: "run_error" });
    expect(text("stderr.txt")).toContain("unsupported runner: quantum");
  });
});

describe("shell runner", () => {
  it("runs payload.command through /bin/sh and captures output", async () => {
    const { json, text } = await run(task({ runner: "shell", command: "echo out; echo err >&2; pwd" }));
    expect(json("worker-result.json")).toMatchObject({ exit_code: 0, verdict: "clean", runner: "shell" });
    expect(text("stdout.txt")).toMatch(/^out\n.*attempt-001\n$/);
    expect(text("stderr.txt")).toBe("err\n");
  });

  it("a non-zero exit is run_error, not an exception", async () => {
    const { json } = await run(task({ runner: "shell", command: "exit 7" }));
    expect(json("worker-result.json")).toMatchObject({ exit_code: 7, verdict: "run_error" });
  });

  it("sets the LOOM_* environment, which payload.env cannot override, and hides the tokens", async () => {
    const t = task(
      {
        runner: "shell",
        command: "env | grep -E '^(LOOM_|MY_)' | sort",
        env: { MY_VAR: "mine", LOOM_TASK_ID: "spoofed" },
        normalized: { campaign_id: "demo" },
      },
      { attempt_no: 3 },
    );
    const { text } = await run(t, {
      baseEnv: { ...process.env, LOOM_HUB_TOKEN: "secret-hub", LOOM_RUNNER_TOKEN: "secret-runner" },
    });
    const env = Object.fromEntries(
      text("stdout.txt")!
        .trim()
        .split("\n")
        .map((l) => l.split(/=(.*)/s).slice(0, 2)),
    );
    expect(env).toMatchObject({
      LOOM_TASK_ID: t.task_id,
      LOOM_ATTEMPT_NO: "3",
      LOOM_WORKER_ID: "w1",
      LOOM_CAMPAIGN_ID: "demo",
      LOOM_CASE_ID: "case-a",
      LOOM_RUN_ID: "1",
      LOOM_SETTING_ID: "base",
      LOOM_TASK_KIND: "run",
      MY_VAR: "mine",
    });
    expect(env.LOOM_HUB_TOKEN).toBeUndefined();
    expect(env.LOOM_RUNNER_TOKEN).toBeUndefined();
  });

  it("a timeout exits 124 and kills the whole process tree", async () => {
    const pidFile = path.join(tmp, "bg.pid");
    const started = Date.now();
    const { json, text } = await run(
      task({ runner: "shell", command: `sleep 60 & echo $! > ${pidFile}; sleep 60`, timeout_seconds: 1 }),
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(json("worker-result.json")).toMatchObject({ exit_code: 124, verdict: "run_error", timed_out: true });
    expect(text("stderr.txt")).toContain("timeout after 1 seconds");
    const bg = Number(readFileSync(pidFile, "utf8"));
    expect(bg).toBeGreaterThan(0);
    expect(await stopsRunning(bg)).toBe(true);
  });

  it("samples CPU and memory of the child tree from /proc", async () => {
    if (process.platform !== "linux") return;
    const { json } = await run(
      task({ runner: "shell", command: "end=$(($(date +%s) + 2)); while [ $(date +%s) -lt $end ]; do :; done" }),
    );
    const u = json("worker-result.json").resource_usage;
    expect(u.measurement_source).toBe("proc_sampled");
    expect(u.cpu_seconds).toBeGreaterThan(0);
    expect(u.max_rss_mb).toBeGreaterThan(0);
  });

  it("stopping through the signal kills the tree and records why", async () => {
    const ac = new AbortController();
    setTimeout(() => ac.abort("lease_lost: lease_worker_mismatch"), 300);
    const { json, text } = await run(task({ runner: "shell", command: "sleep 60" }), { signal: ac.signal });
    expect(json("worker-result.json")).toMatchObject({ exit_code: 143, stopped: "lease_lost: lease_worker_mismatch" });
    expect(text("stderr.txt")).toContain("stopped: lease_lost");
  });

  it("keeps task ids that are not plain slugs inside the work dir", () => {
    for (const id of ["a/../../b", "..", ".", "/etc/passwd", "x\\..\\y"]) {
      const name = taskDirName(id);
      expect(name).not.toMatch(/[\\/]/);
      expect([".", ".."]).not.toContain(name);
      expect(path.dirname(path.join(work, name))).toBe(work);
    }
    expect(taskDirName("a/b")).not.toBe(taskDirName("a-b")); // distinct ids keep distinct dirs
    expect(taskDirName("ok.id-1")).toBe("ok.id-1");
  });
});

describe("repo runner", () => {
  let repo: string;
  let first: string;
  beforeAll(() => {
    repo = path.join(tmp, "src-repo");
    mkdirSync(repo);
    const git = (...args: string[]) =>
      execFileSync("git", ["-c", "user.email=t@example.com", "-c", "user.name=t", ...args], {
        cwd: repo,
        encoding: "utf8",
      }).trim();
    git("init", "-q");
    writeFileSync(path.join(repo, "version.txt"), "one\n");
    mkdirSync(path.join(repo, "sub"));
    writeFileSync(path.join(repo, "sub", "tool.sh"), "echo tool-in-sub\n");
    git("add", ".");
    git("commit", "-qm", "first");
    first = git("rev-parse", "HEAD");
    writeFileSync(path.join(repo, "version.txt"), "two\n");
    git("commit", "-qam", "second");
  });

  it("clones a git source at a commit, runs phases in order with continue_on_error, and packs artifacts", async () => {
    const t = task({
      runner: "repo",
      source: { type: "git", url: repo, commit: first },
      artifact_paths: ["out/**", "version.txt", "missing/*.txt"],
      phases: [
        {
          name: "build",
          command:
            "mkdir -p out/logs && cp version.txt out/v.txt && echo $LOOM_PHASE_NAME:$LOOM_PHASE_INDEX:$STAGE > out/logs/env.txt",
          env: { STAGE: "b" },
        },
        { name: "flaky", command: "echo flaky-failed >&2; exit 3", continue_on_error: true },
        { name: "in-sub", command: "sh", args: ["tool.sh"], cwd: "sub" },
        { name: "hard-fail", command: "exit 5" },
        { name: "never", command: "touch out/never.txt" },
      ],
    });
    const { json, text, zip } = await run(t);
    const wr = json("worker-result.json");
    expect(wr).toMatchObject({
      runner: "repo",
      exit_code: 5,
      verdict: "run_error",
      phase_result_path: "phase-results.json",
    });

    const src = json("source-summary.json");
    expect(src).toMatchObject({ ok: true, type: "git", commit: first });

    const pr = json("phase-results.json");
    expect(pr).toMatchObject({ schema_version: 1, task_id: t.task_id, attempt_no: 1 });
    expect(pr.phases.map((p: { name: string; exit_code: number }) => [p.name, p.exit_code])).toEqual([
      ["01-build", 0],
      ["02-flaky", 3],
      ["03-in-sub", 0],
      ["04-hard-fail", 5],
    ]);
    expect(pr.phases[2]).toMatchObject({
      cwd: "sub",
      phase: "in-sub",
      phase_index: 3,
      stdout_path: "03-in-sub.stdout.txt",
    });
    expect(pr.phases[0].resource_usage).toHaveProperty("duration_seconds");
    expect(text("03-in-sub.stdout.txt")).toBe("tool-in-sub\n");
    expect(text("02-flaky.stderr.txt")).toBe("flaky-failed\n");

    // checked out at the first commit, not the branch head
    expect(text("artifacts/version.txt")).toBe("one\n");
    expect(text("artifacts/out/logs/env.txt")).toBe("build:1:b\n");
    const manifest = json("artifact-manifest.json");
    expect(manifest.schema_version).toBe(1);
    const sha = (s: string) => createHash("sha256").update(s).digest("hex");
    expect(manifest.artifacts).toEqual(
      expect.arrayContaining([
        { path: "out/v.txt", bytes: 4, sha256: sha("one\n") },
        { path: "out/logs/env.txt", bytes: 10, sha256: sha("build:1:b\n") },
        { path: "version.txt", bytes: 4, sha256: sha("one\n") },
      ]),
    );
    expect(manifest.artifacts).toHaveLength(3);
    for (const a of manifest.artifacts) expect(zip.get(`artifacts/${a.path}`)!.length).toBe(a.bytes);
    // no workspace in the ZIP
    expect([...zip.keys()].some((k) => k.startsWith("workspace/"))).toBe(false);
  });

  it("copies a local source, leaving .git out", async () => {
    const { json, text } = await run(
      task({
        runner: "repo",
        source_descriptor: { type: "local", path: repo },
        commands: ["cat version.txt", "test ! -e .git"],
      }),
    );
    expect(json("worker-result.json")).toMatchObject({ exit_code: 0, verdict: "clean" });
    expect(json("source-summary.json")).toMatchObject({ ok: true, type: "local", path: repo });
    expect(text("01-command-01.stdout.txt")).toBe("two\n");
  });

  it("a source that cannot be materialised exits 2 without running phases", async () => {
    const { json } = await run(
      task({
        runner: "repo",
        source: { type: "git", url: path.join(tmp, "no-such-repo") },
        phases: [{ name: "x", command: "true" }],
      }),
    );
    expect(json("worker-result.json")).toMatchObject({ exit_code: 2, verdict: "run_error" });
    expect(json("source-summary.json")).toMatchObject({ ok: false, failure: "git_clone_failed" });
    expect(json("phase-results.json").phases).toEqual([]);
  });

  it("a phase cwd outside the workspace is refused", async () => {
    const { json, text } = await run(
      task({ runner: "repo", source: { path: repo }, phases: [{ name: "x", command: "true", cwd: "../.." }] }),
    );
    expect(json("worker-result.json")).toMatchObject({ exit_code: 2 });
    expect(text("stderr.txt")).toMatch(/must be relative and stay inside the workspace/);
  });

  it("a retry of the same attempt starts from a clean directory", async () => {
    const t = task({ runner: "shell", command: "ls" }, { task_id: "retry-me" });
    await run(task({ runner: "shell", command: "touch leftover" }, { task_id: "retry-me" }));
    const { text } = await run(t);
    expect(text("stdout.txt")).not.toContain("leftover");
  });
});
