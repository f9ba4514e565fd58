// Stopping what npm started. npm, stopped by SIGTERM, exits without passing the signal to
// the script it runs; the quick start and a Hub under `npm run hub` notice that their parent
// is gone and stop, the quick start with its Runners. A quick start that is killed outright
// leaves no Runner behind either: each stops once its parent is gone.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { eventually } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
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
/** The processes below `pid`, found by parent pid (pgrep -P). */
const descendants = (pid: number): number[] => {
  let kids: number[];
  try {
    kids = execFileSync("pgrep", ["-P", String(pid)], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map(Number);
  } catch {
    return []; // pgrep exits 1 when there are none
  }
  return kids.flatMap((k) => [k, ...descendants(k)]);
};

const started: number[] = [];
const dirs: string[] = [];
afterAll(async () => {
  for (const pid of started) if (alive(pid)) process.kill(pid, "SIGKILL");
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function launch(
  file: string,
  args: string[],
): Promise<{ child: ChildProcess; said: () => string; port: number }> {
  const dir = await mkdtemp(join(tmpdir(), "loom-signals-"));
  dirs.push(dir);
  const port = await freePort();
  const child = spawn(file, [...args, "--port", String(port), "--data-dir", dir], {
    cwd: ROOT,
    stdio: ["ignore", "ignore", "pipe"],
  });
  started.push(child.pid!);
  let text = "";
  child.stderr.on("data", (d) => (text += d));
  return { child, said: () => text, port };
}

const runnerPids = (text: string) => [...text.matchAll(/runner \S+ started \(pid (\d+)\)/g)].map((m) => Number(m[1]));

describe("stopping what npm started", () => {
  it("SIGTERM to npm alone stops the quick start and its Runners", async () => {
    const { child, said } = await launch("npm", ["start", "--", "--step-ms", "150"]);
    await eventually(() => runnerPids(said()).length === 2, "both Runners to start", 60_000);
    const below = descendants(child.pid!);
    started.push(...below, ...runnerPids(said()));
    const all = [...new Set([...below, ...runnerPids(said())])];
    expect(all.length).toBeGreaterThanOrEqual(3); // the quick start (maybe under sh) and two Runners
    child.kill("SIGTERM"); // npm only: nothing else is signalled
    await eventually(
      () => all.every((p) => !alive(p)),
      `the quick start and its Runners to exit (${all.join(", ")})`,
      30_000,
    );
  }, 120_000);

  it("a quick start killed outright leaves no Runner behind", async () => {
    const { child, said } = await launch(process.execPath, ["bin/loom.mjs", "quickstart", "--step-ms", "150"]);
    await eventually(() => runnerPids(said()).length === 2, "both Runners to start", 60_000);
    const runners = runnerPids(said());
    started.push(...runners);
    child.kill("SIGKILL");
    // A task stopped mid-way may first try, and fail, to report to the Hub that went with the quick start.
    await eventually(() => runners.every((p) => !alive(p)), "the Runners to exit", 60_000).catch((e) => {
      console.log(
        execFileSync("ps", ["-o", "pid,ppid,stat,etime,cmd", "-p", [...runners, child.pid].join(",")], {
          encoding: "utf8",
        }),
      );
      throw e;
    });
  }, 120_000);

  it("SIGTERM to npm alone stops a Hub run by `npm run hub`", async () => {
    const { child, said, port } = await launch("npm", ["run", "hub", "--"]);
    await eventually(() => said().includes("listening on"), "the Hub to listen", 60_000);
    const below = descendants(child.pid!);
    started.push(...below);
    child.kill("SIGTERM");
    await eventually(() => below.every((p) => !alive(p)), "the Hub to exit", 30_000);
    await expect(fetch(`http://127.0.0.1:${port}/livez`)).rejects.toThrow();
  }, 120_000);
});
