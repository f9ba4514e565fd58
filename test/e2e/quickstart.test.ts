// The quick start as a new user runs it (npm start = loom quickstart): a Hub with the
// examples and local Runners; tasks wait on resources, then run and finish, keeping their
// worker; the unfitting one is explained; and Ctrl-C stops everything. Task steps are cut
// from a second to 400 ms (--step-ms), so the campaign takes seconds, not half a minute, and
// a task that waits behind another waits past the 2 s an Admitted swing must hold before
// the conditions pass records it.
import { spawn, execFile, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { eventually, get } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const run = promisify(execFile);
const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

let child: ChildProcess | undefined;
let dir = "";
afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("npm start (loom quickstart)", () => {
  it("runs the example campaign with tasks waiting on resources, explains the task that fits nowhere, and shuts down cleanly", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-quickstart-"));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    child = spawn(
      process.execPath,
      ["bin/loom.mjs", "quickstart", "--port", String(port), "--data-dir", dir, "--step-ms", "400"],
      { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] },
    );
    let err = "";
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.resume();
    const prefix = "loom-resource-admission__";
    const oversized = `${prefix}oversized__baseline__run-001`;
    // Every task but the oversized one finishes clean; the campaign has more than the workers hold at once.
    const tasks = await eventually(
      async () => {
        const r = await get(url, "/api/tasks");
        const byId: Record<string, string> = Object.fromEntries(
          (r.body?.tasks ?? []).map((t: { task_id: string; state: string }) => [t.task_id, t.state]),
        );
        const others = Object.entries(byId).filter(([id]) => id !== oversized);
        return others.length >= 6 && others.every(([, st]) => st === "clean") && byId;
      },
      "the runnable example tasks to finish clean",
      90_000,
    );
    expect(tasks[oversized]).toBe("queued");
    expect(err).toContain(`web view: ${url}/ui/`);

    // Some of them waited on a worker's resources first: a NotAdmitted Event says which reason held them back.
    const WAITING = [
      "resource_reservation_unavailable",
      "worker_concurrency_reached",
      "worker_has_exclusive_task",
      "exclusive_worker_busy",
    ];
    const events = (await get(url, "/apis/loom.dev/v1alpha1/events")).body.items as {
      involvedObject: { name: string };
      reason: string;
      message: string;
    }[];
    const waited = events.filter(
      (e) =>
        e.reason === "NotAdmitted" &&
        tasks[e.involvedObject.name] === "clean" &&
        WAITING.includes(e.message.split(":")[0]),
    );
    expect(waited.length, JSON.stringify(events.filter((e) => e.reason === "NotAdmitted"))).toBeGreaterThan(0);

    // Finished tasks keep the worker that ran them in the WORKER column.
    const listed = await run(process.execPath, ["bin/loom.mjs", "get", "tasks", "--controller", url], { cwd: ROOT });
    const rows = listed.stdout
      .trim()
      .split("\n")
      .map((l) => l.split(/\s{2,}/));
    const col = rows[0].indexOf("WORKER");
    const cleanRows = rows.slice(1).filter((r) => tasks[r[0]] === "clean");
    expect(cleanRows.length).toBe(Object.values(tasks).filter((st) => st === "clean").length);
    for (const r of cleanRows) expect(r[col], r.join(" | ")).toMatch(/^evaluation-0[12]$/);

    const describe = await run(
      process.execPath,
      ["bin/loom.mjs", "describe", "task", `${prefix}oversized__baseline__run-001`, "--controller", url],
      { cwd: ROOT },
    );
    expect(describe.stdout).toMatch(/Unsatisfiable\s+True\s+exceeds_worker_capacity/);
    expect(describe.stdout).toMatch(
      /evaluation-01\s+false\s+exceeds_worker_capacity\s+cpu_millis 16000\/4000, memory_mb 65536\/6144/,
    );

    const pids = [...err.matchAll(/runner (\S+) started \(pid (\d+)\)/g)].map((m) => Number(m[2]));
    expect(pids).toHaveLength(2);
    const exited = new Promise<number | null>((res) => child!.once("exit", (code) => res(code)));
    child.kill("SIGINT");
    expect(await exited).toBe(0);
    await eventually(() => pids.every((p) => !alive(p)), "every Runner to exit", 20_000);
  }, 120_000);

  it("--reset starts clean (only the quick start's own folders go) and says how to reach the CLI", async () => {
    const d = await mkdtemp(join(tmpdir(), "loom-quickstart-reset-"));
    try {
      await mkdir(join(d, "hub"), { recursive: true });
      await writeFile(join(d, "hub", "old-state"), "x");
      await writeFile(join(d, "keep-me"), "x");
      const port = await freePort();
      const qs = spawn(
        process.execPath,
        ["bin/loom.mjs", "quickstart", "--reset", "--no-runners", "--port", String(port), "--data-dir", d],
        { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] },
      );
      let said = "";
      qs.stderr.on("data", (c) => (said += c));
      await eventually(() => said.includes("Ctrl-C stops everything"), "the quick start's hints", 60_000);
      expect(existsSync(join(d, "hub", "old-state"))).toBe(false);
      expect(existsSync(join(d, "keep-me"))).toBe(true);
      expect(said).toMatch(/the CLI: node bin\/loom\.mjs \(or `npm link` once, then `loom`\)/);
      expect(said).toContain("npm start -- --reset");
      const exited = new Promise<number | null>((res) => qs.once("exit", (code) => res(code)));
      qs.kill("SIGINT");
      expect(await exited).toBe(0);
    } finally {
      await rm(d, { recursive: true, force: true });
    }
  }, 90_000);
});
