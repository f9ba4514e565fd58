// The quick start as a new user runs it (npm start = loom quickstart): a Hub with the
// examples and local Runners; the runnable tasks finish, the unfitting one is explained,
// and Ctrl-C stops everything.
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
const freePort = () => new Promise<number>((res) => { const s = createServer().listen(0, "127.0.0.1", () => { const p = (s.address() as { port: number }).port; s.close(() => res(p)); }); });
const alive = (pid: number) => { try { process.kill(pid, 0); return true; } catch { return false; } };

let child: ChildProcess | undefined;
let dir = "";
afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("npm start (loom quickstart)", () => {
  it("runs the example campaign, explains the task that fits nowhere, and shuts down cleanly", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-quickstart-"));
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    child = spawn(process.execPath, ["bin/loom.mjs", "quickstart", "--port", String(port), "--data-dir", dir], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"] });
    let err = "";
    child.stderr!.on("data", (d) => (err += d));
    child.stdout!.resume();
    const prefix = "loom-resource-admission__";
    const tasks = await eventually(async () => {
      const r = await get(url, "/api/tasks");
      const byId = Object.fromEntries((r.body?.tasks ?? []).map((t: { task_id: string; state: string }) => [t.task_id, t.state]));
      return byId[`${prefix}full-host__baseline__run-001`] === "clean" && byId[`${prefix}long-context__baseline__run-001`] === "clean" && byId;
    }, "the runnable example tasks to finish clean", 60_000);
    expect(tasks[`${prefix}oversized__baseline__run-001`]).toBe("queued");
    expect(err).toContain(`web view: ${url}/ui/`);

    const describe = await run(process.execPath, ["bin/loom.mjs", "describe", "task", `${prefix}oversized__baseline__run-001`, "--controller", url], { cwd: ROOT });
    expect(describe.stdout).toMatch(/Unsatisfiable\s+True\s+exceeds_worker_capacity/);
    expect(describe.stdout).toMatch(/evaluation-01\s+false\s+exceeds_worker_capacity\s+cpu_millis 16000\/4000, memory_mb 65536\/6144/);

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
      const qs = spawn(process.execPath, ["bin/loom.mjs", "quickstart", "--reset", "--no-runners", "--port", String(port), "--data-dir", d], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
      let said = "";
      qs.stderr!.on("data", (c) => (said += c));
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
