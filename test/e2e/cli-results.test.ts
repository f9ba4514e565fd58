// A failed task as an operator meets it: `loom logs` prints the attempt's output from its
// result, `describe` says why it failed and with which exit code, and the result ZIPs can be
// listed and downloaded.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeZip } from "../../src/results/zip.ts";
import { eventually, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
type Run = { code: number; stdout: string; stderr: string };
let h: TestHub;
let dir: string;

/** Runs `loom`; what it has written to stderr so far can be read before it ends. */
const loom = (args: string[]): Promise<Run> & { stderr(): string } => {
  const env: NodeJS.ProcessEnv = { ...process.env, LOOM_CONTROLLER: h.url };
  delete env.LOOM_HUB_TOKEN;
  let stderrSoFar = "";
  const run = new Promise<Run>((resolve) => {
    const child = execFile(
      process.execPath,
      ["bin/loom.mjs", ...args],
      { cwd: ROOT, env, timeout: 60_000 },
      (e, stdout, stderr) => resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr }),
    );
    child.stderr!.on("data", (d) => (stderrSoFar += d));
  });
  return Object.assign(run, { stderr: () => stderrSoFar });
};

async function finish(task: string, exit: number, stdout: string, stderr: string) {
  const zip = await writeZip([
    {
      name: "worker-result.json",
      data: JSON.stringify({ task_id: task, exit_code: exit, verdict: exit === 0 ? "clean" : "run_error" }),
    },
    { name: "stdout.txt", data: stdout },
    { name: "stderr.txt", data: stderr },
  ]);
  const up = await fetch(`${h.url}/api/results/upload`, {
    method: "POST",
    headers: { "content-type": "application/zip", "x-task-id": task, "x-worker-id": "w1" },
    body: zip,
  });
  expect(up.status).toBe(201);
  const body = (await up.json()) as Record<string, unknown>;
  expect(
    (await post(h.url, "/api/tasks/complete", { worker_id: "w1", task_id: task, result: {}, upload: body })).status,
  ).toBe(200);
}

beforeAll(async () => {
  h = await startHub();
  dir = await mkdtemp(join(tmpdir(), "loom-cli-results-"));
  await post(h.url, "/api/workers/register", registerBody("w1"));
  await post(h.url, "/api/tasks/dispatch", {
    schema_version: 1,
    tasks: ["broken", "later"].map((task_id) => ({ task_id, required_capability: "", payload: { runner: "noop" } })),
  });
  expect((await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 2 })).body.tasks).toHaveLength(2);
  await finish(
    "broken",
    128,
    "cloning https://git.example/repo\n",
    "fatal: unable to access 'https://git.example/repo/': Could not resolve host: git.example\n",
  );
});
afterAll(async () => {
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("loom logs, describe, get results, result download", () => {
  it("shows the output, the failure reason and the exit code, and the ZIP", async () => {
    const zipFile = join(dir, "r.zip");
    const [logs, described, results, none] = await Promise.all([
      loom(["logs", "broken"]),
      loom(["describe", "task", "broken"]),
      loom(["get", "results"]),
      loom(["logs", "broken", "--attempt", "2"]),
    ]);
    expect(logs.code, logs.stderr).toBe(0);
    expect(logs.stdout).toBe(
      "cloning https://git.example/repo\nfatal: unable to access 'https://git.example/repo/': Could not resolve host: git.example\n",
    );
    expect(logs.stderr).toMatch(/broken attempt 1 on w1: run_error, exit code 128/);
    expect(described.code, described.stderr).toBe(0);
    expect(described.stdout).toMatch(/Exit Code:\s+128/);
    expect(described.stdout).toMatch(/Failure Reason:\s+\S+/);
    expect(described.stdout).toMatch(
      /Last Stderr Line:\s+fatal: unable to access .*Could not resolve host: git.example/,
    );
    expect(described.stdout).toMatch(/Logs:\s+loom logs broken --attempt 1/);
    expect(results.code, results.stderr).toBe(0);
    const [header, row] = results.stdout
      .trim()
      .split("\n")
      .map((l) => l.split(/\s+/));
    expect(header).toEqual(["RESULT", "TASK", "ATTEMPT", "WORKER", "VERDICT", "ISSUES", "BYTES", "AGE"]);
    expect(row.slice(1, 5)).toEqual(["broken", "1", "w1", "run_error"]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("attempt 2 of task broken has no result yet");

    const dl = await loom(["result", "download", row[0], "-o", zipFile]);
    expect(dl.code, dl.stderr).toBe(0);
    expect((await readFile(zipFile)).subarray(0, 2).toString()).toBe("PK");
  }, 120_000);

  it("logs -f follows the task's watch and prints the result once it is uploaded", async () => {
    const follow = loom(["logs", "later", "-f"]);
    await eventually(() => follow.stderr().includes("waiting for the result of later attempt 1"), "logs -f to wait");
    // It waits on a watch of the task, not by asking again and again.
    await eventually(
      async () => /^loom_watchers 1$/m.test(await (await fetch(`${h.url}/metrics`)).text()),
      "logs -f to open a watch",
    );
    await finish("later", 0, "done\n", "");
    const r = await follow;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe("done\n");
    expect(r.stderr).toContain("later attempt 1 on w1: clean, exit code 0");
  }, 120_000);
});
