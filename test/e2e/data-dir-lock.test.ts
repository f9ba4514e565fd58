// One `loom hub` per --data-dir (issue 10): a second one exits with an error naming the
// holder's pid; after the holder is SIGKILLed its stale lock is taken over.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const children: ChildProcess[] = [];
let dir = "";
afterAll(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Start `loom hub`; resolves once it listens (with its stderr so far) or exits (with its code). */
function hub(): Promise<{ child: ChildProcess; listening: boolean; code: number | null; err: string }> {
  const child = spawn(process.execPath, ["bin/loom.mjs", "hub", "--data-dir", dir, "--port", "0", "--log-level", "silent"], { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] });
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

describe("loom hub --data-dir lock", () => {
  it("refuses a second Hub naming the holder's pid, and takes over the lock of a killed one", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-lock-"));
    const first = await hub();
    expect(first.listening, first.err).toBe(true);
    const second = await hub();
    expect(second.listening).toBe(false);
    expect(second.code).toBe(1);
    expect(second.err).toContain(`in use by another loom hub (pid ${first.child.pid})`);

    const gone = new Promise((r) => first.child.once("exit", r));
    first.child.kill("SIGKILL");
    await gone;
    expect(existsSync(join(dir, "hub.lock"))).toBe(true); // left behind by the kill
    const third = await hub();
    expect(third.listening, third.err).toBe(true);
    const stopped = new Promise<number | string | null>((r) => third.child.once("exit", (c, sig) => r(c ?? sig)));
    third.child.kill("SIGTERM");
    expect(await stopped).toBe(0);
    expect(existsSync(join(dir, "hub.lock"))).toBe(false); // a clean stop releases it
  }, 60_000);
});
