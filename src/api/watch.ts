// Watch: a newline-delimited JSON stream of ADDED / MODIFIED / DELETED / BOOKMARK / ERROR
// events, as the Kubernetes API server sends them.
//
// - Without a resourceVersion the client gets every current matching object as ADDED (a
//   snapshot at revision R), then changes after R; with one, the store's event log is
//   replayed after it, then live changes. Either way the stream is one store watch, so a
//   client resuming from the last resourceVersion it saw sees every change exactly once.
// - The store watch covers every kind (events of other kinds are dropped here) so that a
//   BOOKMARK can always carry the latest revision whose events were all delivered, even when
//   this kind is quiet: a resuming client then starts near "now", not from an old revision
//   the log may have compacted away.
// - The events of one revision (one store transaction may write several objects) go out in
//   one write, never split by a BOOKMARK, so resuming from a revision loses nothing.
// - Selectors are applied per event: an object that stops matching is sent as DELETED, one
//   that starts matching as ADDED, so the client's view always equals "matching objects".
// - A watcher that does not read fast enough is cut off with an ERROR event instead of
//   growing the Hub's memory or stalling its event delivery; every watcher has its own buffer.
//   The initial snapshot counts too: it is rendered a slice at a time as the client reads it,
//   so an idle watcher holds at most one buffer of it, and opening many watches never blocks
//   the event loop for long.
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { FastifyReply } from "fastify";
import { MAX_TIMER_MS } from "../resources/limits.ts";
import { isStoreError } from "../store/errors.ts";
import type { Store, StoredObject, WatchEvent, WatchEventType, WatchHandle } from "../store/store.ts";
import { status } from "./status.ts";

export type WatchConfig = {
  /** How often a BOOKMARK is sent; it is also the stream's keep-alive. */
  bookmarkMs: number;
  /** A watcher with more unsent output than this is cut off. */
  maxBufferedBytes: number;
  /** ...as is one whose output stays unsent (the socket never drains) this long. */
  drainTimeoutMs: number;
  /** How long a closing stream may take to flush its last bytes before its socket is destroyed. */
  closeGraceMs: number;
};

export const DEFAULT_WATCH_CONFIG: WatchConfig = {
  bookmarkMs: 15_000,
  maxBufferedBytes: 4 * 1024 * 1024,
  drainTimeoutMs: 30_000,
  closeGraceMs: 30_000,
};

export type WatchSpec = {
  kind: string;
  apiVersion: string;
  matches: (obj: StoredObject) => boolean;
  /** No selector: every object matches, and an event can go out as the store holds it, without decoding. */
  matchesAll?: boolean;
  /** Resume after this revision; undefined starts with a snapshot. */
  from?: number;
  /** The current objects of the kind and the revision they reflect. */
  snapshot: () => Promise<{ items: StoredObject[]; revision: number }>;
  /** End the stream cleanly after this many seconds (0: never). */
  timeoutSeconds: number;
  /** How an object goes on the wire (a one-row Table for kubectl); as stored by default. */
  render?: (obj: StoredObject) => unknown;
  /** Send BOOKMARKs (default true). */
  bookmarks?: boolean;
  /** How a BOOKMARK's object goes on the wire; by default an object of the kind carrying only its resourceVersion. */
  renderBookmark?: (resourceVersion: string) => unknown;
};

type EventType = WatchEventType | "BOOKMARK" | "ERROR";
const line = (type: EventType, object: unknown) => `${JSON.stringify({ type, object })}\n`;

/** The last lines joined, and their join: the watches of one kind mostly write the very same lines. */
let lastParts: (string | Buffer)[] = [];
let lastJoined: string | Buffer = "";

/**
 * Lines as one piece, so that they go out as one chunk of the chunked response. A client
 * reads each chunk as a piece of its own (Node's HTTP client emits a 'data' event for
 * each), and at hundreds of lines a second on every watch, a piece per line would be the
 * largest part of a client's work. The lines of a store event are encoded once and shared by every watch
 * that sends them as stored (StoredEvent.line), so the watches that write the same lines
 * in a turn share one join too.
 */
function joined(parts: (string | Buffer)[]): string | Buffer {
  if (parts.length === lastParts.length && parts.every((p, i) => p === lastParts[i])) return lastJoined;
  const out = parts.every((p) => typeof p === "string")
    ? parts.join("")
    : Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : p)));
  lastParts = parts;
  lastJoined = out;
  return out;
}

/** Snapshot + watch registration retries when the log was compacted past a fresh snapshot. */
const SNAPSHOT_ATTEMPTS = 3;

export class WatchStream {
  private res: ServerResponse | undefined;
  /** Kept apart from res: once the response has finished it is detached, and res.destroy() no longer reaches it. */
  private socket: Socket | null = null;
  /** Lines produced before the response is open. */
  private pending: (string | Buffer)[] = [];
  private handle: WatchHandle | undefined;
  /** Every event at or below this revision (of any kind) has been handled. */
  private lastRev = 0;
  /** Names the client currently holds as matching. */
  private readonly visible = new Set<string>();
  /**
   * After a resume the stream does not know what the client held at `from` until an
   * object's first event; names in here are known. Undefined: everything is known.
   */
  private known: Set<string> | undefined;
  /** Snapshot objects newer than the snapshot revision (a relisting informer): their older events are skipped. */
  private ahead = new Map<string, number>();
  /** Lines delivered in this turn (whole revisions: the store never splits one), written together at its end. */
  private batch: (string | Buffer)[] = [];
  private flushQueued = false;
  /** Snapshot objects not yet written; while set, new lines wait in `pending` behind them. */
  private snapshotLeft: StoredObject[] | undefined;
  private snapshotAt = 0;
  private pendingBytes = 0;
  /** An ERROR line for a stream cut off before its response opened. */
  private early: string | undefined;
  private bookmarkTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private drainTimer: NodeJS.Timeout | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  private render(o: StoredObject): unknown {
    return this.spec.render ? this.spec.render(o) : o;
  }

  constructor(
    private readonly spec: WatchSpec,
    private readonly cfg: WatchConfig,
    private readonly active: Set<WatchStream>,
  ) {}

  /** Register with the store. Throws StoreError Gone (before anything is sent) when `from` was compacted. */
  async start(store: Store): Promise<void> {
    if (this.spec.from !== undefined) {
      this.known = new Set();
      this.lastRev = this.spec.from;
      this.handle = await store.watch(undefined, this.spec.from, this.onEvent);
      return;
    }
    for (let attempt = 1; ; attempt++) {
      const snap = await this.spec.snapshot();
      // Prepared before watch(): the store may deliver the first events before watch() resolves.
      this.pending = [];
      this.pendingBytes = 0;
      this.visible.clear();
      this.ahead.clear();
      const items: StoredObject[] = [];
      for (const o of snap.items) {
        if (!this.spec.matches(o)) continue;
        this.visible.add(o.metadata.name);
        const rv = Number(o.metadata.resourceVersion);
        if (rv > snap.revision) this.ahead.set(o.metadata.name, rv);
        items.push(o);
      }
      // Objects are immutable in the cache, so holding references costs no copy.
      this.snapshotLeft = items;
      this.snapshotAt = 0;
      this.lastRev = snap.revision;
      try {
        this.handle = await store.watch(undefined, snap.revision, this.onEvent);
        return;
      } catch (e) {
        if (!isStoreError(e, "Gone") || attempt >= SNAPSHOT_ATTEMPTS) throw e;
      }
    }
  }

  /** Take over the response: headers now, then the snapshot, a BOOKMARK and whatever arrived meanwhile. */
  open(reply: FastifyReply): void {
    reply.hijack();
    const res = reply.raw;
    this.res = res;
    this.socket = res.socket;
    this.active.add(this);
    res.on("close", () => this.closed());
    res.on("error", () => this.closed());
    res.on("drain", () => {
      clearTimeout(this.drainTimer);
      this.drainTimer = undefined;
      if (this.snapshotLeft) this.pumpSnapshot();
    });
    if (this.early && !res.destroyed) {
      res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
      res.end(this.early);
    }
    if (res.destroyed || this.stopped) return this.closed();
    res.writeHead(200, {
      "content-type": "application/json",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
    });
    // Clamped to the longest timer Node keeps (about 24.8 days): a longer one would fire at once.
    if (this.spec.timeoutSeconds > 0)
      this.timeoutTimer = setTimeout(() => this.end(false), Math.min(this.spec.timeoutSeconds * 1000, MAX_TIMER_MS));
    if (!this.snapshotLeft) this.snapshotLeft = [];
    this.pumpSnapshot();
  }

  /**
   * Write the snapshot a slice at a time while the socket takes it; wait for "drain" when its
   * buffer is full, and yield between slices so other requests are served meanwhile.
   */
  private pumpSnapshot(): void {
    const res = this.res;
    const items = this.snapshotLeft;
    if (!res || !items || this.stopped) return;
    const slice = Math.min(64 * 1024, this.cfg.maxBufferedBytes);
    let chunk = "";
    while (this.snapshotAt < items.length && res.writableLength + chunk.length < this.cfg.maxBufferedBytes) {
      chunk += line("ADDED", this.render(items[this.snapshotAt++]));
      if (chunk.length >= slice) break;
    }
    if (chunk) res.write(chunk);
    if (this.snapshotAt < items.length) {
      if (res.writableLength >= this.cfg.maxBufferedBytes) {
        if (!this.drainTimer)
          this.drainTimer = setTimeout(
            () => this.cutOff(`the client read nothing for ${this.cfg.drainTimeoutMs} ms`),
            this.cfg.drainTimeoutMs,
          );
      } else setImmediate(() => this.pumpSnapshot());
      return;
    }
    // Snapshot done: what arrived meanwhile, then the first BOOKMARK, then live.
    this.snapshotLeft = undefined;
    const backlog = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    res.cork();
    for (const l of backlog) this.write(l);
    res.uncork();
    this.bookmark();
    if (this.spec.bookmarks !== false && !this.stopped)
      this.bookmarkTimer = setInterval(() => this.bookmark(), this.cfg.bookmarkMs);
  }

  /** Server shutdown: end the stream, and drop the socket if it cannot flush in time. */
  shutdown(): void {
    if (this.stopped)
      this.socket?.destroy(); // already ending (cut off): no more waiting for it
    else this.end(true, Math.min(this.cfg.closeGraceMs, 1000));
  }

  private readonly onEvent = (ev: WatchEvent): void => {
    if (this.stopped) return;
    if (ev.revision > this.lastRev) this.lastRev = ev.revision;
    if (ev.kind !== this.spec.kind) return;
    const name = ev.name;
    const ahead = this.ahead.get(name);
    if (ahead !== undefined) {
      if (ev.revision <= ahead) return;
      this.ahead.delete(name);
    }
    const type = this.translate(ev.type, name, ev);
    if (!type) return;
    // The stored JSON is the object as the client would get it: no decode and encode per
    // watcher, and the store's line for it is encoded once for every watcher.
    if (ev.json !== undefined && !this.spec.render)
      this.batch.push(ev.line ? ev.line(type) : `{"type":"${type}","object":${ev.json}}\n`);
    else this.batch.push(line(type, this.render(ev.object)));
    // The store delivers a revision's events in one synchronous run: it is complete by the next microtask.
    if (!this.flushQueued) {
      this.flushQueued = true;
      queueMicrotask(() => this.flush());
    }
  };

  private flush(): void {
    this.flushQueued = false;
    if (!this.batch.length) return;
    const parts = this.batch;
    this.batch = [];
    if (parts.length === 1 || !this.res) {
      for (const p of parts) this.write(p);
      return;
    }
    this.write(joined(parts));
  }

  /** The event the client should see, given what it holds; undefined sends nothing. */
  private translate(type: WatchEventType, name: string, ev: WatchEvent): WatchEventType | undefined {
    const matches = () => this.spec.matchesAll === true || this.spec.matches(ev.object);
    const had = this.visible.has(name) ? true : !this.known || this.known.has(name) ? false : undefined;
    if (type === "DELETED") {
      this.visible.delete(name);
      this.known?.delete(name);
      // The deleted object is its last state, so it tells whether an unknown holder had it.
      return had === true || (had === undefined && matches()) ? "DELETED" : undefined;
    }
    const now = matches();
    this.known?.add(name);
    if (now) this.visible.add(name);
    else this.visible.delete(name);
    if (type === "ADDED") return now ? "ADDED" : undefined;
    if (now) return had === false ? "ADDED" : "MODIFIED";
    // Not matching now: tell a client that had it (or may have had it) to drop it.
    return had === false ? undefined : "DELETED";
  }

  private bookmark(): void {
    this.flush();
    if (this.spec.bookmarks === false) return;
    const rv = String(this.lastRev);
    this.write(
      line(
        "BOOKMARK",
        this.spec.renderBookmark
          ? this.spec.renderBookmark(rv)
          : { kind: this.spec.kind, apiVersion: this.spec.apiVersion, metadata: { resourceVersion: rv } },
      ),
    );
  }

  private write(l: string | Buffer): void {
    if (this.stopped) return;
    const res = this.res;
    if (!res || this.snapshotLeft) {
      // Held behind the snapshot; bounded like the socket buffer.
      this.pending.push(l);
      this.pendingBytes += l.length;
      if (this.pendingBytes > this.cfg.maxBufferedBytes)
        this.cutOff(
          `more than ${this.cfg.maxBufferedBytes} bytes of events arrived while the client was still reading the snapshot`,
        );
      return;
    }
    const flushed = res.write(l);
    if (res.writableLength > this.cfg.maxBufferedBytes) {
      this.cutOff(`more than ${this.cfg.maxBufferedBytes} bytes of events were waiting for the client to read them`);
    } else if (!flushed && !this.drainTimer) {
      this.drainTimer = setTimeout(
        () => this.cutOff(`the client read nothing for ${this.cfg.drainTimeoutMs} ms`),
        this.cfg.drainTimeoutMs,
      );
    }
  }

  private cutOff(why: string): void {
    if (this.stopped) return;
    // 410 makes clients (client-go included) list again and watch from the new revision.
    const s = status(
      "TooSlow",
      410,
      `watch cut off because the client is too slow: ${why}; list again and watch from the list's resourceVersion`,
    );
    if (!this.res) {
      // Not open yet (a long replay): keep only the verdict, told once the response opens.
      this.stop();
      this.early = line("ERROR", s);
      return;
    }
    this.res.write(line("ERROR", s));
    this.end(true, this.cfg.closeGraceMs);
  }

  /** Stop watching and end the response; `drop` also closes the connection once flushed (or after graceMs). */
  private end(drop: boolean, graceMs = this.cfg.closeGraceMs): void {
    if (this.stopped) return;
    this.stop();
    const res = this.res;
    if (!res) return;
    if (!drop) return void res.end();
    const socket = this.socket;
    res.end(() => socket?.destroy());
    this.graceTimer = setTimeout(() => socket?.destroy(), graceMs);
    this.graceTimer.unref();
  }

  private stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.handle?.stop();
    this.handle = undefined;
    clearInterval(this.bookmarkTimer);
    clearTimeout(this.timeoutTimer);
    clearTimeout(this.drainTimer);
    this.pending = [];
    this.pendingBytes = 0;
    this.snapshotLeft = undefined;
    this.batch = [];
  }

  private closed(): void {
    this.stop();
    clearTimeout(this.graceTimer);
    this.active.delete(this);
  }
}
