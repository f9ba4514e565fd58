// Group commit for the SQLite store: one fdatasync of the WAL file makes every commit that
// was applied before it started durable. It runs on libuv's thread pool, so the event loop
// keeps serving requests (and applying their commits) while the disk works; those commits
// share the next flush. A flush is started as soon as none is in flight, so a lone write
// waits for exactly one fdatasync and a busy Hub pays one per group.
import { closeSync, fdatasync, openSync } from "node:fs";

type Round = { rev: number; writes: number; promise: Promise<void>; resolve: () => void; reject: (e: Error) => void };

export class WalSync {
  private fd: number | undefined;
  private inflight = false;
  private next: Round | undefined;
  private last: Promise<void> = Promise.resolve();
  private _durable: number;
  private failed: Error | undefined;
  /** fdatasync calls completed, and the writes they covered (for metrics and tests). */
  flushes = 0;
  flushedWrites = 0;

  /**
   * `revision`: what is already on disk when the store opens. `beforeFlush` runs right before
   * each fdatasync (the store commits the SQLite transaction its group of writes shares).
   */
  constructor(
    private readonly walPath: string,
    revision: number,
    private readonly onDurable: (rev: number) => void,
    private readonly beforeFlush: () => void = () => {},
  ) {
    this._durable = revision;
  }

  get durableRevision(): number {
    return this._durable;
  }

  /** Resolves once revision `rev`, already applied, is on disk. */
  after(rev: number): Promise<void> {
    if (this.failed) return Promise.reject(this.failed);
    if (rev <= this._durable) return Promise.resolve();
    if (!this.next) {
      let resolve!: () => void, reject!: (e: Error) => void;
      const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      this.next = { rev, writes: 0, promise, resolve, reject };
    } else this.next.rev = Math.max(this.next.rev, rev);
    this.next.writes++;
    const p = this.next.promise;
    if (!this.inflight) this.flush();
    return p;
  }

  private flush(): void {
    const round = this.next;
    if (!round) return;
    this.next = undefined;
    this.inflight = true;
    this.last = new Promise<void>((done) => {
      const finish = (err: Error | null) => {
        this.inflight = false;
        if (err) {
          // A failed fdatasync leaves the disk state unknown: no later write is acknowledged.
          this.failed = new Error(`WAL sync failed: ${err.message}`);
          round.reject(this.failed);
          this.next?.reject(this.failed);
          this.next = undefined;
        } else {
          this._durable = Math.max(this._durable, round.rev);
          this.flushes++;
          this.flushedWrites += round.writes;
          round.resolve();
          this.onDurable(this._durable);
          if (this.next) this.flush();
        }
        done();
      };
      try {
        this.beforeFlush();
        this.fd ??= openSync(this.walPath, "r");
      } catch (e) {
        finish(e as Error);
        return;
      }
      fdatasync(this.fd, finish);
    });
  }

  /** Waits for the flushes in flight, then releases the file. */
  async close(): Promise<void> {
    while (this.inflight || this.next) {
      if (!this.inflight) this.flush();
      await this.last;
    }
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
  }
}
