// Test support: the processes a test run started, read from /proc. Used to stop a process with
// everything beneath it, and by the suite's teardown to find what outlived the tests.
import { readdirSync, readFileSync } from "node:fs";

/** The environment variable, set once per suite run, that every process the suite starts inherits. */
export const RUN_MARKER = "LOOM_TEST_RUN";

export type Proc = { pid: number; ppid: number; pgid: number; zombie: boolean };

/** One process from /proc/<pid>/stat, or undefined when it is gone. */
export function readProc(pid: number): Proc | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name sits in parentheses and may hold spaces or ")"; the fields follow the last ")".
    const [state, ppid, pgid] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return { pid, ppid: Number(ppid), pgid: Number(pgid), zombie: state === "Z" || state === "X" };
  } catch {
    return undefined;
  }
}

export function allProcs(): Proc[] {
  return readdirSync("/proc")
    .filter((n) => /^\d+$/.test(n))
    .map((n) => readProc(Number(n)))
    .filter((p): p is Proc => p !== undefined);
}

/** Every live process beneath `pid`, at any depth. */
export function descendants(pid: number, procs: Proc[] = allProcs()): Proc[] {
  const below: Proc[] = [];
  const parents = new Set([pid]);
  for (let grew = true; grew;) {
    grew = false;
    for (const p of procs) {
      if (parents.has(p.ppid) && !parents.has(p.pid)) {
        parents.add(p.pid);
        below.push(p);
        grew = true;
      }
    }
  }
  return below.filter((p) => !p.zombie);
}

export const alive = (pid: number): boolean => {
  const p = readProc(pid);
  return p !== undefined && !p.zombie;
};

export const commandLine = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean).join(" ");
  } catch {
    return "";
  }
};

/** Whether a process carries this run's marker in its environment. */
export function carriesMarker(pid: number, run: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`${RUN_MARKER}=${run}`);
  } catch {
    return false; // gone meanwhile, or another user's
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Wait until none of `pids` is alive; false when some still are after `timeoutMs`. */
export async function gone(pids: number[], timeoutMs = 5000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (pids.some(alive)) {
    if (Date.now() > end) return false;
    await sleep(20);
  }
  return true;
}

/**
 * SIGKILL `pid`, every process beneath it and the process groups they lead, then wait until
 * all are gone. The tree is read before the kill: once a parent dies its children move to
 * PID 1 and no longer look like its own. A child in a session of its own (script(1) runs its
 * command that way) is reached through its process group, which the test's own group is not.
 */
export async function stopTree(pid: number, timeoutMs = 5000): Promise<void> {
  const tree = [readProc(pid), ...descendants(pid)].filter((p): p is Proc => p !== undefined);
  const own = readProc(process.pid)?.pgid;
  for (const g of new Set(tree.map((p) => p.pgid))) if (g !== own && g > 1) signal(-g);
  for (const p of tree) signal(p.pid);
  if (
    !(await gone(
      tree.map((p) => p.pid),
      timeoutMs,
    ))
  )
    throw new Error(
      `processes still alive ${timeoutMs}ms after SIGKILL: ${tree
        .filter((p) => alive(p.pid))
        .map((p) => p.pid)
        .join(", ")}`,
    );
}

function signal(target: number): void {
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // already gone
  }
}
