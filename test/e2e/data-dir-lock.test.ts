// One `loom hub` per --data-dir: a second one exits with an error naming the holder's pid. The
// lock is released by the kernel when its holder dies, so neither a zombie left by a SIGKILLed
// process group nor a pid file naming some unrelated live process keeps a Hub from starting.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const HUB_ARGS = (dir: string) => ["hub", "--data-dir", dir, "--port", "0", "--log-level", "silent"];
const children: ChildProcess[] = [];
const groups: number[] = [];
const dirs: string[] = [];
const alive = (c: ChildProcess) => c.exitCode === null && c.signalCode === null;
afterEach(async () => {
  for (const g of groups.splice(0)) {
    try {
      process.kill(-g, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const c of children.splice(0)) if (alive(c)) c.kill("SIGKILL");
});
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function dataDir(): Promise<string> {
  const d = await mkdtemp(join(tmpdir(), "loom-lock-"));
  dirs.push(d);
  return d;
}

type Started = { child: ChildProcess; listening: boolean; code: number | null; err: string };

/** Resolves once `child` says it listens (with its stderr so far) or exits (with its code). */
function untilListening(child: ChildProcess): Promise<Started> {
  children.push(child);
  let err = "";
  return new Promise((resolve) => {
    child.stderr!.on("data", (d) => {
      err += d;
      if (err.includes("listening on")) resolve({ child, listening: true, code: null, err });
    });
    child.once("exit", (code) => resolve({ child, listening: false, code, err }));
  });
}

const hub = (dir: string) =>
  untilListening(
    spawn(process.execPath, ["bin/loom.mjs", ...HUB_ARGS(dir)], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] }),
  );

/** The process state letter from /proc (Z for a zombie), or undefined once it is reaped. */
function procState(pid: number): string | undefined {
  try {
    return /\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, "utf8"))?.[1];
  } catch {
    return undefined;
  }
}

async function stop(s: Started): Promise<void> {
  const stopped = new Promise<number | string | null>((r) => s.child.once("exit", (c, sig) => r(c ?? sig)));
  s.child.kill("SIGTERM");
  expect(await stopped).toBe(0);
}

describe("loom hub --data-dir lock", () => {
  it("refuses a second Hub naming the holder's pid, and is free again once the holder is SIGKILLed", async () => {
    const dir = await dataDir();
    const first = await hub(dir);
    expect(first.listening, first.err).toBe(true);
    const second = await hub(dir);
    expect(second.listening).toBe(false);
    expect(second.code).toBe(1);
    expect(second.err).toContain(`in use by another loom hub (pid ${first.child.pid})`);

    const gone = new Promise((r) => first.child.once("exit", r));
    first.child.kill("SIGKILL");
    await gone;
    expect(existsSync(join(dir, "hub.lock"))).toBe(true); // the pid file is left behind by the kill
    const third = await hub(dir);
    expect(third.listening, third.err).toBe(true);
    await stop(third);
    expect(existsSync(join(dir, "hub.lock"))).toBe(false); // a clean stop removes it
  }, 60_000);

  it("comes up after its whole process group, started as the README does (npx → sh → node), is SIGKILLed", async () => {
    const dir = await dataDir();
    const npx = spawn("npx", ["loom", ...HUB_ARGS(dir)], {
      cwd: ROOT,
      stdio: ["ignore", "ignore", "pipe"],
      detached: true,
    });
    groups.push(npx.pid!);
    const first = await untilListening(npx);
    expect(first.listening, first.err).toBe(true);
    const hubPid = Number(readFileSync(join(dir, "hub.lock"), "utf8"));
    expect(hubPid).not.toBe(npx.pid); // the Hub is a grandchild, not npx itself
    process.kill(-npx.pid!, "SIGKILL");
    await new Promise((r) => (alive(npx) ? npx.once("exit", r) : r(null)));
    // On a machine whose init reaps orphans the Hub is gone; on one that does not, it stays a
    // zombie (the next test makes one for certain). Either way the next Hub must come up.
    const again = await hub(dir);
    expect(again.listening, `${again.err} (old Hub pid ${hubPid}: state ${procState(hubPid) ?? "reaped"})`).toBe(true);
    await stop(again);
  }, 90_000);

  it("comes up while the SIGKILLed Hub is a zombie its parent never reaps", async () => {
    const dir = await dataDir();
    // `sleep` inherits the Hub as its child and never waits for it.
    const parent = spawn(
      "sh",
      ["-c", `"$0" bin/loom.mjs ${HUB_ARGS(dir).join(" ")} & echo $!; exec sleep 600`, process.execPath],
      {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      },
    );
    groups.push(parent.pid!);
    const pidLine = new Promise<number>((r) => parent.stdout.once("data", (d) => r(Number(String(d).trim()))));
    const first = await untilListening(parent);
    expect(first.listening, first.err).toBe(true);
    const hubPid = await pidLine;
    expect(Number(readFileSync(join(dir, "hub.lock"), "utf8"))).toBe(hubPid);
    process.kill(hubPid, "SIGKILL");
    for (let i = 0; i < 100 && procState(hubPid) !== "Z"; i++) await new Promise((r) => setTimeout(r, 50));
    expect(procState(hubPid)).toBe("Z");
    process.kill(hubPid, 0); // what a pid file check would see: the zombie "exists"

    const again = await hub(dir);
    expect(again.listening, again.err).toBe(true);
    expect(procState(hubPid)).toBe("Z"); // still there, and it held nothing
    await stop(again);
  }, 60_000);

  it("comes up when the pid file names a live process that is not a Hub (a reused pid)", async () => {
    const dir = await dataDir();
    writeFileSync(join(dir, "hub.lock"), `${process.pid}\n`); // this test runner: alive, and no Hub
    const started = await hub(dir);
    expect(started.listening, started.err).toBe(true);
    expect(Number(readFileSync(join(dir, "hub.lock"), "utf8"))).toBe(started.child.pid);
    await stop(started);
  }, 60_000);
});
