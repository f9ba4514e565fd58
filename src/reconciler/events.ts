// Events: what happened to an object (lease granted, released, expired, requeued, push
// refused, file rejected), stored as `Event` objects tied to it, kept for a bounded time
// and count. Recording never blocks the caller: events are batched into one write.
import { randomUUID } from "node:crypto";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import type { LoomEvent } from "../scheduler/context.ts";

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
  maxEvents: number;
  ttlMs: number;
  flushMs: number;
  onError?: (e: unknown) => void;
  /** Whether this Hub drops old Events (only the leader of several replicas does). Default: yes. */
  prune?: () => boolean;
};

/** An Event's own name follows the object's, made safe: a file path is not a valid name. */
export function eventNameBase(name: string): string {
  const safe = name.replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^[^A-Za-z0-9]+/, "").slice(-200);
  return safe.replace(/^[^A-Za-z0-9]+/, "") || "object";
}

export class EventRecorder {
  private pending: LoomEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly store: Store, private readonly opts: EventRecorderOptions = { maxEvents: 5000, ttlMs: 3_600_000, flushMs: 100 }) {}

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

  private async write(batch: LoomEvent[]): Promise<void> {
    const now = new Date().toISOString();
    const ops: TxnOp[] = batch.map((e) => {
      const o = e.object;
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
      return { op: "create", object: ev };
    });
    if (ops.length) await this.store.txn(ops);
    await this.prune();
  }

  private lastPrune = 0;
  private async prune(): Promise<void> {
    const nowMs = Date.now();
    if (nowMs - this.lastPrune < 10_000 || this.opts.prune?.() === false) return;
    this.lastPrune = nowMs;
    const { items } = await this.store.list<EventObject>("Event");
    const cutoff = new Date(nowMs - this.opts.ttlMs).toISOString();
    items.sort((a, b) => (a.lastTimestamp < b.lastTimestamp ? -1 : a.lastTimestamp > b.lastTimestamp ? 1 : 0));
    const excess = Math.max(0, items.length - this.opts.maxEvents);
    const drop = items.filter((e, i) => i < excess || e.lastTimestamp < cutoff);
    for (let i = 0; i < drop.length; i += 500)
      await this.store.txn(drop.slice(i, i + 500).map((e) => ({ op: "delete" as const, kind: "Event", name: e.metadata.name })));
  }

  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
  }
}

/** Events about one object, oldest first. */
export function eventsFor(events: EventObject[], kind: string, name: string): EventObject[] {
  return events.filter((e) => e.involvedObject.kind === kind && e.involvedObject.name === name).sort((a, b) => (a.lastTimestamp < b.lastTimestamp ? -1 : 1));
}
