// WAL checkpoints off the event loop. SQLite's automatic checkpoint runs inside the COMMIT
// that crosses the WAL's size threshold: it copies the WAL's pages into the database file
// and syncs both, on the thread that commits, so one write in a few hundred stalls the
// Hub's event loop for tens of milliseconds. The store turns that off and this class runs
// the checkpoints instead, on a second connection in a worker thread, on a timer while
// writes arrive. A PASSIVE checkpoint never blocks the writer: it copies what is committed
// and leaves the rest to the next round; once it has caught up, the writer's next
// transaction starts the WAL over from its beginning, so the file stays small.
//
// Under a steady stream of writes it never catches up: the writer commits new frames while
// each round copies, and SQLite starts the WAL over only for a transaction that begins with
// every frame copied. The WAL would then grow for as long as the load lasts (about 25 MB a
// second at a few thousand leases a second). So each round reports how far it got, and once
// the file passes `restartBytes` the store copies the few frames left on its own connection
// between two groups (sqlite.ts), and the next group starts the WAL over.
import { createRequire } from "node:module";
import { Worker } from "node:worker_threads";

/** Runs in the worker: one connection that answers "checkpoint" messages. CommonJS, so it needs no loader. */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const Database = require(workerData.driver);
const { openSync, fdatasyncSync, closeSync } = require("node:fs");
const db = new Database(workerData.path);
db.pragma("busy_timeout = 5000");
// NORMAL: the checkpoint syncs the WAL before it copies, in this thread. SQLite syncs the
// database file only after a round that copied every frame, which under steady writes none
// does; so the round syncs it here, and the store's own finish (sqlite.ts) has only the
// last round's leftovers to sync on the event loop's thread.
db.pragma("synchronous = NORMAL");
const dbFd = openSync(workerData.path, "r");
parentPort.on("message", (m) => {
  if (m === "close") { closeSync(dbFd); db.close(); parentPort.close(); return; }
  try {
    const [r] = db.pragma("wal_checkpoint(PASSIVE)");
    const synced = r.checkpointed > 0;
    if (synced) fdatasyncSync(dbFd);
    parentPort.postMessage({ ok: true, busy: r.busy, log: r.log, checkpointed: r.checkpointed, synced });
  } catch (e) {
    parentPort.postMessage({ ok: false, error: String(e && e.message || e) });
  }
});
`;

/**
 * `rounds` run by the worker; `finished`: backlogs the store copied itself so that the WAL
 * could start over (see above), and the longest of those pauses in ms.
 */
export type CheckpointStats = {
  rounds: number;
  failures: number;
  lastError?: string;
  finished: number;
  longestFinishMs: number;
  /** Rounds that synced the database file after copying (see WORKER_SOURCE). */
  databaseSyncs: number;
};

/** A checkpoint round's result: the WAL's frames, and how many of them are in the database file. */
export type CheckpointRound = { log: number; checkpointed: number };

export class Checkpointer {
  private readonly worker: Worker;
  private timer: NodeJS.Timeout | undefined;
  private inflight = false;
  private dirty = false;
  private closed = false;
  readonly stats: CheckpointStats = { rounds: 0, failures: 0, finished: 0, longestFinishMs: 0, databaseSyncs: 0 };

  /**
   * `everyMs`: the longest a written page waits in the WAL before a checkpoint copies it.
   * `onLost`: the worker is gone (it could not open the file, or died); the store then goes
   * back to SQLite's own checkpoints, so the WAL never grows without bound.
   * `onRound`: a round completed, with how far it got.
   */
  constructor(
    path: string,
    private readonly onLost: (why: string) => void,
    private readonly everyMs = 1000,
    private readonly onRound: (r: CheckpointRound) => void = () => {},
  ) {
    const driver = createRequire(import.meta.url).resolve("better-sqlite3");
    this.worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { path, driver } });
    this.worker.unref();
    this.worker.on("message", (m: { ok: boolean; error?: string; synced?: boolean } & CheckpointRound) => {
      this.inflight = false;
      this.stats.rounds++;
      if (m.synced) this.stats.databaseSyncs++;
      if (!m.ok) {
        // The next round tries again; the WAL only grows meanwhile, and nothing is lost.
        this.stats.failures++;
        this.stats.lastError = m.error;
      } else if (!this.closed) this.onRound({ log: m.log, checkpointed: m.checkpointed });
      if (this.dirty) this.arm();
    });
    this.worker.on("error", (e) => {
      this.stats.failures++;
      this.stats.lastError = e.message;
    });
    this.worker.on("exit", () => {
      if (this.closed) return;
      this.closed = true;
      clearTimeout(this.timer);
      this.onLost(this.stats.lastError ?? "the checkpoint worker exited");
    });
  }

  /** The store wrote something: a checkpoint follows within `everyMs`. */
  written(): void {
    this.dirty = true;
    if (!this.inflight) this.arm();
  }

  private arm(): void {
    if (this.timer || this.closed) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.closed) return;
      this.dirty = false;
      this.inflight = true;
      this.worker.postMessage("checkpoint");
    }, this.everyMs);
    this.timer.unref();
  }

  /** Stops the worker after the checkpoint in flight; the store's own close checkpoints what is left. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    const exited = new Promise<void>((resolve) => this.worker.once("exit", () => resolve()));
    this.worker.ref(); // the close is awaited: keep the process alive until the worker is gone
    this.worker.postMessage("close");
    await exited;
  }
}
