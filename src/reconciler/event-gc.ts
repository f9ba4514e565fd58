// Event GC controller: Events are kept for a bounded time and count. One key (ALL), since
// the rule is about the whole set (the oldest beyond maxEvents go); its reconcile drops
// what is past the TTL or over the count and asks to run again after `everyMs`. Only the
// leader runs it, so replicas never race to delete the same Events.
//
// A store that expires Events by itself (etcd: each Event's key carries a lease) keeps the
// time rule, so a pass there only counts them, and lists them only when there are too many,
// or once every BACKSTOP_PASSES passes for Events stored without a lease (by an older Hub).
import type { Store } from "../store/store.ts";
import { ALL, type Reconciler, type Result } from "./controller.ts";
import { ChunkSize } from "./slice.ts";
import type { EventObject } from "./events.ts";

export type EventGcOptions = {
  maxEvents: number;
  ttlMs: number;
  /** How often the GC looks again. */
  everyMs: number;
  /** Told which Events were dropped (the recorder stops counting repeats into them). */
  dropped?: (names: ReadonlySet<string>) => void;
  now?: () => number;
};

/** On a store that expires Events itself, every this many passes list them all anyway. */
export const BACKSTOP_PASSES = 30;

export class EventGc implements Reconciler {
  readonly name = "event-gc";
  private passes = 0;
  /** Deletes per transaction: a few milliseconds of work each (slice.ts). */
  private readonly chunks = new ChunkSize(4, 8, 500);
  constructor(
    private readonly store: Store,
    private readonly opts: EventGcOptions,
  ) {}

  keys(): string[] {
    return [ALL];
  }

  async reconcile(): Promise<Result> {
    const now = (this.opts.now ?? Date.now)();
    const countOnly = this.store.expires("Event") && ++this.passes % BACKSTOP_PASSES !== 0;
    if (countOnly && (await this.store.count("Event")) <= this.opts.maxEvents)
      return { writes: 0, requeueAfterMs: this.opts.everyMs };
    const { items } = await this.store.list<EventObject>("Event");
    const cutoff = new Date(now - this.opts.ttlMs).toISOString();
    items.sort((a, b) => (a.lastTimestamp < b.lastTimestamp ? -1 : a.lastTimestamp > b.lastTimestamp ? 1 : 0));
    const excess = Math.max(0, items.length - this.opts.maxEvents);
    const drop = items.filter((e, i) => i < excess || e.lastTimestamp < cutoff);
    if (drop.length) this.opts.dropped?.(new Set(drop.map((e) => e.metadata.name)));
    for (let i = 0; i < drop.length;) {
      const end = i + this.chunks.next(this.store.maxWritesPerTxn);
      const ops = drop.slice(i, end).map((e) => ({ op: "delete" as const, kind: "Event", name: e.metadata.name }));
      i = end;
      const applied = await this.chunks.timed(ops.length, () => this.store.apply(ops));
      await applied.durable;
    }
    return { writes: drop.length, requeueAfterMs: this.opts.everyMs };
  }
}
