// The informer: an in-memory view of some kinds, fed by list + watch. Readers (reconcilers,
// the API's list/get, admission views) read here instead of the store, so reads are map
// lookups and there is still only one copy of truth: the cache is rebuilt from the store.
//
// Objects returned by get/list/byIndex and passed to handlers are the cache's own objects,
// shared by every reader to keep reads cheap. Callers must not mutate them; copy first
// (structuredClone) before building an update.
import { isStoreError } from "./errors.ts";
import { Interner } from "./intern.ts";
import type { Kind, ObjectOf } from "../resources/types.ts";
import type { Store, StoredObject, WatchEvent, WatchEventType, WatchHandle } from "./store.ts";

export type InformerEvent<T extends StoredObject = StoredObject> = {
  type: WatchEventType;
  object: T;
  /** The cached object before this event (MODIFIED and DELETED). */
  old?: T;
  revision: number;
  /** True when the event was derived from a (re)list rather than received from the watch. */
  synthetic?: boolean;
};
export type InformerHandler = (ev: InformerEvent) => void;

/**
 * Whether an event brings a new object, its deletion (done or requested) or a new spec (the
 * generation moves only when the spec does), rather than a write of its status or of other
 * metadata alone: what a controller looks at once, where its own status writes can wait.
 */
export const isNews = (ev: InformerEvent): boolean =>
  ev.type !== "MODIFIED" ||
  ev.old?.metadata.generation !== ev.object.metadata.generation ||
  ev.old?.metadata.deletionTimestamp !== ev.object.metadata.deletionTimestamp;

export type IndexFn = (obj: StoredObject) => string[];

type Index = { fn: IndexFn; byValue: Map<string, Set<string>>; byName: Map<string, string[]> };
type Waiter = { rev: number; resolve: () => void; reject: (e: Error) => void; timer?: NodeJS.Timeout };

/** Relists in a row after Gone before giving up: only a log compacting faster than a list can run gets there. */
const MAX_RELISTS = 10;

export class Informer {
  private readonly kinds: string[];
  private readonly objects = new Map<string, Map<string, StoredObject>>();
  private readonly indexes = new Map<string, Map<string, Index>>();
  private readonly handlers = new Set<InformerHandler>();
  /** Shares the parts cached objects repeat (intern.ts). */
  private readonly interner = new Interner();
  private waiters: Waiter[] = [];
  /** Per kind: events at or below this revision are already reflected by the last list. */
  private readonly listRevision = new Map<string, number>();
  private watchHandle: WatchHandle | undefined;
  /** Bumped on every (re)list and on stop, so events of a superseded watch are ignored. */
  private epoch = 0;
  private flushQueued = false;
  private stopped = false;
  private starting: Promise<void> | undefined;
  /** (Re)lists run one at a time; a relist asked for during another waits its turn. */
  private establishing: Promise<void> = Promise.resolve();
  /** Per kind: names in list order, rebuilt lazily after a name is added or removed. */
  private readonly sortedNames = new Map<string, string[] | undefined>();

  private _synced = false;
  private _revision = 0;
  private _lastEventAt: number | undefined;

  /**
   * `pending`: see writes as soon as they are applied, before they are durable. The Hub's
   * own informer does, so a decision reads the previous one's write without waiting a flush.
   */
  constructor(
    private readonly store: Store,
    kinds: string | string[],
    private readonly opts: { pending?: boolean } = {},
  ) {
    this.kinds = [...new Set(Array.isArray(kinds) ? kinds : [kinds])];
    if (this.kinds.length === 0) throw new Error("Informer needs at least one kind");
    for (const k of this.kinds) {
      this.objects.set(k, new Map());
      this.indexes.set(k, new Map());
    }
  }

  /** True once the first list has been applied and the watch is running. */
  get synced(): boolean {
    return this._synced;
  }
  /** Every store revision up to this one is reflected in the cache. */
  get revision(): number {
    return this._revision;
  }
  /** Date.now() when the informer last heard from the store (a list or any watch event). */
  get lastEventAt(): number | undefined {
    return this._lastEventAt;
  }

  /** List, then watch from the list's revision. Resolves when synced. */
  start(): Promise<void> {
    if (this.stopped) return Promise.reject(new Error("informer stopped"));
    this.starting ??= this.serialEstablish().then(
      () => {
        this._synced = true;
        this.flush();
      },
      (e: unknown) => {
        this.starting = undefined; // let the caller retry start()
        throw e;
      },
    );
    return this.starting;
  }

  /**
   * Relist every kind and watch again, emitting ADDED / MODIFIED / DELETED for the
   * differences so handlers see one consistent stream. Done automatically on Gone.
   */
  relist(): Promise<void> {
    return this.serialEstablish();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.epoch++;
    this.watchHandle?.stop();
    this.watchHandle = undefined;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      if (w.timer) clearTimeout(w.timer);
      w.reject(new Error("informer stopped"));
    }
  }

  /** A CRD kind reads as its generated type (ObjectOf); the second form serves code that handles any kind (see Store.get). */
  get<K extends Kind>(kind: K, name: string): ObjectOf<K> | undefined;
  get<T extends StoredObject = StoredObject>(kind: string, name: string): T | undefined;
  get(kind: string, name: string): StoredObject | undefined {
    return this.kindMap(kind).get(name);
  }

  /** Whether this informer caches `kind` at all. */
  caches(kind: string): boolean {
    return this.objects.has(kind);
  }

  /** The cached objects of a kind, sorted by name (the store's list order). */
  list<K extends Kind>(kind: K): ObjectOf<K>[];
  list<T extends StoredObject = StoredObject>(kind: string): T[];
  list<T extends StoredObject>(kind: string): T[] {
    const m = this.kindMap(kind);
    let names = this.sortedNames.get(kind);
    if (!names) this.sortedNames.set(kind, (names = [...m.keys()].sort(compareNames)));
    return names.map((n) => m.get(n) as T);
  }

  /** Subscribe to changes; returns the unsubscribe function. Handlers run synchronously, in revision order. */
  on(handler: InformerHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /**
   * Resolves once the cache reflects `rev` (and is synced), so a writer can read its own
   * write: `await informer.waitForRevision(Number(written.metadata.resourceVersion))`.
   */
  waitForRevision(rev: number, timeoutMs?: number): Promise<void> {
    if (this.stopped) return Promise.reject(new Error("informer stopped"));
    if (this._synced && this._revision >= rev) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const w: Waiter = { rev, resolve, reject };
      if (timeoutMs !== undefined) {
        w.timer = setTimeout(() => {
          this.waiters = this.waiters.filter((x) => x !== w);
          reject(new Error(`informer did not reach revision ${rev} within ${timeoutMs}ms (at ${this._revision})`));
        }, timeoutMs);
      }
      this.waiters.push(w);
    });
  }

  /** Maintain a secondary index: fn returns the index values of an object (e.g. the worker a task is leased on). */
  addIndex<K extends Kind>(kind: K, indexName: string, fn: (obj: ObjectOf<K>) => string[]): void;
  addIndex(kind: string, indexName: string, fn: IndexFn): void;
  addIndex(kind: string, indexName: string, fn: (obj: never) => string[]): void {
    const idx = this.kindIndexes(kind);
    if (idx.has(indexName)) throw new Error(`index ${kind}/${indexName} already exists`);
    // fn only ever sees objects of `kind`, which is the type its overload promised it.
    const index: Index = { fn: fn as IndexFn, byValue: new Map(), byName: new Map() };
    idx.set(indexName, index);
    for (const obj of this.kindMap(kind).values()) indexAdd(index, obj);
  }

  /** The objects with this index value, sorted by name unless `sorted` is false (a count needs no order). */
  byIndex<K extends Kind>(kind: K, indexName: string, value: string, opts?: { sorted?: boolean }): ObjectOf<K>[];
  byIndex<T extends StoredObject = StoredObject>(
    kind: string,
    indexName: string,
    value: string,
    opts?: { sorted?: boolean },
  ): T[];
  byIndex<T extends StoredObject>(
    kind: string,
    indexName: string,
    value: string,
    opts: { sorted?: boolean } = {},
  ): T[] {
    const index = this.kindIndexes(kind).get(indexName);
    if (!index) throw new Error(`no index ${kind}/${indexName}`);
    const names = index.byValue.get(value);
    if (!names) return [];
    const m = this.kindMap(kind);
    const list = [...names];
    if (opts.sorted !== false) list.sort(compareNames);
    return list.map((n) => m.get(n) as T);
  }

  /** How many cached objects of a kind have this value of an index. */
  indexSize(kind: string, indexName: string, value: string): number {
    const index = this.kindIndexes(kind).get(indexName);
    if (!index) throw new Error(`no index ${kind}/${indexName}`);
    return index.byValue.get(value)?.size ?? 0;
  }

  /** How many cached objects of a kind have each value of an index: a count without a walk. */
  indexCounts(kind: string, indexName: string): Map<string, number> {
    const index = this.kindIndexes(kind).get(indexName);
    if (!index) throw new Error(`no index ${kind}/${indexName}`);
    return new Map([...index.byValue].map(([v, names]) => [v, names.size]));
  }

  // ---- internals ---------------------------------------------------------------------

  private kindMap(kind: string): Map<string, StoredObject> {
    const m = this.objects.get(kind);
    if (!m) throw new Error(`informer does not cache kind ${kind} (it caches ${this.kinds.join(", ")})`);
    return m;
  }

  private kindIndexes(kind: string): Map<string, Index> {
    this.kindMap(kind);
    return this.indexes.get(kind)!;
  }

  private serialEstablish(): Promise<void> {
    const run = this.establishing.then(() => this.establish());
    this.establishing = run.catch(() => undefined);
    return run;
  }

  private async establish(): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      if (this.stopped) throw new Error("informer stopped");
      const epoch = ++this.epoch;
      this.watchHandle?.stop();
      this.watchHandle = undefined;

      // Kinds are listed one after another, each at its own revision; the watch starts at
      // the oldest and skips, per kind, what that kind's list already reflected.
      const lists: { kind: string; items: StoredObject[]; revision: number }[] = [];
      for (const kind of this.kinds) lists.push({ kind, ...(await this.store.list(kind)) });
      if (epoch !== this.epoch) throw new Error("informer stopped");
      for (const l of lists) this.replaceKind(l.kind, l.items, l.revision);
      const from = Math.min(...lists.map((l) => l.revision));
      this._revision = Math.max(this._revision, from);
      this._lastEventAt = Date.now();

      try {
        const handle = await this.store.watch(undefined, from, (ev) => this.onWatchEvent(epoch, ev), {
          pending: this.opts.pending,
          // A deletion is told with the object as this cache holds it (onWatchEvent).
          lastStateOnDelete: false,
          // A watch the store ended (history compacted under it) is replaced by a relist.
          onError: (e) => {
            if (epoch !== this.epoch || this.stopped) return;
            console.error(`informer watch ended, listing again: ${e.message}`);
            void this.relist().catch((err: unknown) => console.error("informer relist failed:", err));
          },
        });
        if (epoch !== this.epoch) {
          handle.stop();
          throw new Error("informer stopped");
        }
        this.watchHandle = handle;
        this.queueFlush();
        return;
      } catch (e) {
        // The log was compacted past our list between the list and the watch: list again.
        if (isStoreError(e, "Gone") && attempt + 1 < MAX_RELISTS) continue;
        throw e;
      }
    }
  }

  /** Swap in a fresh list of one kind, emitting the differences from what was cached. */
  private replaceKind(kind: string, items: StoredObject[], revision: number): void {
    const cur = this.kindMap(kind);
    this.listRevision.set(kind, revision);
    if (cur.size === 0) {
      // The first list (a Hub starting on 200k tasks): everything is an addition.
      for (const obj of items) this.put(kind, obj, { type: "ADDED", object: obj, revision, synthetic: true });
      return;
    }
    const fresh = new Map(items.map((o) => [o.metadata.name, o]));
    for (const [name, old] of cur) {
      if (!fresh.has(name)) this.remove(kind, old, { type: "DELETED", object: old, old, revision, synthetic: true });
    }
    for (const [name, obj] of fresh) {
      const old = cur.get(name);
      if (!old) this.put(kind, obj, { type: "ADDED", object: obj, revision, synthetic: true });
      else if (old.metadata.resourceVersion !== obj.metadata.resourceVersion)
        this.put(kind, obj, { type: "MODIFIED", object: obj, old, revision, synthetic: true });
    }
  }

  private onWatchEvent(epoch: number, ev: WatchEvent): void {
    if (epoch !== this.epoch) return;
    this._lastEventAt = Date.now();
    // Kind and name come without decoding the object: the Events this informer does not
    // cache (two or more per lease) are never parsed.
    const kind = ev.kind;
    const map = this.objects.get(kind);
    if (map && ev.revision > (this.listRevision.get(kind) ?? 0)) {
      const old = map.get(ev.name);
      if (ev.type === "DELETED") {
        // The object as it last was, at the deletion's revision: what the store would have sent.
        if (old) {
          const object = { ...old, metadata: { ...old.metadata, resourceVersion: String(ev.revision) } };
          this.remove(kind, old, { type: "DELETED", object, old, revision: ev.revision });
        }
      } else if (!old || Number(old.metadata.resourceVersion) < ev.revision) {
        this.put(kind, ev.object, { type: old ? "MODIFIED" : "ADDED", object: ev.object, old, revision: ev.revision });
      }
    }
    if (ev.revision > this._revision) {
      this._revision = ev.revision;
      this.queueFlush();
    }
  }

  private put(kind: string, obj: StoredObject, ev: InformerEvent): void {
    this.interner.object(obj, ev.old);
    if (!ev.old) this.sortedNames.set(kind, undefined);
    this.objects.get(kind)!.set(obj.metadata.name, obj);
    for (const index of this.indexes.get(kind)!.values()) indexPut(index, obj);
    this.emit(ev);
  }

  private remove(kind: string, old: StoredObject, ev: InformerEvent): void {
    for (const index of this.indexes.get(kind)!.values()) indexRemove(index, old.metadata.name);
    this.objects.get(kind)!.delete(old.metadata.name);
    this.sortedNames.set(kind, undefined);
    this.emit(ev);
  }

  private emit(ev: InformerEvent): void {
    for (const h of this.handlers) {
      try {
        h(ev);
      } catch (err) {
        console.error(`informer handler failed on ${ev.type} ${ev.object.kind}/${ev.object.metadata.name}:`, err);
      }
    }
  }

  /**
   * Waiters are released a microtask later: the store delivers all events of a revision in
   * one synchronous run, so by then every event of that revision has been applied.
   */
  private queueFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    queueMicrotask(() => {
      this.flushQueued = false;
      this.flush();
    });
  }

  private flush(): void {
    if (!this._synced || this.waiters.length === 0) return;
    const ready = this.waiters.filter((w) => w.rev <= this._revision);
    if (ready.length === 0) return;
    this.waiters = this.waiters.filter((w) => w.rev > this._revision);
    for (const w of ready) {
      if (w.timer) clearTimeout(w.timer);
      w.resolve();
    }
  }
}

const compareNames = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function indexAdd(index: Index, obj: StoredObject): void {
  addValues(index, obj.metadata.name, distinct(index.fn(obj)));
}

/** Most index functions return none or one value: those need no Set. */
const distinct = (values: string[]): string[] => (values.length < 2 ? values : [...new Set(values)]);

function addValues(index: Index, name: string, values: string[]): void {
  if (values.length === 0) return;
  index.byName.set(name, values);
  for (const v of values) {
    let s = index.byValue.get(v);
    if (!s) index.byValue.set(v, (s = new Set()));
    s.add(name);
  }
}

/**
 * Index a new version of an object. Most writes leave its index values as they were (a
 * queued task stays queued); those touch nothing, which spares a large set (every queued
 * task's name under "queued") a delete and an insert per write, and the rehash they cause.
 */
function indexPut(index: Index, obj: StoredObject): void {
  const name = obj.metadata.name;
  const values = distinct(index.fn(obj));
  const had = index.byName.get(name);
  if (had && had.length === values.length && had.every((v, i) => v === values[i])) return;
  indexRemove(index, name);
  addValues(index, name, values);
}

function indexRemove(index: Index, name: string): void {
  const values = index.byName.get(name);
  if (!values) return;
  index.byName.delete(name);
  for (const v of values) {
    const s = index.byValue.get(v);
    if (!s) continue;
    s.delete(name);
    if (s.size === 0) index.byValue.delete(v);
  }
}
