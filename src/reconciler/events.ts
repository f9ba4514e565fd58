// Events: what happened to an object (lease granted, released, expired, requeued, push
// refused, file rejected), stored as `Event` objects tied to it, kept for a bounded time
// and count (the Event GC controller, event-gc.ts, drops the rest). Recording never blocks
// the caller: events are batched into one write.
import { randomUUID } from "node:crypto";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import type { LoomEvent } from "../resources/meta.ts";
import { isStoreError } from "../store/errors.ts";

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

export type EventRecorderOptions = {
  /** Aggregated Events remembered for counting repeats. */
  maxEvents: number;
  flushMs: number;
  onError?: (e: unknown) => void;
};

/** An Event's own name follows the object's, made safe: a file path is not a valid name. */
export function eventNameBase(name: string): string {
  const safe = name.replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(-200);
  return safe.replace(/^[^A-Za-z0-9]+/, "") || "object";
}

/** Events per store transaction. */
const WRITE_CHUNK = 250;

export class EventRecorder {
  private pending: LoomEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly store: Store, private readonly opts: EventRecorderOptions = { maxEvents: 5000, flushMs: 100 }) {}

  record = (e: LoomEvent): void => {
    if (this.closed) return;
    this.pending.push(e);
    this.timer ??= setTimeout(() => void this.flush(), this.opts.flushMs);
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
      const seen = touched.get(key) ?? (this.recent.has(key) ? { ev: { ...this.recent.get(key)! }, existed: true } : undefined);
      if (seen) {
        seen.ev.count += 1;
        seen.ev.lastTimestamp = now;
        touched.set(key, seen);
        continue;
      }
      const ev: EventObject = {
        apiVersion: "v1",
        kind: "Event",
        metadata: { name: `${eventNameBase(o.metadata.name)}.${randomUUID().slice(0, 8)}`, labels: { "loom.dev/involved-kind": o.kind, "loom.dev/involved-name": o.metadata.name } },
        involvedObject: { apiVersion: o.apiVersion, kind: o.kind, name: o.metadata.name, ...(o.metadata.uid ? { uid: o.metadata.uid } : {}) },
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
    for (let i = 0; i < entries.length; i += WRITE_CHUNK) await this.writeChunk(entries.slice(i, i + WRITE_CHUNK), now);
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
      entries.map(([, { ev, existed }]) => (existed && !asNew ? { op: "update", object: { ...ev, metadata: { ...ev.metadata, resourceVersion: undefined } } } : { op: "create", object: ev }));
    try {
      await this.store.txn(ops(false));
    } catch (err) {
      // An aggregated Event was pruned meanwhile: start those again as new Events.
      if (!isStoreError(err, "NotFound")) throw err;
      for (const [, t] of entries) if (t.existed) Object.assign(t.ev, { count: 1, firstTimestamp: now, metadata: { ...t.ev.metadata, name: `${eventNameBase(t.ev.involvedObject.name)}.${randomUUID().slice(0, 8)}` } });
      await this.store.txn(ops(true));
    }
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
export function byLastTimestamp(a: { lastTimestamp?: string; firstTimestamp?: string; metadata: { resourceVersion?: string } }, b: typeof a): number {
  const la = a.lastTimestamp ?? "", lb = b.lastTimestamp ?? "";
  if (la !== lb) return la < lb ? -1 : 1;
  return Number(a.metadata.resourceVersion ?? 0) - Number(b.metadata.resourceVersion ?? 0);
}

/** Events about one object, oldest first. */
export function eventsFor(events: EventObject[], kind: string, name: string): EventObject[] {
  return events.filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name).sort(byLastTimestamp);
}
