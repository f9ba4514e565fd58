// The Hub's log as an operator reads it: in a pipe, JSON lines with ISO times where requests
// are debug and lifecycle events are info with the object's name; on a terminal, one short
// line per entry (--log-format chooses either way).
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventually, post, registerBody } from "../support/hub.ts";
import { stopTree } from "../support/processes.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
const children: ChildProcess[] = [];
const dirs: string[] = [];
afterEach(async () => {
  // script(1) runs the Hub in a session of its own: stop the whole tree, not script alone.
  for (const c of children.splice(0)) if (c.pid !== undefined) await stopTree(c.pid);
  for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
});

/** Without npm's variables: a Hub run by npm stops with its parent, which would hide a Hub the test left running. */
function hubEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, LOOM_HUB_TOKEN: "" };
  for (const k of Object.keys(env)) if (k.startsWith("npm_") || k === "LOOM_EXIT_WITH_PARENT") delete env[k];
  return env;
}

/** Start a Hub as `cmd` would, and collect what it writes to stdout. */
async function hub(argv: (port: number, dir: string) => [string, string[]]) {
  const dir = await mkdtemp(join(tmpdir(), "loom-logs-"));
  dirs.push(dir);
  const port = await freePort();
  const [file, args] = argv(port, dir);
  const child = spawn(file, args, { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], env: hubEnv() });
  children.push(child);
  const out = { text: "" };
  child.stdout.on("data", (d) => (out.text += d));
  child.stderr.resume();
  const url = `http://127.0.0.1:${port}`;
  await eventually(async () => (await fetch(url + "/livez")).ok, "the Hub to listen", 30_000);
  return { url, out };
}

describe("Hub logs", () => {
  it("in a pipe: JSON with ISO times, requests at debug, lifecycle events at info naming the object", async () => {
    const { url, out } = await hub((port, dir) => [
      process.execPath,
      ["bin/loom.mjs", "hub", "--port", String(port), "--data-dir", dir, "--log-level", "debug"],
    ]);
    expect((await post(url, "/api/workers/register", registerBody("log-worker"))).status).toBe(200);
    const lines = await eventually(() => {
      const ls = out.text
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, any>);
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

  // script(1) gives the Hub a pseudo-terminal as its stdout, 80 columns wide.
  const onTerminal =
    (flags: string) =>
    (port: number, dir: string): [string, string[]] => [
      "/usr/bin/script",
      [
        "-qfec",
        `stty cols 80; exec ${process.execPath} bin/loom.mjs hub --port ${port} --data-dir ${dir} ${flags}`,
        "/dev/null",
      ],
    ];
  // eslint-disable-next-line no-control-regex
  const visible = (l: string) => l.replace(/\x1b\[[0-9;]*m/g, "").replace(/\r$/, "");

  it.skipIf(!existsSync("/usr/bin/script"))(
    "on a terminal: one short line per entry, no JSON, cut to the terminal's width",
    async () => {
      const { url, out } = await hub(onTerminal(""));
      // A worker with a long name: its registration line is longer than 80 columns.
      const long = `tty-worker-${"x".repeat(60)}`;
      expect((await post(url, "/api/workers/register", registerBody("tty-worker"))).status).toBe(200);
      expect((await post(url, "/api/workers/register", registerBody(long))).status).toBe(200);
      const text = await eventually(
        () => out.text.includes("tty-worker:") && out.text.includes(long.slice(0, 40)) && out.text,
        "the registrations' log lines",
      );
      const lines = text.split("\n").map(visible).filter(Boolean);
      expect(lines.find((l) => l.includes("tty-worker:"))).toMatch(
        /^\d\d:\d\d:\d\d\.\d{3} INFO  worker tty-worker: Registered/,
      );
      const cut = lines.find((l) => l.includes(long.slice(0, 40)))!;
      expect(cut).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  worker tty-worker-x+/);
      expect(cut.endsWith("…")).toBe(true);
      // The log's lines (the start-up banner on stderr is not the log).
      for (const l of lines.filter((x) => /^\d\d:\d\d:/.test(x))) expect(l.length, l).toBeLessThanOrEqual(80);
      expect(lines.some((l) => l.trim().startsWith("{"))).toBe(false);
    },
    60_000,
  );

  it.skipIf(!existsSync("/usr/bin/script"))(
    "on a terminal with --log-format json: JSON lines",
    async () => {
      const { url, out } = await hub(onTerminal("--log-format json"));
      expect((await post(url, "/api/workers/register", registerBody("json-worker"))).status).toBe(200);
      const text = await eventually(() => out.text.includes("json-worker") && out.text, "the registration's log line");
      const line = text
        .split("\n")
        .map(visible)
        .find((l) => l.includes("json-worker"))!;
      expect(JSON.parse(line)).toMatchObject({ level: 30, kind: "Worker", name: "json-worker", reason: "Registered" });
    },
    60_000,
  );

  it("in a pipe with --log-format pretty: short lines", async () => {
    const { url, out } = await hub((port, dir) => [
      process.execPath,
      ["bin/loom.mjs", "hub", "--port", String(port), "--data-dir", dir, "--log-format", "pretty"],
    ]);
    expect((await post(url, "/api/workers/register", registerBody("pipe-worker"))).status).toBe(200);
    const text = await eventually(() => out.text.includes("pipe-worker") && out.text, "the registration's log line");
    expect(text.split("\n").find((l) => l.includes("pipe-worker"))).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO  worker pipe-worker: Registered/,
    );
  }, 60_000);

  it("--log-format refuses what it does not know, naming the choices", async () => {
    const r = spawnSync(process.execPath, ["bin/loom.mjs", "hub", "--log-format", "xml"], {
      cwd: ROOT,
      encoding: "utf8",
    });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/--log-format.*xml.*auto, pretty, json/s);
  });
});
