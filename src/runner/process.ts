// One task command as a child process: its own process group (so a timeout or a lost
// lease stops the whole tree), output straight to files, and resource usage sampled from /proc.
import { execFileSync, spawn } from "node:child_process";
import { constants as osConstants } from "node:os";
import { open, readFile, readdir, appendFile } from "node:fs/promises";

export interface ResourceUsage {
  duration_seconds: number;
  cpu_seconds: number;
  max_rss_mb: number;
  /** "proc_sampled" on Linux, "unavailable" elsewhere. */
  measurement_source: string;
}

export interface ProcessSpec {
  /** A string runs through /bin/sh -c; a list runs directly. */
  command: string | string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutSeconds: number;
  stdoutPath: string;
  stderrPath: string;
  /** Aborting kills the process tree; the reason is noted in stderr. */
  signal?: AbortSignal;
  /** Time between SIGTERM and SIGKILL when stopping a tree (default 2 s). */
  killGraceMs?: number;
  sampleIntervalMs?: number;
}

export interface ProcessOutcome {
  exitCode: number;
  timedOut: boolean;
  /** The abort reason when the process was stopped through `signal`. */
  aborted: string | null;
  termSignal: string | null;
  startedAt: string;
  finishedAt: string;
  usage: ResourceUsage;
}

export const TIMEOUT_EXIT_CODE = 124;
/** Exit code recorded for a process stopped from outside (lease lost, shutdown): 128 + SIGTERM. */
export const STOPPED_EXIT_CODE = 143;

export const utcNow = () => new Date().toISOString().replace("Z", "+00:00");
const round = (n: number, d: number) => Math.round(n * 10 ** d) / 10 ** d;

function signalGroup(pid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(-pid, sig);
    return true;
  } catch {
    return false; // ESRCH: the group is gone
  }
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGTERM the group, then SIGKILL whatever is left after the grace period. */
async function stopGroup(pid: number, graceMs: number): Promise<void> {
  if (!signalGroup(pid, "SIGTERM")) return;
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && groupAlive(pid)) await new Promise((r) => setTimeout(r, 50));
  signalGroup(pid, "SIGKILL");
}

// --- /proc sampling -------------------------------------------------------

let procConsts: { clkTck: number; pageSize: number } | undefined;
function procConstants() {
  if (!procConsts) {
    const get = (name: string, fallback: number) => {
      try {
        const v = Number(
          execFileSync("getconf", [name], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(),
        );
        return Number.isFinite(v) && v > 0 ? v : fallback;
      } catch {
        return fallback;
      }
    };
    procConsts = { clkTck: get("CLK_TCK", 100), pageSize: get("PAGESIZE", 4096) };
  }
  return procConsts;
}

async function readStat(pid: number): Promise<{ cpuTicks: number; rssPages: number } | null> {
  try {
    const text = await readFile(`/proc/${pid}/stat`, "utf8");
    // comm (field 2) may hold spaces and parentheses: fields are counted after its closing ")".
    const rest = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { cpuTicks: Number(rest[11]) + Number(rest[12]), rssPages: Number(rest[21]) };
  } catch {
    return null;
  }
}

async function childrenOf(pid: number): Promise<number[]> {
  const out: number[] = [];
  try {
    for (const tid of await readdir(`/proc/${pid}/task`)) {
      try {
        const text = await readFile(`/proc/${pid}/task/${tid}/children`, "utf8");
        for (const c of text.split(/\s+/)) if (c) out.push(Number(c));
      } catch {
        // thread ended
      }
    }
  } catch {
    // process ended
  }
  return out;
}

/**
 * Resource usage of a process tree, *sampled*: CPU is the last seen utime+stime of every
 * process in the tree (a process that starts and ends between two samples is missed), and
 * max_rss_mb is the largest sum of RSS over the tree at any sample, which is what memory
 * admission cares about. Only available on Linux.
 */
class TreeSampler {
  private cpuTicksByPid = new Map<number, number>();
  private maxRssPages = 0;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  readonly enabled = process.platform === "linux";

  constructor(
    private rootPid: number,
    private intervalMs: number,
  ) {}

  start(): void {
    if (!this.enabled) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      let rss = 0;
      const seen = new Set<number>();
      const queue = [this.rootPid];
      while (queue.length) {
        const pid = queue.pop()!;
        if (seen.has(pid)) continue;
        seen.add(pid);
        const st = await readStat(pid);
        if (!st) continue;
        rss += st.rssPages;
        this.cpuTicksByPid.set(pid, Math.max(this.cpuTicksByPid.get(pid) ?? 0, st.cpuTicks));
        queue.push(...(await childrenOf(pid)));
      }
      this.maxRssPages = Math.max(this.maxRssPages, rss);
    } finally {
      this.busy = false;
    }
  }

  usage(durationSeconds: number): ResourceUsage {
    if (!this.enabled)
      return {
        duration_seconds: round(durationSeconds, 4),
        cpu_seconds: 0,
        max_rss_mb: 0,
        measurement_source: "unavailable",
      };
    const { clkTck, pageSize } = procConstants();
    let ticks = 0;
    for (const t of this.cpuTicksByPid.values()) ticks += t;
    return {
      duration_seconds: round(durationSeconds, 4),
      cpu_seconds: round(ticks / clkTck, 4),
      max_rss_mb: round((this.maxRssPages * pageSize) / (1024 * 1024), 2),
      measurement_source: "proc_sampled",
    };
  }
}

// --- running ----------------------------------------------------------------

export async function runProcess(spec: ProcessSpec): Promise<ProcessOutcome> {
  const startedAt = utcNow();
  const t0 = performance.now();
  const graceMs = spec.killGraceMs ?? 2000;
  const [out, err] = await Promise.all([open(spec.stdoutPath, "a"), open(spec.stderrPath, "a")]);
  const note = (text: string) => appendFile(spec.stderrPath, text);
  let timedOut = false;
  let aborted: string | null = null;
  let sampler: TreeSampler | undefined;
  try {
    if (spec.signal?.aborted) {
      aborted = String(spec.signal.reason ?? "aborted");
      await note(`\nstopped before start: ${aborted}\n`);
      return {
        exitCode: STOPPED_EXIT_CODE,
        timedOut,
        aborted,
        termSignal: null,
        startedAt,
        finishedAt: utcNow(),
        usage: new TreeSampler(0, 1).usage(0),
      };
    }
    const [file, args] =
      typeof spec.command === "string" ? ["/bin/sh", ["-c", spec.command]] : [spec.command[0], spec.command.slice(1)];
    const child = spawn(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      // Writing to the files directly means a background grandchild holding the output
      // open cannot keep us waiting for a pipe to close.
      stdio: ["ignore", out.fd, err.fd],
      detached: true, // setsid: the child leads a new process group we can signal as a whole
    });
    const result = await new Promise<{ code: number | null; sig: NodeJS.Signals | null; spawnError?: Error }>(
      (resolve) => {
        let timer: NodeJS.Timeout | undefined;
        const onAbort = () => {
          aborted = String(spec.signal?.reason ?? "aborted");
          if (child.pid) void stopGroup(child.pid, graceMs);
        };
        child.once("spawn", () => {
          sampler = new TreeSampler(child.pid!, spec.sampleIntervalMs ?? 500);
          sampler.start();
          timer = setTimeout(
            () => {
              timedOut = true;
              void stopGroup(child.pid!, graceMs);
            },
            Math.max(0, spec.timeoutSeconds) * 1000,
          );
          if (spec.signal?.aborted) onAbort();
          else spec.signal?.addEventListener("abort", onAbort, { once: true });
        });
        child.once("error", (e) => {
          if (timer) clearTimeout(timer);
          spec.signal?.removeEventListener("abort", onAbort);
          resolve({ code: null, sig: null, spawnError: e });
        });
        child.once("exit", (code, sig) => {
          if (timer) clearTimeout(timer);
          spec.signal?.removeEventListener("abort", onAbort);
          // A task's processes must not outlive it: the Hub frees its reservation when it ends.
          if (child.pid) signalGroup(child.pid, "SIGKILL");
          resolve({ code, sig });
        });
      },
    );
    sampler?.stop();
    const duration = (performance.now() - t0) / 1000;
    const usage = (sampler ?? new TreeSampler(0, 1)).usage(duration);
    let exitCode: number;
    if (result.spawnError) {
      exitCode = 127; // the shell's "command not found"
      await note(`\nfailed to start ${JSON.stringify(file)} in ${spec.cwd}: ${result.spawnError.message}\n`);
    } else if (timedOut) {
      exitCode = TIMEOUT_EXIT_CODE;
      await note(`\ntimeout after ${spec.timeoutSeconds} seconds\n`);
    } else if (aborted !== null) {
      exitCode = STOPPED_EXIT_CODE;
      await note(`\nstopped: ${aborted}\n`);
    } else if (result.code !== null) {
      exitCode = result.code;
    } else {
      exitCode = 128 + (osConstants.signals[result.sig as NodeJS.Signals] ?? 0);
    }
    return { exitCode, timedOut, aborted, termSignal: result.sig, startedAt, finishedAt: utcNow(), usage };
  } finally {
    await Promise.all([out.close(), err.close()]);
  }
}

/** Sums the usage of several commands: CPU adds up, RSS is the peak of any one of them. */
export function aggregateUsage(parts: ResourceUsage[], durationSeconds: number): ResourceUsage {
  const measured = parts.filter((p) => p.measurement_source !== "unavailable");
  return {
    duration_seconds: round(durationSeconds, 4),
    cpu_seconds: round(
      measured.reduce((s, p) => s + p.cpu_seconds, 0),
      4,
    ),
    max_rss_mb: round(
      measured.reduce((m, p) => Math.max(m, p.max_rss_mb), 0),
      2,
    ),
    measurement_source: measured.length ? "proc_sampled" : "unavailable",
  };
}

/**
 * Set in a child's environment, it stops when its parent is gone (see onParentExit). The value
 * is the parent's pid, so a child whose parent died before it looked still knows whom it outlives.
 */
export const EXIT_WITH_PARENT_ENV = "LOOM_EXIT_WITH_PARENT";

/** The pid EXIT_WITH_PARENT_ENV names; this process's parent when it holds no pid. */
export const parentToOutlive = (): number => {
  const n = Number(process.env[EXIT_WITH_PARENT_ENV]);
  return Number.isInteger(n) && n > 1 ? n : process.ppid;
};

/**
 * Calls `cb` once when this process's parent has exited. npm, stopped by a signal, does not
 * pass it on to the script it runs, and a Runner whose quick start was killed must not keep
 * leasing: both notice here that they were left behind.
 */
export function onParentExit(cb: () => void, parent = process.ppid, pollMs = 500): () => void {
  if (parent <= 1) return () => undefined;
  const t = setInterval(() => {
    try {
      process.kill(parent, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "ESRCH") return; // EPERM: it is alive, only not ours to signal
      clearInterval(t);
      cb();
    }
  }, pollMs);
  t.unref();
  return () => clearInterval(t);
}
