// One Hub per data directory. Two Hubs on one store would run two sets of controllers over
// it, so `loom hub` takes an exclusive lock first.
//
// The lock is one the kernel releases when its holder dies: SQLite's POSIX record lock on a
// small lock database, held by a write transaction left open for the Hub's life (`BEGIN
// IMMEDIATE` takes the RESERVED lock; nobody else can take it until this connection closes).
// A pid file cannot do this: a SIGKILLed Hub left as a zombie, or a reused pid after a
// container restart, both pass `kill(pid, 0)`. The pid is still written beside the lock, only
// to name the holder in the error.
import Database from "better-sqlite3";
import { readFileSync, renameSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

export class DataDirLockedError extends Error {
  constructor(
    readonly dir: string,
    readonly pid: number | undefined,
    readonly lockFile: string,
  ) {
    super(
      `the data directory ${dir} is in use by another loom hub (${pid ? `pid ${pid}` : "pid unknown"}); stop it, or give this one another --data-dir (lock file: ${lockFile})`,
    );
    this.name = "DataDirLockedError";
  }
}

const isBusy = (e: unknown) => /^SQLITE_(BUSY|LOCKED)/.test(String((e as { code?: unknown }).code));

function holderPid(pidFile: string): number | undefined {
  try {
    const pid = Number(readFileSync(pidFile, "utf8").trim());
    return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Take the lock on `dir`; returns its release. Throws DataDirLockedError naming the holder's pid. */
export function lockDataDir(dir: string): () => void {
  const lockFile = join(dir, "hub.lock.sqlite");
  const pidFile = join(dir, "hub.lock");
  const db = new Database(lockFile, { timeout: 0 });
  try {
    db.pragma("journal_mode = DELETE"); // no WAL: its shared memory would let a second writer wait rather than fail
    db.exec("BEGIN IMMEDIATE");
  } catch (e) {
    db.close();
    // SQLite tracks its locks per inode, so a second Hub in this same process is refused too.
    if (isBusy(e)) throw new DataDirLockedError(dir, holderPid(pidFile), pidFile);
    throw e;
  }
  // Whatever the pid file says (a dead Hub, a zombie, an unrelated process), it is ours now.
  const tmp = `${pidFile}.${process.pid}.tmp`;
  writeFileSync(tmp, `${process.pid}\n`);
  renameSync(tmp, pidFile);
  let released = false;
  return () => {
    if (released) return;
    released = true;
    try {
      if (holderPid(pidFile) === process.pid) unlinkSync(pidFile);
    } catch {
      // already gone
    }
    db.close(); // ends the transaction and drops the kernel lock
  };
}
