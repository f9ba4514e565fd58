// The embedded Store: one SQLite file in WAL mode, with group commit.
//
// better-sqlite3 is synchronous, so every write runs start to finish inside one JS turn:
// no other write of this process can interleave. Writes that arrive while the disk is busy
// form a group: each runs in its own SAVEPOINT inside one open SQLite transaction (a write
// that fails rolls back alone), and the group is committed once, right before one
// fdatasync of the WAL that runs off the event loop (wal-sync.ts). A commit appends to the
// WAL without waiting for the disk (synchronous = NORMAL); a write is acknowledged only once
// the flush after its group's commit has completed, so an answered request survives kill -9
// and power loss. NORMAL still syncs the WAL before every checkpoint and the database after
// it, so checkpointed pages are never at risk. This connection reads its own group's writes
// at once; other processes see a group once it is committed. The file is meant to be owned by one Hub process (several replicas use
// the etcd backend); revisions are still read inside each write transaction so a second
// process (a CLI, a test) can never produce duplicate revisions, but only writes made by
// this process are streamed live to its watchers.
import Database from "better-sqlite3";
import { allocationOf, allocationQueue, type Allocation } from "../admission/guard.ts";
import { addAmounts, demandOf } from "../admission/queues.ts";
import type { Task } from "../resources/types.ts";
import { jsonClone } from "../resources/json.ts";
import { gone } from "./errors.ts";
import {
  allocationChange,
  badRequest,
  decideOp,
  guardLease,
  guardQueue,
  objectValidator,
  TxnWrites,
  type OpView,
} from "./ops.ts";
import { labelSelectorMatcher } from "./labels.ts";
import type {
  Applied,
  ApplyOptions,
  Known,
  CommitStats,
  ListOptions,
  ListResult,
  Store,
  StoredObject,
  TxnOp,
  WatchEvent,
  WatchEventType,
  WatchHandle,
  WatchOptions,
} from "./store.ts";
import { Checkpointer, type CheckpointRound, type CheckpointStats } from "./checkpointer.ts";
import { WalSync } from "./wal-sync.ts";
import { AllocationIndex } from "./allocation-index.ts";
import { iso } from "../resources/time.ts";

export type SqliteStoreOptions = {
  /** Most events the log keeps; older ones are compacted after commits. Default 100_000. */
  eventLogLimit?: number;
  /** How long a write waits for another process's lock, in ms. Default 5000. */
  busyTimeoutMs?: number;
  /** The longest a written page waits in the WAL for a background checkpoint, in ms. Default 1000. */
  checkpointEveryMs?: number;
  /**
   * Past this size the WAL is started over under load: the store copies what the background
   * checkpoint left between two groups (checkpointer.ts). Default 64 MiB.
   */
  walRestartBytes?: number;
};

const WAL_RESTART_BYTES = 64 * 1024 * 1024;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  revision INTEGER NOT NULL,
  compacted INTEGER NOT NULL,
  event_count INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (id, revision, compacted, event_count) VALUES (1, 0, 0, 0);
-- The current objects: each row points at the event that wrote it (events.seq), so an
-- object's JSON is stored once per revision, in the log. A row stays small, and one page
-- holds many, so a group of writes dirties few pages of this table. lease is 1 on the row
-- of a Task that holds an active lease: the lease index (allocation-index.ts) is built from
-- those Tasks alone, and the flag is written with the row, in the same statement.
CREATE TABLE IF NOT EXISTS objects (
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  seq INTEGER NOT NULL,
  revision INTEGER NOT NULL,
  lease INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (kind, name)
);
-- The event log, and the JSON of every current object. seq orders the several events of one
-- transaction (they share a revision). Compaction drops the events at or below
-- meta.compacted except those current objects point at: they stay, out of the log (no
-- watch replays them), until their object is written again or deleted.
CREATE TABLE IF NOT EXISTS events (
  seq INTEGER PRIMARY KEY,
  revision INTEGER NOT NULL,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  type TEXT NOT NULL,
  json TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_revision ON events (revision);
-- Replays of one kind scan by revision: a second index would cost every write a b-tree insert.
DROP INDEX IF EXISTS events_by_kind;
`;

/** Events the log drops at a time once past its limit: about a millisecond of deleting rows. */
const COMPACT_STEP = 500;

/**
 * PRAGMA user_version: 1 = an allocations table holds the active leases; 2 = objects rows
 * point into the event log instead of holding their own JSON (upgradeLayout()); 3 = the
 * objects rows flag the Tasks that hold a lease, and the allocations table is gone
 * (upgradeLeaseFlags()).
 */
const SCHEMA_VERSION = 3;

type Meta = { revision: number; compacted: number; event_count: number };
type PendingEvent = {
  revision: number;
  kind: string;
  name: string;
  type: WatchEventType;
  json: string;
  /** Its watch lines by type, encoded on first use and shared by every watcher. */
  lines?: Partial<Record<WatchEventType, Buffer>>;
  /**
   * The object as this process wrote it, handed to the first pending watcher (the Hub's own
   * informer) instead of decoding `json` again. Never mutated after the write: callers and
   * the informer treat stored objects as read-only.
   */
  written?: StoredObject;
};

/** A watch event whose object is decoded on first read: a watcher that skips it never pays for it. */
class StoredEvent implements WatchEvent {
  private decoded: StoredObject | undefined;
  readonly kind: string;
  readonly name: string;
  readonly type: WatchEventType;
  readonly revision: number;
  readonly json: string;
  constructor(
    private readonly e: PendingEvent,
    decoded?: StoredObject,
  ) {
    this.decoded = decoded;
    this.kind = e.kind;
    this.name = e.name;
    this.type = e.type;
    this.revision = e.revision;
    this.json = e.json;
  }
  line(type: WatchEventType): Buffer {
    const lines = (this.e.lines ??= {});
    return (lines[type] ??= Buffer.from(`{"type":"${type}","object":${this.json}}\n`));
  }
  get object(): StoredObject {
    // Decoded per watcher: no two consumers ever share (and could mutate) one object.
    return (this.decoded ??= JSON.parse(this.json) as StoredObject);
  }
}

type Watcher = {
  kind: string | undefined;
  /** Receives applied writes before they are durable (the Hub's informer only). */
  pending: boolean;
  cb: (ev: WatchEvent) => void;
  /** Highest revision queued so far; later batches at or below it are never queued twice. */
  cursor: number;
  queue: PendingEvent[];
  head: number;
  busy: boolean;
  stopped: boolean;
};

const LIST_SQL = "SELECT e.json FROM objects o JOIN events e ON e.seq = o.seq WHERE o.kind = ? ORDER BY o.name";

/** How long a list decodes rows before it yields to I/O. */
const LIST_SLICE_MS = 8;

/** Events delivered per turn before yielding to I/O; a turn never ends inside one revision. */
const DELIVERY_CHUNK = 1000;

/** Objects kept decoded after their write, for the next write of the same object (see current()). */
const RECENT_OBJECTS = 4096;

export class SqliteStore extends TxnWrites implements Store {
  readonly backend = "sqlite";
  /** One SQLite transaction holds any number of writes. */
  readonly maxWritesPerTxn = Number.POSITIVE_INFINITY;
  readonly path: string;
  private readonly db: Database.Database;
  private readonly eventLogLimit: number;
  private readonly busyTimeoutMs: number;
  private readonly watchers = new Set<Watcher>();
  private readonly recent = new Map<string, StoredObject>();
  /** PRAGMA data_version when the last group opened: it moves when another connection commits. */
  private dataVersion = -1;
  /** What the running write transaction has written so far, by key (null: deleted); see current(). */
  private txnWritten: Map<string, StoredObject | null> | undefined;
  /** The running write transaction's ApplyOptions.known; see current(). */
  private txnKnown: Known | undefined;
  private closed = false;
  /** The active leases in memory (allocation-index.ts); built on first use and again after another connection's commit. */
  private readonly allocs = new AllocationIndex();
  private allocsLoaded = false;
  /** The running write transaction's allocation changes, to undo if it rolls back. */
  private allocUndo: [string, Allocation | undefined][] | undefined;
  private readonly validate = objectValidator();

  private readonly st: {
    meta: Database.Statement<[], Meta>;
    setMeta: Database.Statement<[number, number, number]>;
    head: Database.Statement<[string, string], [number, number]>;
    eventJson: Database.Statement<[number], string>;
    count: Database.Statement<[string], number>;
    get: Database.Statement<[string, string], string>;
    dataVersion: Database.Statement<[], number>;
    begin: Database.Statement<[]>;
    commit: Database.Statement<[]>;
    list: Database.Statement<[string], string>;
    insert: Database.Statement<[string, string, number | bigint, number, number]>;
    replace: Database.Statement<[number | bigint, number, number, string, string]>;
    del: Database.Statement<[string, string]>;
    dropStale: Database.Statement<[string, string, number]>;
    addEvent: Database.Statement<[number, string, string, string, string]>;
    eventsAll: Database.Statement<[number], [number, string, string, string, string]>;
    eventsKind: Database.Statement<[string, number], [number, string, string, string, string]>;
    nthEventRevision: Database.Statement<[number, number], number>;
    countEvents: Database.Statement<[number, number], number>;
    dropEvents: Database.Statement<[number, number]>;
    leased: Database.Statement<[], string>;
  };
  private readonly sync: WalSync;
  private readonly checkpointer: Checkpointer;
  /** Applied batches of events that pending=false watchers have not been given yet. */
  private undurable: PendingEvent[][] = [];
  private readonly walRestartBytes: number;
  private readonly pageSize: number;
  /** A background round left the WAL past walRestartBytes: the next commitGroup finishes the checkpoint. */
  private finishDue = false;
  /** The open group's meta row (openGroup), and whether a write of the group changed it. */
  private group: { meta: Meta; dirty: boolean } | undefined;
  private readonly writeTxn: Database.Transaction<
    (ops: TxnOp[], opts: ApplyOptions) => { results: StoredObject[]; events: PendingEvent[]; meta: Meta }
  >;
  private readonly readTxn: <R>(fn: () => R) => R;

  constructor(path: string, opts: SqliteStoreOptions = {}) {
    super();
    const limit = opts.eventLogLimit ?? 100_000;
    if (!Number.isInteger(limit) || limit < 0)
      throw new Error(`eventLogLimit must be a non-negative integer, got ${limit}`);
    this.eventLogLimit = limit;
    this.busyTimeoutMs = opts.busyTimeoutMs ?? 5000;
    this.walRestartBytes = opts.walRestartBytes ?? WAL_RESTART_BYTES;
    this.path = path;
    this.db = new Database(path);
    try {
      // A store written by a later Loom is refused before anything in it changes.
      const version = Number(this.db.pragma("user_version", { simple: true }));
      if (version > SCHEMA_VERSION)
        throw new Error(
          `sqlite store ${path} has schema version ${version}, written by a later Loom; this one reads versions up to ${SCHEMA_VERSION}`,
        );
      this.db.pragma("journal_mode = WAL");
      // NORMAL: commits do not wait for the disk; WalSync makes them durable in groups.
      this.db.pragma("synchronous = NORMAL");
      // Checkpoints run in a worker thread (checkpointer.ts), not inside this thread's commits.
      this.db.pragma("wal_autocheckpoint = 0");
      this.db.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
      this.db.exec(SCHEMA);
      this.upgradeLayout();
      this.upgradeLeaseFlags(version);
      this.pageSize = Number(this.db.pragma("page_size", { simple: true }));
    } catch (e) {
      this.db.close();
      throw e;
    }
    const db = this.db;
    this.st = {
      meta: db.prepare<[], Meta>("SELECT revision, compacted, event_count FROM meta WHERE id = 1"),
      setMeta: db.prepare("UPDATE meta SET revision = ?, compacted = ?, event_count = ? WHERE id = 1"),
      head: db
        .prepare<[string, string], [number, number]>("SELECT seq, revision FROM objects WHERE kind = ? AND name = ?")
        .raw(),
      eventJson: db.prepare<[number], string>("SELECT json FROM events WHERE seq = ?").pluck(),
      count: db.prepare<[string], number>("SELECT COUNT(*) FROM objects WHERE kind = ?").pluck(),
      get: db
        .prepare<[string, string], string>(
          "SELECT e.json FROM objects o JOIN events e ON e.seq = o.seq WHERE o.kind = ? AND o.name = ?",
        )
        .pluck(),
      dataVersion: db.prepare<[], number>("PRAGMA data_version").pluck(),
      begin: db.prepare("BEGIN IMMEDIATE"),
      commit: db.prepare("COMMIT"),
      list: db.prepare<[string], string>(LIST_SQL).pluck(),
      insert: db.prepare("INSERT INTO objects (kind, name, seq, revision, lease) VALUES (?, ?, ?, ?, ?)"),
      replace: db.prepare("UPDATE objects SET seq = ?, revision = ?, lease = ? WHERE kind = ? AND name = ?"),
      del: db.prepare("DELETE FROM objects WHERE kind = ? AND name = ?"),
      // The event an object is about to stop pointing at, when compaction kept it only for the object.
      dropStale: db.prepare(
        "DELETE FROM events WHERE seq = (SELECT seq FROM objects WHERE kind = ? AND name = ?) AND revision <= ?",
      ),
      addEvent: db.prepare("INSERT INTO events (revision, kind, name, type, json) VALUES (?, ?, ?, ?, ?)"),
      eventsAll: db
        .prepare<[number], [number, string, string, string, string]>(
          "SELECT revision, kind, name, type, json FROM events WHERE revision > ? ORDER BY revision, seq",
        )
        .raw(),
      eventsKind: db
        .prepare<[string, number], [number, string, string, string, string]>(
          "SELECT revision, kind, name, type, json FROM events WHERE kind = ? AND revision > ? ORDER BY revision, seq",
        )
        .raw(),
      nthEventRevision: db
        .prepare<[number, number], number>(
          "SELECT revision FROM events WHERE revision > ? ORDER BY revision, seq LIMIT 1 OFFSET ?",
        )
        .pluck(),
      countEvents: db
        .prepare<[number, number], number>("SELECT count(*) FROM events WHERE revision > ? AND revision <= ?")
        .pluck(),
      // The log's events in (from, to], except those a current object points at.
      dropEvents: db.prepare(
        "DELETE FROM events WHERE revision > ? AND revision <= ? AND NOT EXISTS (SELECT 1 FROM objects o WHERE o.kind = events.kind AND o.name = events.name AND o.seq = events.seq)",
      ),
      leased: db
        .prepare<[], string>(
          "SELECT e.json FROM objects o JOIN events e ON e.seq = o.seq WHERE o.kind = 'Task' AND o.lease = 1",
        )
        .pluck(),
    };
    this.checkpointer = new Checkpointer(
      path,
      (why) => {
        console.error(
          `sqlite store ${path}: background checkpoints stopped (${why}); SQLite checkpoints inside commits again`,
        );
        if (!this.closed) this.db.pragma("wal_autocheckpoint = 1000");
      },
      opts.checkpointEveryMs ?? 1000,
      (round) => this.afterCheckpoint(round),
    );
    this.sync = new WalSync(
      `${path}-wal`,
      this.st.meta.get()!.revision,
      (rev) => this.releaseDurable(rev),
      () => this.commitGroup(),
    );
    this.writeTxn = db.transaction((ops: TxnOp[], opts: ApplyOptions) => this.applyOps(ops, opts));
    // A deferred transaction gives several reads one snapshot (matters only with a second process).
    const read = db.transaction((fn: () => unknown) => fn());
    this.readTxn = <R>(fn: () => R): R => read.deferred(fn) as R;
  }

  // ---- reads -------------------------------------------------------------------------

  async get<T extends StoredObject = StoredObject>(kind: string, name: string): Promise<T | undefined> {
    this.open();
    const json = this.st.get.get(kind, name);
    return json === undefined ? undefined : (JSON.parse(json) as T);
  }

  /**
   * One snapshot of a kind, read on a connection of its own so that it can yield to I/O
   * between rows while this connection goes on writing (WAL lets a reader keep its snapshot
   * beside a writer). Rows are decoded as they are read: a list of 200,000 Tasks never holds
   * every row's text at once beside the decoded objects, which at a Hub's start was the
   * largest part of its memory.
   */
  async list<T extends StoredObject = StoredObject>(kind: string, opts: ListOptions = {}): Promise<ListResult<T>> {
    this.open();
    const match = labelSelectorMatcher(opts.labelSelector);
    // The reader sees committed rows only: what this connection applied is committed first
    // (its flush still makes it durable), so a list shows every write applied before it.
    if (this.db.inTransaction) this.commitGroup();
    const reader = new Database(this.path, { readonly: true, fileMustExist: true });
    try {
      reader.pragma(`busy_timeout = ${this.busyTimeoutMs}`);
      // Deferred: the first read takes the snapshot, and the meta row is read in it.
      reader.exec("BEGIN");
      const revision = reader.prepare<[], number>("SELECT revision FROM meta WHERE id = 1").pluck().get()!;
      const rows = reader.prepare<[string], string>(LIST_SQL).pluck().iterate(kind);
      const items: T[] = [];
      let sliceStart = performance.now();
      let i = 0;
      for (const json of rows) {
        const obj = JSON.parse(json) as T;
        if (match(obj.metadata?.labels)) items.push(obj);
        // 15,000 Events for the Event GC, 200,000 Tasks for a relist: the loop yields every few milliseconds.
        if ((++i & 255) === 0 && performance.now() - sliceStart >= LIST_SLICE_MS) {
          await new Promise((resolve) => setImmediate(resolve));
          this.open();
          sliceStart = performance.now();
        }
      }
      reader.exec("COMMIT");
      return { items, revision };
    } finally {
      reader.close();
    }
  }

  async count(kind: string): Promise<number> {
    this.open();
    return this.st.count.get(kind)!;
  }

  /** Nothing expires on its own here: the Event GC drops old Events. */
  expires(): boolean {
    return false;
  }

  async revision(): Promise<number> {
    this.open();
    return this.meta().revision;
  }

  /** The revision at or below which events have been dropped; watching from below it is Gone. */
  compactedRevision(): number {
    this.open();
    return this.meta().compacted;
  }

  /** How many events the log holds now (bounded by eventLogLimit). */
  eventLogSize(): number {
    this.open();
    return this.meta().event_count;
  }

  /** The settings that make each commit durable, for diagnostics (synchronous 2 = FULL). */
  pragmas(): { journalMode: string; synchronous: number; busyTimeout: number } {
    this.open();
    return {
      journalMode: String(this.db.pragma("journal_mode", { simple: true })),
      synchronous: Number(this.db.pragma("synchronous", { simple: true })),
      busyTimeout: Number(this.db.pragma("busy_timeout", { simple: true })),
    };
  }

  // ---- writes ------------------------------------------------------------------------

  /**
   * One revision for every write in `ops`. Returns the written objects in op order; `check`
   * ops write nothing and contribute no entry. A txn of checks only commits no revision.
   */
  /** The commit happens before this returns (synchronously); only durability is awaited later. */
  async apply(ops: TxnOp[], opts: ApplyOptions = {}): Promise<Applied> {
    return this.commit(ops, opts);
  }

  /** The WAL flushes the writes went out in (group commit, wal-sync.ts); writes here never race, so none fails. */
  commitStats(): CommitStats {
    return { commits: this.sync.flushes, writes: this.sync.flushedWrites, failed: 0 };
  }

  /** One PRAGMA's value on this connection, for diagnostics. */
  pragmaValue(name: string): unknown {
    this.open();
    return this.db.pragma(name, { simple: true });
  }

  /** Background WAL checkpoints run so far (checkpointer.ts). */
  checkpointStats(): CheckpointStats {
    return { ...this.checkpointer.stats };
  }

  /** The highest revision known to be on disk. */
  durableRevision(): number {
    return this.sync.durableRevision;
  }

  async compact(revision: number): Promise<void> {
    this.open();
    // Inside an open group this is a savepoint of it, committed with the group.
    this.db
      .transaction(() => {
        const m = this.meta();
        const upTo = Math.min(Math.floor(revision), m.revision);
        if (upTo <= m.compacted) return;
        const left = this.st.countEvents.get(m.compacted, upTo)!;
        this.st.dropEvents.run(m.compacted, upTo);
        this.setMeta({ revision: m.revision, compacted: upTo, event_count: m.event_count - left });
      })
      .immediate();
  }

  private commit(ops: TxnOp[], opts: ApplyOptions = {}): Applied {
    this.open();
    if (!Array.isArray(ops)) throw badRequest("txn: ops must be an array");
    if (ops.length === 0) return { results: [], revision: this.meta().revision, durable: Promise.resolve() };
    const opened = !this.db.inTransaction;
    if (opened) this.openGroup();
    let out: { results: StoredObject[]; events: PendingEvent[]; meta: Meta };
    const undo: [string, Allocation | undefined][] = [];
    this.allocUndo = undo;
    try {
      // Inside the group's transaction better-sqlite3 runs this as a SAVEPOINT.
      out = this.writeTxn(ops, opts);
    } catch (e) {
      // The SAVEPOINT rolled back: so do the allocations it changed, last first.
      for (let i = undo.length - 1; i >= 0; i--) this.allocs.set(undo[i][0], undo[i][1]);
      if (opened) this.commitGroup(); // nothing of this group was written
      throw e;
    } finally {
      this.allocUndo = undefined;
    }
    const { results, events } = out;
    if (events.length === 0) {
      if (opened) this.commitGroup();
      return { results, revision: this.meta().revision, durable: Promise.resolve() };
    }
    this.setMeta(out.meta);
    const revision = events[0].revision;
    this.remember(events);
    this.publish(events);
    this.checkpointer.written();
    return { results, revision, durable: this.sync.after(revision) };
  }

  /** Runs inside BEGIN IMMEDIATE: any throw rolls the whole transaction back. */
  private applyOps(ops: TxnOp[], opts: ApplyOptions): { results: StoredObject[]; events: PendingEvent[]; meta: Meta } {
    const shared = opts.readOnlyResults === true;
    const owned = opts.ownedInput === true;
    const meta = this.meta();
    const rev = meta.revision + 1;
    const rv = String(rev);
    const results: StoredObject[] = [];
    const events: PendingEvent[] = [];
    const now = iso(Date.now());

    const view: OpView = {
      current: (kind, name) => this.current(kind, name),
      allocate: (kind, before, after) => this.allocate(kind, before, after),
    };
    // current() reads this transaction's own writes from here (a txn may write an object twice).
    const written = new Map<string, StoredObject | null>();
    this.txnWritten = written;
    this.txnKnown = opts.known;
    try {
      for (const op of ops) {
        const e = decideOp(op, view, now, rv, this.validate, owned);
        if (!e) continue;
        // The stored object stays this process's (current(), the informer); the caller gets its
        // own copy, unless it said it only reads it.
        results.push(shared ? e.result : jsonClone(e.result));
        const { kind, name } = e;
        // The event the object pointed at, if compaction kept it only for the object (the row's
        // revision is the replaced object's: at or below the compacted one, the log dropped it).
        if (e.replaced !== undefined && Number(e.replaced) <= meta.compacted)
          this.st.dropStale.run(kind, name, meta.compacted);
        if (e.type === "DELETED") {
          this.st.del.run(kind, name);
          // The event carries the deletion's revision, so a client resuming from the last
          // object it saw does not receive the deletion twice (as Kubernetes does).
          const gone = { ...e.result, metadata: { ...e.result.metadata, resourceVersion: rv } };
          const json = JSON.stringify(gone);
          this.st.addEvent.run(rev, kind, name, "DELETED", json);
          events.push({ revision: rev, kind, name, type: "DELETED", json });
          written.set(`${kind}/${name}`, null);
          continue;
        }
        // The JSON goes into the log once; the objects row points at it.
        const json = JSON.stringify(e.stored);
        const seq = this.st.addEvent.run(rev, kind, name, e.type, json).lastInsertRowid;
        const lease = this.leaseFlag(kind, name);
        if (e.type === "ADDED") this.st.insert.run(kind, name, seq, rev, lease);
        else this.st.replace.run(seq, rev, lease, kind, name);
        events.push({ revision: rev, kind, name, type: e.type, json, written: e.stored ?? undefined });
        written.set(`${kind}/${name}`, e.stored);
      }
    } finally {
      this.txnWritten = undefined;
      this.txnKnown = undefined;
    }

    if (events.length === 0) return { results, events, meta };
    let count = meta.event_count + events.length;
    let compacted = meta.compacted;
    if (count > this.eventLogLimit) {
      // Compact with some slack, so the delete runs once per COMPACT_STEP events rather than on
      // every commit; a small step keeps each delete short (it runs inside a write).
      const step = Math.max(1, Math.min(COMPACT_STEP, Math.floor(this.eventLogLimit / 10)));
      const target = Math.max(0, this.eventLogLimit - step);
      const cutoff = this.st.nthEventRevision.get(compacted, count - target - 1)!;
      // Every event up to the cutoff leaves the log; those of current objects stay in the table.
      count -= this.st.countEvents.get(compacted, cutoff)!;
      this.st.dropEvents.run(compacted, cutoff);
      compacted = Math.max(compacted, cutoff);
    }
    // The meta row itself is written once per group, at its commit (setMeta).
    return { results, events, meta: { revision: rev, compacted, event_count: count } };
  }

  /**
   * The stored object, as a transaction reads it: what this transaction wrote, else the
   * object as this process last committed it, else the row. The last objects committed are
   * kept decoded (a lease's claim, start and complete write one Task three times); they are
   * dropped whenever another connection has committed (openGroup: the group's BEGIN IMMEDIATE
   * holds every other writer off until its COMMIT) or a commit fails, and a rolled-back
   * transaction never reaches them. For the row, the caller's copy (ApplyOptions.known: the
   * informer's) stands in for decoding the JSON when it is at the row's revision.
   */
  private current(kind: string, name: string): StoredObject | undefined {
    const key = `${kind}/${name}`;
    const mine = this.txnWritten?.get(key);
    if (mine !== undefined) return mine ?? undefined;
    const hit = this.recent.get(key);
    if (hit !== undefined) return hit;
    const row = this.st.head.get(kind, name);
    if (row === undefined) return undefined;
    const [seq, revision] = row;
    const known = this.txnKnown?.(kind, name);
    if (known && known.metadata.resourceVersion === String(revision)) return known;
    return JSON.parse(this.st.eventJson.get(seq)!) as StoredObject;
  }

  /** Remember what a committed write stored (see current()); a bounded map in last-written order. */
  private remember(events: PendingEvent[]): void {
    for (const e of events) {
      const key = `${e.kind}/${e.name}`;
      this.recent.delete(key);
      if (e.type !== "DELETED" && e.written) this.recent.set(key, e.written);
    }
    for (const key of this.recent.keys()) {
      if (this.recent.size <= RECENT_OBJECTS) break;
      this.recent.delete(key);
    }
  }

  /**
   * Keep the allocations index in step with a Task write, and refuse a write that adds a
   * lease its worker or its queue cannot hold (admission/guard.ts). Runs inside the write
   * transaction, after the earlier ops of the same transaction, so a batch is checked lease
   * by lease.
   */
  private allocate(kind: string, before: StoredObject | undefined, after: StoredObject | undefined): void {
    const change = allocationChange(kind, before, after);
    if (!change) return;
    const { was, now } = change;
    const index = this.allocations();
    if (now) {
      // current(): the worker as this transaction sees it, decoded once per revision written.
      guardLease(this.current("Worker", now.worker), now, index.on(now.worker));
      this.guardQueueOf(now, index);
    }
    const task = (now ?? was)!.task;
    this.allocUndo?.push([task, index.set(task, now)]);
  }

  /** The quota guard: only a queue with a Queue object has one; its usage without this task's own lease. */
  private guardQueueOf(now: Allocation, index: AllocationIndex): void {
    const q = allocationQueue(now);
    const queue = this.current("Queue", q);
    if (!queue) return;
    let used = index.queueUsage(q);
    const mine = index.get(now.task);
    if (mine && allocationQueue(mine) === q) used = addAmounts(used, demandOf(mine.lease.reservation), -1);
    guardQueue(queue, now, used);
  }

  /** The allocations index, built from the Tasks whose rows are flagged when it is not known to match them. */
  private allocations(): AllocationIndex {
    if (this.allocsLoaded) return this.allocs;
    this.allocs.clear();
    for (const json of this.st.leased.all()) {
      const a = allocationOf(JSON.parse(json) as Task);
      if (a) this.allocs.set(a.task, a);
    }
    this.allocsLoaded = true;
    return this.allocs;
  }

  /** The lease flag of an object's row: 1 for a Task the index holds a lease of (allocate() ran on this write already). */
  private leaseFlag(kind: string, name: string): number {
    return kind === "Task" && this.allocations().get(name) !== undefined ? 1 : 0;
  }

  /** Another connection committed, or a commit failed: the index is built again on next use. */
  private forgetAllocations(): void {
    this.allocsLoaded = false;
    this.allocs.clear();
  }

  /**
   * A store written by an earlier Loom keeps each object's JSON in its objects row: move it
   * into the log, in one transaction. An object whose write is still in the log points at
   * that event (the same JSON); one whose event was compacted gets an event at its own
   * revision, at or below the compacted one, so no watch replays it.
   */
  private upgradeLayout(): void {
    const columns = this.db.prepare<[], string>("SELECT name FROM pragma_table_info('objects')").pluck().all();
    if (!columns.includes("json")) return;
    const same =
      "e.kind = o.kind AND e.name = o.name AND e.revision = o.revision AND e.type <> 'DELETED' AND e.json = o.json";
    this.db
      .transaction(() => {
        this.db.exec(`
          CREATE INDEX upgrade_events_by_object ON events (kind, name, revision);
          INSERT INTO events (revision, kind, name, type, json)
            SELECT o.revision, o.kind, o.name, 'MODIFIED', o.json FROM objects o
            WHERE NOT EXISTS (SELECT 1 FROM events e WHERE ${same});
          CREATE TABLE objects_by_seq (
            kind TEXT NOT NULL, name TEXT NOT NULL, seq INTEGER NOT NULL, revision INTEGER NOT NULL,
            PRIMARY KEY (kind, name)
          );
          INSERT INTO objects_by_seq (kind, name, seq, revision)
            SELECT o.kind, o.name, (SELECT max(e.seq) FROM events e WHERE ${same}), o.revision FROM objects o;
          DROP INDEX upgrade_events_by_object;
          DROP TABLE objects;
          ALTER TABLE objects_by_seq RENAME TO objects;
          UPDATE meta SET event_count = (SELECT count(*) FROM events WHERE revision > meta.compacted);
        `);
      })
      .immediate();
  }

  /**
   * Up to schema version 3: each Task row that holds a lease gets its flag, from the
   * allocations table a store of version 1 or 2 kept, or (before version 1) from the leases
   * its Tasks hold; then the table goes. One transaction.
   */
  private upgradeLeaseFlags(version: number): void {
    if (version >= SCHEMA_VERSION) return;
    const db = this.db;
    db.transaction(() => {
      const columns = db.prepare<[], string>("SELECT name FROM pragma_table_info('objects')").pluck().all();
      if (!columns.includes("lease")) db.exec("ALTER TABLE objects ADD COLUMN lease INTEGER NOT NULL DEFAULT 0");
      const hasTable = db
        .prepare<[], number>("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'allocations'")
        .pluck()
        .get()!;
      if (version >= 1 && hasTable)
        db.exec("UPDATE objects SET lease = 1 WHERE kind = 'Task' AND name IN (SELECT task FROM allocations)");
      else {
        // Collected first: the connection runs no other statement while one iterates.
        const leased: string[] = [];
        for (const json of db.prepare<[string], string>(LIST_SQL).pluck().iterate("Task")) {
          const a: Allocation | undefined = allocationOf(JSON.parse(json) as Task);
          if (a) leased.push(a.task);
        }
        const flag = db.prepare("UPDATE objects SET lease = 1 WHERE kind = 'Task' AND name = ?");
        for (const name of leased) flag.run(name);
      }
      db.exec("DROP TABLE IF EXISTS allocations");
      db.pragma(`user_version = ${SCHEMA_VERSION}`);
    }).immediate();
  }

  // ---- watch -------------------------------------------------------------------------

  async watch(
    kind: string | undefined,
    fromRevision: number,
    onEvent: (ev: WatchEvent) => void,
    opts: WatchOptions = {},
  ): Promise<WatchHandle> {
    this.open();
    const pending = opts.pending === true;
    // Reading the log and registering happen in one synchronous step, so no commit of this
    // process can fall between the replay and the live stream.
    const { rows, meta } = this.readTxn(() => {
      const meta = this.meta();
      if (fromRevision < meta.compacted) return { rows: [], meta };
      const rows =
        kind === undefined ? this.st.eventsAll.all(fromRevision) : this.st.eventsKind.all(kind, fromRevision);
      return { rows, meta };
    });
    if (fromRevision < meta.compacted) throw gone(fromRevision, meta.compacted);
    // A durable-only watcher replays what is on disk; the rest reaches it from releaseDurable().
    const upTo = pending ? meta.revision : Math.min(meta.revision, this.sync.durableRevision);
    const w: Watcher = {
      kind,
      pending,
      cb: onEvent,
      cursor: Math.max(fromRevision, upTo),
      queue: rows
        .filter(([revision]) => revision <= upTo)
        .map(([revision, k, name, type, json]) => ({ revision, kind: k, name, type: type as WatchEventType, json })),
      head: 0,
      busy: false,
      stopped: false,
    };
    this.watchers.add(w);
    this.schedule(w);
    return {
      stop: () => {
        w.stopped = true;
        this.watchers.delete(w);
      },
    };
  }

  /**
   * Open a group: one SQLite transaction that the next writes join, each in its savepoint.
   * The meta row is read once here and kept in memory until commitGroup() writes it.
   */
  private openGroup(): void {
    this.st.begin.run();
    this.group = { meta: this.st.meta.get()!, dirty: false };
    const version = this.st.dataVersion.get()!;
    if (version !== this.dataVersion) {
      this.recent.clear();
      this.forgetAllocations();
    }
    this.dataVersion = version;
  }

  /** Commit the open group (its writes reach the WAL file; the flush that follows makes them durable). */
  private commitGroup(): void {
    const g = this.group;
    this.group = undefined;
    if (!this.db.inTransaction) return;
    try {
      if (g?.dirty) this.st.setMeta.run(g.meta.revision, g.meta.compacted, g.meta.event_count);
      this.st.commit.run();
    } catch (e) {
      // What the group wrote may not be in the file: nothing remembered from it is used again.
      this.recent.clear();
      this.forgetAllocations();
      throw e;
    }
    if (this.finishDue) this.finishCheckpoint();
  }

  /** A background round is done: past walRestartBytes, the WAL is to start over. */
  private afterCheckpoint(round: CheckpointRound): void {
    // A round copies all it saw, but the frames committed since then keep the WAL from starting over.
    if (round.log * this.pageSize < this.walRestartBytes) return;
    this.finishDue = true;
    // Between groups already: copy now, and the next write starts the WAL over.
    if (!this.db.inTransaction) this.finishCheckpoint();
  }

  /**
   * Copy into the database file what the background round left in the WAL, on this connection
   * and between two groups: no frame can arrive meanwhile, so every frame is copied and the
   * next group's transaction starts the WAL over. It costs one pause of the event loop (the
   * frames written during one round, and two syncs), once per walRestartBytes of WAL.
   */
  private finishCheckpoint(): void {
    this.finishDue = false;
    const t0 = performance.now();
    try {
      this.db.pragma("wal_checkpoint(PASSIVE)");
    } catch (e) {
      // The WAL keeps its frames and the next round tries again; no write is affected.
      console.error(`sqlite store ${this.path}: checkpoint between groups failed:`, e);
      return;
    }
    const stats = this.checkpointer.stats;
    stats.finished++;
    stats.longestFinishMs = Math.max(stats.longestFinishMs, performance.now() - t0);
  }

  /** The meta row as this connection sees it: an open group's lives in memory until its commit. */
  private meta(): Meta {
    return this.group?.meta ?? this.st.meta.get()!;
  }

  /** Change the meta row: in the open group's memory, or (outside a group) in the row at once. */
  private setMeta(m: Meta): void {
    if (this.group) this.group = { meta: m, dirty: true };
    else this.st.setMeta.run(m.revision, m.compacted, m.event_count);
  }

  /** Applied events go to pending watchers now, and to the others once durable. */
  private publish(events: PendingEvent[]): void {
    this.deliver(events, true);
    this.undurable.push(events);
  }

  private releaseDurable(rev: number): void {
    let n = 0;
    while (n < this.undurable.length && this.undurable[n][0].revision <= rev) this.deliver(this.undurable[n++], false);
    if (n > 0) this.undurable = this.undurable.slice(n);
  }

  private deliver(events: PendingEvent[], pending: boolean): void {
    const rev = events[0].revision;
    for (const w of this.watchers) {
      if (w.pending !== pending || w.stopped || rev <= w.cursor) continue;
      w.cursor = rev;
      for (const e of events) if (w.kind === undefined || w.kind === e.kind) w.queue.push(e);
      this.schedule(w);
    }
  }

  /** Delivery is always deferred: a callback never runs inside a write, and may itself write. */
  private schedule(w: Watcher): void {
    if (w.busy || w.stopped || w.head >= w.queue.length) return;
    w.busy = true;
    queueMicrotask(() => this.drain(w));
  }

  private drain(w: Watcher): void {
    let delivered = 0;
    let lastRev = -1;
    while (!w.stopped && w.head < w.queue.length) {
      const e = w.queue[w.head];
      if (delivered >= DELIVERY_CHUNK && e.revision !== lastRev) {
        // Let I/O run during a long replay, but keep each revision's events in one turn.
        setImmediate(() => this.drain(w));
        return;
      }
      w.head++;
      delivered++;
      lastRev = e.revision;
      try {
        // Decoded per watcher, so no two consumers share (and could mutate) one object; only
        // the Hub's own informer (the pending watcher) takes the object as written.
        const written = w.pending ? e.written : undefined;
        if (written) e.written = undefined;
        w.cb(new StoredEvent(e, written));
      } catch (err) {
        console.error(`store watch callback failed at revision ${e.revision}:`, err);
      }
    }
    w.queue = w.head >= w.queue.length ? [] : w.queue.slice(w.head);
    w.head = 0;
    w.busy = false;
    this.schedule(w);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Whatever was applied is made durable (and its waiters answered) before the file closes.
    await this.sync.close().catch((e) => console.error(`sqlite store ${this.path}: final WAL sync failed:`, e));
    await this.checkpointer.close();
    this.commitGroup();
    for (const w of this.watchers) w.stopped = true;
    this.watchers.clear();
    this.db.close();
  }

  private open(): void {
    if (this.closed) throw new Error(`sqlite store ${this.path} is closed`);
  }
}

export function openSqliteStore(path: string, opts?: SqliteStoreOptions): SqliteStore {
  return new SqliteStore(path, opts);
}
