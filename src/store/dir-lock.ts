// One Hub per data directory. Two Hubs on one store would run two sets of controllers over
// it, so `loom hub` takes an exclusive lock first: a file holding its pid, created with O_EXCL.
// A lock left by a process that no longer exists (a crash, SIGKILL) is taken over.
import { readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirLockedError extends Error {
  constructor(readonly dir: string, readonly pid: number, readonly lockFile: string) {
    super(`the data directory ${dir} is in use by another loom hub (pid ${pid}); stop it, or give this one another --data-dir (lock file: ${lockFile})`);
    this.name = "DataDirLockedError";
  }
}

/** Lock files held by this process, so a second Hub in the same process is refused too. */
const held = new Set<string>();

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM"; // exists, owned by someone else
  }
}

/** Take the lock on `dir`; returns its release. Throws DataDirLockedError naming the holder's pid. */
export function lockDataDir(dir: string): () => void {
  const file = join(dir, "hub.lock");
  for (let attempt = 0; attempt < 3; attempt++) {
    if (held.has(file)) throw new DataDirLockedError(dir, process.pid, file);
    try {
      writeFileSync(file, `${process.pid}\n`, { flag: "wx" });
      held.add(file);
      return () => {
        held.delete(file);
        try {
          if (Number(readFileSync(file, "utf8").trim()) === process.pid) unlinkSync(file);
        } catch {
          // already gone
        }
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let pid = NaN;
    try {
      pid = Number(readFileSync(file, "utf8").trim());
    } catch {
      continue; // removed meanwhile: try again
    }
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid)) throw new DataDirLockedError(dir, pid, file);
    // The holder is gone (or the file is garbage): the lock is stale.
    try {
      unlinkSync(file);
    } catch {
      // someone else took it over first; the next attempt sees theirs
    }
  }
  throw new Error(`could not take the lock ${file}`);
}
