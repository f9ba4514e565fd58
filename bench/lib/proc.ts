// Child processes the benchmarks measure from the outside: CPU time and resident memory
// come from /proc, so the figures include everything the process does (GC, loader thread).
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const CLK_TCK = 100; // USER_HZ on Linux; /proc reports utime and stime in these ticks

/** User + system CPU seconds in a /proc stat file (a process's, or one thread's). */
function statCpuSeconds(path: string): number {
  const stat = readFileSync(path, "utf8");
  // Fields after the command name, which may itself contain spaces and parentheses.
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** User + system CPU seconds the process has used so far, on all its threads. */
export const cpuSeconds = (pid: number): number => statCpuSeconds(`/proc/${pid}/stat`);

/**
 * The same for the process's main thread alone (its thread id is the process id): for a
 * Node.js process, the event loop, apart from GC helpers, the compiler and the I/O pool.
 */
export const mainThreadCpuSeconds = (pid: number): number => statCpuSeconds(`/proc/${pid}/task/${pid}/stat`);

/** Bytes a process has caused to be written to storage (write_bytes of /proc/PID/io): what it made durable. */
export function writeBytes(pid: number): number {
  const m = /^write_bytes: (\d+)$/m.exec(readFileSync(`/proc/${pid}/io`, "utf8"));
  return m ? Number(m[1]) : 0;
}

/** Resident set size in MB (VmRSS). */
export function rssMb(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

export type Child = {
  proc: ChildProcess;
  pid: number;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
};

/** How much of each stream a Child keeps (the tail); the rest is read and dropped. */
const KEEP = 1 << 20;

/**
 * Node's own flags for every process the benchmark starts, from LOOM_BENCH_NODE_ARGS
 * (space-separated): how a run is profiled, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof",
 * which Node 20 refuses in NODE_OPTIONS.
 */
const NODE_ARGS = (process.env.LOOM_BENCH_NODE_ARGS ?? "").split(" ").filter(Boolean);

/**
 * Spawn `node [args]` from the project root. Both streams are always read, so a child that
 * writes a lot (a Hub's log) never blocks on a full pipe; the tail of each is kept for
 * waitForLine and for error messages.
 */
export function spawnNode(args: string[], env: NodeJS.ProcessEnv = {}): Child {
  const proc = spawn(process.execPath, [...NODE_ARGS, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  const kept = { stdout: "", stderr: "" };
  for (const s of ["stdout", "stderr"] as const) {
    proc[s].setEncoding("utf8").on("data", (d: string) => {
      kept[s] = (kept[s] + d).slice(-KEEP);
    });
  }
  const exited = new Promise<number | null>((resolve) => proc.once("exit", (code) => resolve(code)));
  return { proc, pid: proc.pid!, stdout: () => kept.stdout, stderr: () => kept.stderr, exited };
}

/** Run a TypeScript script under bench/ as a child (tsx loader). */
export const spawnScript = (script: string, env: NodeJS.ProcessEnv = {}) =>
  spawnNode(["--import", "tsx", join(ROOT, "bench", script)], env);

/**
 * Wait until the child has written a line matching `re` to the stream (at any time since it
 * started, within the kept tail); resolve with the match.
 */
export function waitForLine(
  child: Child,
  stream: "stdout" | "stderr",
  re: RegExp,
  timeoutMs: number,
): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const s = child.proc[stream]!;
    const already = re.exec(child[stream]());
    if (already) return resolve(already);
    const onData = () => {
      // The Child's own listener ran first (it was added at spawn), so the kept tail has `d`.
      const m = re.exec(child[stream]());
      if (m) {
        done();
        resolve(m);
      }
    };
    const onExit = (code: number | null) => {
      done();
      reject(new Error(`child exited (${code}) before printing ${re}: ${child.stderr().slice(-2000)}`));
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`child did not print ${re} within ${timeoutMs} ms: ${child.stderr().slice(-2000)}`));
    }, timeoutMs);
    const done = () => {
      clearTimeout(timer);
      s.off("data", onData);
      child.proc.off("exit", onExit);
    };
    s.on("data", onData);
    child.proc.once("exit", onExit);
  });
}

/** A child that reports one JSON result on a line starting with RESULT. */
export async function resultOf<T>(child: Child, timeoutMs: number): Promise<T> {
  const m = await waitForLine(child, "stdout", /^RESULT (.*)\n/m, timeoutMs);
  return JSON.parse(m[1]) as T;
}

export async function stop(child: Child, signal: NodeJS.Signals = "SIGTERM", graceMs = 10_000): Promise<void> {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill(signal);
  const t = setTimeout(() => child.proc.kill("SIGKILL"), graceMs);
  await child.exited;
  clearTimeout(t);
}
