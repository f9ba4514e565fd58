// vitest globalSetup: the suite fails when a process one of its tests started outlives it.
// Setup puts a marker for this run in the environment, which the test workers and everything
// they start inherit. Teardown looks for the marker in every process's /proc/<pid>/environ,
// which also finds a process whose parent died and which now belongs to PID 1, and looks for
// anything still beneath the vitest process (a process started with a scrubbed environment).
import { randomUUID } from "node:crypto";
import { allProcs, alive, carriesMarker, commandLine, descendants, gone, RUN_MARKER, type Proc } from "./processes.ts";

/** How long a process that a test has just signalled may take to exit before it counts as left behind. */
const GRACE_MS = 10_000;

export default function setup(): () => Promise<void> {
  const run = randomUUID();
  process.env[RUN_MARKER] = run;
  return async () => {
    const left = leftovers(run);
    if (!left.length || (await gone(left, GRACE_MS))) return;
    const still = leftovers(run);
    if (!still.length) return;
    const list = still
      .map((pid) => `  pid ${pid} (parent ${allProcs().find((p) => p.pid === pid)?.ppid}): ${commandLine(pid)}`)
      .join("\n");
    // Stop them, so a failing run leaves nothing listening either.
    for (const pid of still) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
    }
    process.exitCode = 1; // vitest prints a teardown error but would still exit 0
    throw new Error(`${still.length} process(es) started by the tests outlived the suite (now killed):\n${list}`);
  };
}

/** Processes of this run other than vitest itself and its own pool workers (its direct children). */
function leftovers(run: string): number[] {
  const procs = allProcs();
  const own = (p: Proc) => p.pid === process.pid || p.ppid === process.pid;
  const marked = procs.filter((p) => !p.zombie && !own(p) && carriesMarker(p.pid, run));
  const beneath = descendants(process.pid, procs).filter((p) => !own(p));
  return [...new Set([...marked, ...beneath].map((p) => p.pid))].filter(alive);
}
