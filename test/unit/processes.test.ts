// The test support that stops a process tree and finds what a run left behind.
import { spawn } from "node:child_process";
import { describe, expect, it } from "vitest";
import { alive, carriesMarker, descendants, RUN_MARKER, stopTree } from "../support/processes.ts";

describe("stopTree", () => {
  it("stops a process beneath the child that runs in a session of its own, as script(1) starts one", async () => {
    // sh starts a sleep in a new session, prints its pid and waits.
    const sh = spawn("sh", ["-c", "setsid sleep 300 & echo $!; wait"], { stdio: ["ignore", "pipe", "ignore"] });
    const pid = await new Promise<number>((res) => sh.stdout.once("data", (d) => res(Number(String(d).trim()))));
    expect(descendants(sh.pid!).map((p) => p.pid)).toContain(pid);
    expect(alive(pid)).toBe(true);
    await stopTree(sh.pid!);
    expect(alive(pid)).toBe(false);
    expect(alive(sh.pid!)).toBe(false);
  });
});

describe("the run marker", () => {
  it("is set for this run and inherited by what a test starts", async () => {
    const run = process.env[RUN_MARKER];
    expect(run).toMatch(/^[0-9a-f-]{36}$/);
    const child = spawn("sleep", ["300"], { stdio: "ignore" });
    try {
      expect(carriesMarker(child.pid!, run!)).toBe(true);
      expect(carriesMarker(child.pid!, "another-run")).toBe(false);
    } finally {
      await stopTree(child.pid!);
    }
  });
});
