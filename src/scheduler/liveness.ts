// What Runners last said about themselves, kept in memory. A heartbeat is not a store
// write: the Worker object changes only when a fact changes or Ready flips (see the worker
// controller); this table answers "is it alive" and "how many runs does it report".
export type LiveRecord = {
  /** ms since epoch of the last authenticated call from this worker. */
  lastSeen: number;
  reportedActive: number;
  currentRuns: unknown[];
  health?: Record<string, unknown>;
  /** Reported source-cache keys, for cache affinity. */
  cacheKeys: Set<string>;
  cacheEnabled: boolean;
};

export class Liveness {
  private readonly records = new Map<string, LiveRecord>();
  /** Told when a fact the worker's status shows changes: it came back to life, or its reported run count moved. */
  private readonly listeners = new Set<(worker: string) => void>();

  /**
   * `known`: only workers the store holds get a record, so a call naming an unknown id (a
   * typo, a probe, a pruned worker's Runner) does not grow this table.
   */
  constructor(
    readonly graceMs: number,
    private readonly known: (worker: string) => boolean = () => true,
  ) {}

  /** Listen for changes of a worker's liveness facts; returns the unsubscribe. */
  subscribe(fn: (worker: string) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private onChange(worker: string): void {
    for (const fn of this.listeners) fn(worker);
  }

  private rec(worker: string, now: number): LiveRecord {
    let r = this.records.get(worker);
    if (!r || now - r.lastSeen > this.graceMs) queueMicrotask(() => this.onChange(worker));
    if (!r)
      this.records.set(
        worker,
        (r = { lastSeen: now, reportedActive: 0, currentRuns: [], cacheKeys: new Set(), cacheEnabled: false }),
      );
    return r;
  }

  /** Any authenticated call from a Runner proves it is alive. */
  touch(worker: string, now: number): void {
    if (!this.known(worker)) return;
    this.rec(worker, now).lastSeen = now;
  }

  heartbeat(worker: string, now: number, currentRuns: unknown[], health?: Record<string, unknown>): void {
    if (!this.known(worker)) return;
    const r = this.rec(worker, now);
    r.lastSeen = now;
    const before = r.reportedActive;
    r.currentRuns = currentRuns;
    r.reportedActive = currentRuns.length;
    if (before !== r.reportedActive) queueMicrotask(() => this.onChange(worker));
    if (health) {
      r.health = health;
      const sc = health.source_cache as { enabled?: boolean; keys?: unknown[] } | undefined;
      if (sc) {
        r.cacheEnabled = sc.enabled === true;
        r.cacheKeys = new Set((sc.keys ?? []).filter((k): k is string => typeof k === "string"));
      }
    }
  }

  /** A registration starts the count afresh: a new Runner process has nothing running yet. */
  registered(worker: string, now: number, health?: Record<string, unknown>): void {
    this.records.delete(worker);
    this.heartbeat(worker, now, [], health);
  }

  /**
   * A run the worker reported has ended on the Hub's side (uploaded, completed, failed,
   * cancelled, expired): it stops counting at once, not at the next heartbeat, so a
   * long-poll waiting for room is not held back by a count the Runner has not refreshed.
   */
  finished(worker: string, taskId: string): boolean {
    const r = this.records.get(worker);
    if (!r) return false;
    const before = r.currentRuns.length;
    r.currentRuns = r.currentRuns.filter(
      (x) => !(x && typeof x === "object" && (x as { task_id?: unknown }).task_id === taskId),
    );
    r.reportedActive = r.currentRuns.length;
    if (r.currentRuns.length !== before) queueMicrotask(() => this.onChange(worker));
    return r.currentRuns.length !== before;
  }

  /** How many workers have a record (bounded by the workers the store holds). */
  get size(): number {
    return this.records.size;
  }

  get(worker: string): LiveRecord | undefined {
    return this.records.get(worker);
  }

  ready(worker: string, now: number): boolean {
    const r = this.records.get(worker);
    return !!r && now - r.lastSeen <= this.graceMs;
  }

  forget(worker: string): void {
    this.records.delete(worker);
  }
}
