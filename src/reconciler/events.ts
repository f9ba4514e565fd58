// Events: what happened to an object (lease granted, released, expired, requeued, push
// refused, file rejected), stored as `Event` objects tied to it, kept for a bounded time
// and count (the Event GC controller, event-gc.ts, drops the rest). Recording never blocks
// the caller: events are batched into one write. Events explain; they are not the record
// (a task's status and attempts are), so under pressure each reason gets a budget and what
// goes past it is counted and dropped rather than slowing the leases it describes.
import { randomUUID } from "node:crypto";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import type { LoomEvent } from "../resources/meta.ts";
import { isStoreError } from "../store/errors.ts";
import { ChunkSize } from "./slice.ts";

export type EventObject = StoredObject & {
  involvedObject: { apiVersion: string; kind: string; name: string; uid?: string };
  type: "Normal" | "Warning";
  reason: string;
  message: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source: { component: string };
};

/** Events of one reason recorded at most: `burst` at once, refilled at `perSecond`. */
export type EventBudget = { perSecond: number; burst: number };

/** How long an Event is kept after it was last written: the Event GC's time rule, and on etcd each Event key's lease. */
export const EVENT_TTL_SECONDS = 3600;

/** 50 a second of each reason (for the whole fleet: replicas split it), after a burst of 500: a 500-task dispatch is told in full. */
export const DEFAULT_EVENT_BUDGET: EventBudget = { perSecond: 50, burst: 500 };

export type EventRecorderOptions = {
  /** Aggregated Events remembered for counting repeats. */
  maxEvents: number;
  flushMs: number;
  onError?: (e: unknown) => void;
  /** Per-reason budget (default DEFAULT_EVENT_BUDGET); Infinity in both fields records everything. */
  budget?: EventBudget;
  /** Told of each Event dropped for being over its reason's budget. */
  onDrop?: (reason: string) => void;
  /**
   * This Hub's part of the budget's rate, from 0 to 1 (default 1): replicas sharing a store
   * each refill at 1/N of it, so the rate bounds what the store receives, not what each
   * replica sends.
   */
  share?: () => number;
  now?: () => number;
};

/**
 * A token bucket per reason: the same idea as kube's event spam filter, keyed by reason.
 * `share` is this Hub's part of the rate: replicas on one store split it, so under a load
 * that never pauses the store takes the same Events a second however many replicas write
 * them. Each keeps the whole burst: a dispatch reaches one replica and is told in full.
 */
class ReasonBudget {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  constructor(
    private readonly b: EventBudget,
    private readonly now: () => number,
    private readonly share: () => number,
  ) {}

  take(reason: string): boolean {
    const t = this.now();
    let bucket = this.buckets.get(reason);
    if (!bucket) this.buckets.set(reason, (bucket = { tokens: this.b.burst, at: t }));
    else {
      const rate = this.b.perSecond * this.share();
      bucket.tokens = Math.min(this.b.burst, bucket.tokens + ((t - bucket.at) / 1000) * rate);
      bucket.at = t;
    }
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}

/** An Event's own name follows the object's, made safe: a file path is not a valid name. */
export function eventNameBase(name: string): string {
  const safe = name
    .replace(/[^A-Za-z0-9_.-]+/g, "-")
    .replace(/^[^A-Za-z0-9]+/, "")
    .slice(-200);
  return safe.replace(/^[^A-Za-z0-9]+/, "") || "object";
}

export class EventRecorder {
  private pending: LoomEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly budget: ReasonBudget;
  /** Events per store transaction: a few milliseconds of work each (slice.ts). */
  private readonly chunks = new ChunkSize(4, 8, 250);

  constructor(
    private readonly store: Store,
    private readonly opts: EventRecorderOptions = { maxEvents: 5000, flushMs: 100 },
  ) {
    this.budget = new ReasonBudget(opts.budget ?? DEFAULT_EVENT_BUDGET, opts.now ?? Date.now, opts.share ?? (() => 1));
  }

  /** Queue an Event for the next write; false when it was dropped (over its reason's budget, or closed). */
  record = (e: LoomEvent): boolean => {
    if (this.closed) return false;
    if (!this.budget.take(e.reason)) {
      this.opts.onDrop?.(e.reason);
      return false;
    }
    this.pending.push(e);
    this.timer ??= setTimeout(() => void this.flush(), this.opts.flushMs);
    return true;
  };

  /** Write what is pending, then drop what is past the TTL or over the count. */
  flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(() => this.write(batch)).catch((err) => this.opts.onError?.(err));
    return this.flushing;
  }

  /** Recent Events by what they say (object, type, reason, message): a repeat bumps count and lastTimestamp instead of adding a row. */
  private readonly recent = new Map<string, EventObject>();

  private async write(batch: LoomEvent[]): Promise<void> {
    const now = new Date().toISOString();
    const touched = new Map<string, { ev: EventObject; existed: boolean }>();
    for (const e of batch) {
      const o = e.object;
      const key = JSON.stringify([o.kind, o.metadata.name, e.type, e.reason, e.message]);
      const seen =
        touched.get(key) ?? (this.recent.has(key) ? { ev: { ...this.recent.get(key)! }, existed: true } : undefined);
      if (seen) {
        seen.ev.count += 1;
        seen.ev.lastTimestamp = now;
        touched.set(key, seen);
        continue;
      }
      const ev: EventObject = {
        apiVersion: "v1",
        kind: "Event",
        metadata: {
          name: `${eventNameBase(o.metadata.name)}.${randomUUID().slice(0, 8)}`,
          labels: { "loom.dev/involved-kind": o.kind, "loom.dev/involved-name": o.metadata.name },
        },
        involvedObject: {
          apiVersion: o.apiVersion,
          kind: o.kind,
          name: o.metadata.name,
          ...(o.metadata.uid ? { uid: o.metadata.uid } : {}),
        },
        type: e.type,
        reason: e.reason,
        message: e.message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: "loom-hub" },
      };
      touched.set(key, { ev, existed: false });
    }
    const entries = [...touched];
    // A burst (a conditions pass announcing thousands of tasks) is written in chunks, so no
    // single commit holds the event loop for long; each chunk waits for the one before.
    for (let i = 0; i < entries.length;) {
      const end = i + this.chunks.next(this.store.maxWritesPerTxn);
      await this.writeChunk(entries.slice(i, end), now);
      i = end;
    }
    for (const [key, { ev }] of entries) {
      this.recent.delete(key); // re-insert: the map stays in last-used order
      this.recent.set(key, ev);
    }
    for (const key of this.recent.keys()) {
      if (this.recent.size <= this.opts.maxEvents) break;
      this.recent.delete(key);
    }
  }

  private async writeChunk(entries: [string, { ev: EventObject; existed: boolean }][], now: string): Promise<void> {
    const ops = (asNew: boolean): TxnOp[] =>
      entries.map(([, { ev, existed }]) =>
        existed && !asNew
          ? { op: "update", object: { ...ev, metadata: { ...ev.metadata, resourceVersion: undefined } } }
          : { op: "create", object: ev },
      );
    try {
      await this.commit(ops(false));
    } catch (err) {
      // An aggregated Event was pruned meanwhile: start those again as new Events.
      if (!isStoreError(err, "NotFound")) throw err;
      for (const [, t] of entries)
        if (t.existed)
          Object.assign(t.ev, {
            count: 1,
            firstTimestamp: now,
            metadata: {
              ...t.ev.metadata,
              name: `${eventNameBase(t.ev.involvedObject.name)}.${randomUUID().slice(0, 8)}`,
            },
          });
      await this.commit(ops(true));
    }
  }

  /** One transaction, resolved once durable; its time sizes the next (ChunkSize). */
  private async commit(ops: TxnOp[]): Promise<void> {
    const applied = await this.chunks.timed(ops.length, () => this.store.apply(ops));
    await applied.durable;
  }

  /** Events deleted by the Event GC: a repeat of one starts a new Event rather than updating a gone one. */
  forget(names: ReadonlySet<string>): void {
    for (const [key, ev] of this.recent) if (names.has(ev.metadata.name)) this.recent.delete(key);
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }
}

/** Oldest first by lastTimestamp, as kubectl orders Events; ties keep the order they were created in. */
export function byLastTimestamp(
  a: { lastTimestamp?: string; firstTimestamp?: string; metadata: { resourceVersion?: string } },
  b: typeof a,
): number {
  const la = a.lastTimestamp ?? "",
    lb = b.lastTimestamp ?? "";
  if (la !== lb) return la < lb ? -1 : 1;
  return Number(a.metadata.resourceVersion ?? 0) - Number(b.metadata.resourceVersion ?? 0);
}

/** Events about one object, oldest first. */
export function eventsFor(events: EventObject[], kind: string, name: string): EventObject[] {
  return events.filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name).sort(byLastTimestamp);
}
