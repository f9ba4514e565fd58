// The Hub's log as an operator reads it: in a pipe, JSON lines with ISO times where requests
// are debug and lifecycle events are info with the object's name; on a terminal, pino-pretty.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventually, post, registerBody } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const freePort = () => new Promise<number>((res) => { const s = createServer().listen(0, "127.0.0.1", () => { const p = (s.address() as { port: number }).port; s.close(() => res(p)); }); });
const children: ChildProcess[] = [];
const dirs: string[] = [];
/**
 * Kill every process whose command line names `arg` (a Hub's own data dir): script(1) runs
 * the Hub in a session of its own, so killing script or its process group leaves it running.
 */
function killNaming(arg: string): void {
  for (const pid of readdirSync("/proc").filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").includes(arg)) process.kill(Number(pid), "SIGKILL");
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
}

afterEach(async () => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill("SIGKILL");
  for (const d of dirs.splice(0)) {
    killNaming(d);
    await rm(d, { recursive: true, force: true });
  }
});

/** Start a Hub as `cmd` would, and collect what it writes to stdout. */
async function hub(argv: (port: number, dir: string) => [string, string[]]) {
  const dir = await mkdtemp(join(tmpdir(), "loom-logs-"));
  dirs.push(dir);
  const port = await freePort();
  const [file, args] = argv(port, dir);
  const child = spawn(file, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOOM_HUB_TOKEN: "" } });
  children.push(child);
  const out = { text: "" };
  child.stdout!.on("data", (d) => (out.text += d));
  child.stderr!.resume();
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(url + "/livez")).ok, "the Hub to listen", 30_000);
  return { url, out };
}

describe("Hub logs", () => {
  it("in a pipe: JSON with ISO times, requests at debug, lifecycle events at info naming the object", async () => {
    const { url, out } = await hub((port, dir) => [process.execPath, ["bin/loom.mjs", "hub", "--port", String(port), "--data-dir", dir, "--log-level", "debug"]]);
    expect((await post(url, "/api/workers/register", registerBody("log-worker"))).status).toBe(200);
    const lines = await eventually(() => {
      const ls = out.text.split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>);
      return ls.some((l) => l.name === "log-worker") && ls.some((l) => l.url === "/api/workers/register") && ls;
    }, "the registration's log lines");
    for (const l of lines) expect(l.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const requests = lines.filter((l) => l.msg === "request");
    expect(requests.length).toBeGreaterThan(0);
    expect(requests.every((l) => l.level === 20)).toBe(true); // debug
    expect(lines.some((l) => /incoming request|request completed/.test(l.msg))).toBe(false);
    const registered = lines.find((l) => l.name === "log-worker")!;
    expect(registered).toMatchObject({ level: 30, kind: "Worker", reason: "Registered" });
    expect(registered.msg).toContain("worker log-worker: Registered");
  }, 60_000);

  it.skipIf(!existsSync("/usr/bin/script"))("on a terminal: human-readable lines from pino-pretty", async () => {
    // script(1) gives the Hub a pseudo-terminal as its stdout.
    const { url, out } = await hub((port, dir) => ["/usr/bin/script", ["-qfec", `${process.execPath} bin/loom.mjs hub --port ${port} --data-dir ${dir}`, "/dev/null"]]);
    expect((await post(url, "/api/workers/register", registerBody("tty-worker"))).status).toBe(200);
    const text = await eventually(() => out.text.includes("tty-worker") && out.text, "the registration's log line");
    const line = text.split("\n").find((l) => l.includes("tty-worker"))!;
    expect(line).toMatch(/\[\d\d:\d\d:\d\d\.\d{3}\]/);
    expect(line).toContain("INFO");
    expect(line.trim().startsWith("{")).toBe(false);
  }, 60_000);
});
