// The etcd store's watch events, and one etcd watch shared by the API's watches.
//
// Each watch the API serves reads every object's events (it filters by kind itself, and
// needs every revision for its BOOKMARKs) with each deleted object's last state, and so does
// GitOps's watch of the objects it applied. On etcd, a watch of its own for each would have
// etcd send every event once per watch, and the Hub decode and encode each copy: with
// hundreds of clients watching, etcd and the Hub spend their time on the copies, and leases
// wait. So those watches share one etcd watch:
//
// - The etcd watch starts where the first of them asked to, and keeps the last events it
//   delivered. A watch that asks to start at a revision those events cover is served from
//   them, then live, in one synchronous step: nothing lost, nothing twice. A watch that
//   asks for an older revision gets an etcd watch of its own.
// - Each event's JSON, as a watch line sends it, is encoded once for all of them; each
//   watch still decodes its own copy of the object if it reads it.
// - The etcd watch ends when its last watch stops. If it fails (its history compacted while
//   reconnecting), every watch on it is told, as each would have been alone.
import type { IKeyValue, Watcher } from "etcd3";
import type { StoredObject, WatchEvent, WatchEventType, WatchHandle } from "./store.ts";

/** The object a put of this process stored at `revision`, if it is the one etcd reports. */
export type OwnWrite = (key: string, revision: number) => StoredObject | undefined;

export function parseStored(json: string, rev: number): StoredObject {
  const obj = JSON.parse(json) as StoredObject;
  obj.metadata.resourceVersion = String(rev);
  return obj;
}

/** What a DELETED event without the last state carries: the kind and name its key names, at the deletion's revision. */
function tombstone(key: string, objectsPrefix: number, revision: number): StoredObject {
  const [kind, name] = key.slice(objectsPrefix).split("/");
  return { apiVersion: "", kind, metadata: { name, resourceVersion: String(revision) } };
}

/** One event of an etcd watch response, as the store's watches see it. */
type Raw = {
  /** "Put" or "Delete". */
  type: string;
  kv: IKeyValue;
  prev_kv?: IKeyValue;
};

/** One etcd event, with what every watch that reads it may share: its JSON and its watch lines. */
export class EtcdRecord {
  readonly type: WatchEventType;
  readonly revision: number;
  readonly key: string;
  readonly kind: string;
  readonly name: string;
  /** The object's stored bytes: the put's, or for a deletion the last state (if asked for). */
  readonly stored: IKeyValue | undefined;
  private json: string | undefined;
  private lines: Partial<Record<WatchEventType, Buffer>> | undefined;

  constructor(
    ev: Raw,
    private readonly objectsPrefix: number,
    private readonly own: OwnWrite,
  ) {
    this.revision = Number(ev.kv.mod_revision);
    this.key = ev.kv.key.toString();
    const slash = this.key.indexOf("/", objectsPrefix);
    this.kind = this.key.slice(objectsPrefix, slash);
    this.name = this.key.slice(slash + 1);
    this.type = ev.type === "Delete" ? "DELETED" : ev.kv.version === "1" ? "ADDED" : "MODIFIED";
    this.stored = this.type === "DELETED" ? ev.prev_kv : ev.kv;
  }

  /** A decoded copy of the object (or this process's own, which nobody changes). */
  decode(): StoredObject {
    return this.stored
      ? (this.own(this.key, this.revision) ?? parseStored(this.stored.value.toString(), this.revision))
      : tombstone(this.key, this.objectsPrefix, this.revision);
  }

  /** The object's JSON with its resourceVersion, as a watch sends it; encoded once. */
  text(): string {
    return (this.json ??= JSON.stringify(this.decode()));
  }

  line(type: WatchEventType): Buffer {
    const lines = (this.lines ??= {});
    return (lines[type] ??= Buffer.from(`{"type":"${type}","object":${this.text()}}\n`));
  }
}

/** A watch event reading one record, decoded on first read. */
export class EtcdEvent implements WatchEvent {
  readonly type: WatchEventType;
  readonly revision: number;
  readonly kind: string;
  readonly name: string;
  private decoded: StoredObject | undefined;

  constructor(protected readonly rec: EtcdRecord) {
    this.type = rec.type;
    this.revision = rec.revision;
    this.kind = rec.kind;
    this.name = rec.name;
  }

  get object(): StoredObject {
    // Decoded per watch: no two consumers ever share (and could change) one object.
    return (this.decoded ??= this.rec.decode());
  }
}

/** An event of a shared watch: it also offers the JSON and the watch lines, encoded once for every watch. */
class SharedEvent extends EtcdEvent {
  get json(): string {
    return this.rec.text();
  }

  line(type: WatchEventType): Buffer {
    return this.rec.line(type);
  }
}

type Subscriber = {
  /** Events after this revision are delivered. */
  from: number;
  /** The revision the watch asked for, as its Gone error names it. */
  asked: number;
  onEvent: (ev: WatchEvent) => void;
  onError?: (e: Error) => void;
  stopped: boolean;
};

/** How many events a shared watch keeps for watches that start a little behind it. */
const KEPT_EVENTS = 1024;

/** One etcd watch of every object (with deleted objects' last states) and the watches it serves. */
export class SharedWatch {
  private readonly subscribers = new Set<Subscriber>();
  /** The last events delivered, in order; every event after `floor` is here or still to come. */
  private kept: EtcdRecord[] = [];
  private floor: number;
  private ended = false;
  /** Settles once etcd has accepted the watch; rejects if it refused it (the watch has then ended). */
  readonly ready: Promise<void>;

  /**
   * `watcher` is an etcd watch from `from + 1`, not yet connected. `onEnd` runs once the
   * last subscriber has stopped or the watch failed: the store drops this shared watch.
   */
  constructor(
    private readonly watcher: Watcher,
    from: number,
    private readonly objectsPrefix: number,
    private readonly own: OwnWrite,
    private readonly failure: (err: Error, asked: number) => Error,
    private readonly onEnd: () => void,
  ) {
    this.floor = from;
    this.ready = new Promise<void>((resolve, reject) => {
      watcher.once("connected", () => resolve());
      watcher.once("error", reject);
    });
    watcher.on("data", (res: { events: Raw[] }) => this.deliver(res.events));
    watcher.on("error", (err: Error) => this.fail(err));
  }

  /** Whether a watch from `from` can be served: every event after it is kept or still to come. */
  covers(from: number): boolean {
    return !this.ended && from >= this.floor;
  }

  /** Serve a watch from `from` (covers(from) must hold): the kept events after it now, then live ones. */
  subscribe(from: number, asked: number, onEvent: (ev: WatchEvent) => void, onError?: (e: Error) => void): WatchHandle {
    const sub: Subscriber = { from, asked, onEvent, onError, stopped: false };
    for (const rec of this.kept) if (rec.revision > from) this.send(sub, rec);
    this.subscribers.add(sub);
    return {
      stop: () => {
        sub.stopped = true;
        this.subscribers.delete(sub);
        if (this.subscribers.size === 0) this.end();
      },
    };
  }

  /** Cancel the etcd watch; the subscribers (if any) are told nothing (the store is closing). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.subscribers.clear();
    this.kept = [];
    void this.watcher.cancel().catch(() => undefined);
    this.onEnd();
  }

  private deliver(events: Raw[]): void {
    if (this.ended) return;
    // etcd never splits one revision across responses: each revision goes out in one run.
    for (const ev of events) {
      const rec = new EtcdRecord(ev, this.objectsPrefix, this.own);
      this.kept.push(rec);
      for (const sub of this.subscribers) if (rec.revision > sub.from) this.send(sub, rec);
    }
    if (this.kept.length > KEPT_EVENTS) this.trim();
  }

  /** Drop the oldest events, whole revisions at a time, down to three quarters of the limit. */
  private trim(): void {
    let cut = this.kept.length - Math.floor((KEPT_EVENTS * 3) / 4);
    const last = this.kept[cut - 1].revision;
    while (cut < this.kept.length && this.kept[cut].revision === last) cut++;
    this.floor = Math.max(this.floor, last);
    this.kept = this.kept.slice(cut);
  }

  private send(sub: Subscriber, rec: EtcdRecord): void {
    if (sub.stopped) return;
    try {
      sub.onEvent(new SharedEvent(rec));
    } catch (err) {
      console.error(`store watch callback failed at revision ${rec.revision}:`, err);
    }
  }

  private fail(err: Error): void {
    if (this.ended) return;
    const subs = [...this.subscribers];
    this.ended = true;
    this.subscribers.clear();
    this.kept = [];
    this.onEnd();
    for (const sub of subs) {
      sub.stopped = true;
      const e = this.failure(err, sub.asked);
      if (sub.onError) sub.onError(e);
      else console.error(`etcd store watch ended:`, e.message);
    }
  }
}
