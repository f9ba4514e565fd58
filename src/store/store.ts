// The store interface: the only state Loom has. Every backend (SQLite embedded, etcd for
// several Hub replicas) implements it and passes the same contract suite (test/store-contract.ts).
import type { ObjectMeta } from "../resources/meta.ts";
import type { Kind, ObjectOf } from "../resources/types.ts";

/** Any stored object. CRD kinds are validated on every write; internal kinds (Event, ...) are not. */
export type StoredObject = {
  apiVersion: string;
  kind: string;
  metadata: ObjectMeta;
  spec?: unknown;
  status?: unknown;
  [k: string]: unknown;
};

export type WatchEventType = "ADDED" | "MODIFIED" | "DELETED";
/**
 * One change. `kind` and `name` are always there, so a consumer can skip an event without
 * decoding it; `json`, when a backend has it, is the object exactly as stored, for writing
 * it onward without encoding it again. Backends may decode `object` lazily, on first read.
 */
export type WatchEvent<T extends StoredObject = StoredObject> = {
  type: WatchEventType;
  object: T;
  revision: number;
  kind: string;
  name: string;
  /** The object as stored (JSON), when the backend has it: a consumer that only forwards it need not decode it. */
  json?: string;
  /**
   * The event as one NDJSON watch line, `{"type":TYPE,"object":JSON}` and a newline, encoded
   * once and shared by every watcher that forwards it (backends that keep `json` offer it).
   */
  line?: (type: WatchEventType) => Buffer;
};

export type ListOptions = {
  /** Kubernetes label selector: `a=b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x)`, comma-separated. */
  labelSelector?: string;
};
export type ListResult<T> = { items: T[]; revision: number };

/**
 * One write of a transaction. `update` and `delete` may name the resourceVersion they read
 * (metadata.resourceVersion / resourceVersion); a different current one fails the whole
 * transaction with Conflict. `check` writes nothing and only asserts a resourceVersion
 * (or, with resourceVersion "0", that the object does not exist).
 */
export type TxnOp<T extends StoredObject = StoredObject> =
  | { op: "create"; object: T }
  | { op: "update"; object: T }
  | { op: "updateStatus"; object: T }
  | { op: "delete"; kind: T["kind"]; name: string; resourceVersion?: string }
  | { op: "check"; kind: T["kind"]; name: string; resourceVersion: string };

export type WatchHandle = { stop(): void };

export type WatchOptions = {
  /**
   * Also deliver writes that are applied but not yet durable. Only the Hub's own informer
   * asks for this, so its next decision sees the previous one; everything that leaves the
   * process (watch streams, replies) waits for durability.
   */
  pending?: boolean;
  /**
   * Called once if the watch ends on its own (on etcd: its history was compacted while it
   * was reconnecting), with a Gone error: list again and watch anew. Without it the end is logged.
   */
  onError?: (e: Error) => void;
  /**
   * False: the caller keeps every object it watches (an informer), so a DELETED event may
   * carry only the kind, the name and the deletion's revision, and a backend that would
   * have to fetch the last state for it (etcd's previous key-values, which double every
   * event) does not. By default a DELETED event carries the object as it last was.
   */
  lastStateOnDelete?: boolean;
};

/**
 * What a caller believes is stored, for a backend that would otherwise read before writing
 * (etcd): the object as the caller last saw it (its informer's copy, with its
 * resourceVersion), null when it believes there is none, or undefined when it does not
 * know (a kind it does not follow). A backend may decide on it
 * instead of reading, and then commits only if every such object is still current, reading
 * for real and deciding again otherwise; the outcome is the same as without it.
 */
export type Known = (kind: string, name: string) => StoredObject | null | undefined;
export type ApplyOptions = {
  known?: Known;
  /**
   * The caller only reads the results (as it reads its informer's objects): a backend may
   * hand back the objects it keeps itself instead of copies. Without it, mutating a result
   * never reaches stored state.
   */
  readOnlyResults?: boolean;
  /**
   * The caller hands the ops' objects over: it neither reads nor changes them after the
   * call (nor anything they hold that it could change), so a backend may keep them as
   * written instead of a copy. They may share parts with informer objects, which nobody
   * changes either.
   */
  ownedInput?: boolean;
};

/** A write that has been applied: visible to this process, durable once `durable` resolves. */
export type Applied = { results: StoredObject[]; revision: number; durable: Promise<void> };

export interface Store {
  readonly backend: "sqlite" | "etcd";
  /**
   * A CRD kind reads as its generated type (ObjectOf). The second form is for code that
   * handles any kind alike (the resource API, Events): a StoredObject, or the T it names.
   */
  get<K extends Kind>(kind: K, name: string): Promise<ObjectOf<K> | undefined>;
  get<T extends StoredObject = StoredObject>(kind: string, name: string): Promise<T | undefined>;
  list<K extends Kind>(kind: K, opts?: ListOptions): Promise<ListResult<ObjectOf<K>>>;
  list<T extends StoredObject = StoredObject>(kind: string, opts?: ListOptions): Promise<ListResult<T>>;
  /** How many objects of `kind` are stored: a count, nothing read or decoded. */
  count(kind: string): Promise<number>;
  /**
   * Whether this backend deletes objects of `kind` by itself once they have gone unwritten
   * for their time to live (etcd: a lease on each key). Nothing else then needs to look for
   * old ones.
   */
  expires(kind: string): boolean;
  /** Sets uid, creationTimestamp, generation 1 and resourceVersion. AlreadyExists if the name is taken. */
  create<T extends StoredObject>(obj: T): Promise<T>;
  /** Replaces metadata (labels, annotations, ownerReferences) and spec; status is kept as stored. generation +1 when spec changes. */
  update<T extends StoredObject>(obj: T): Promise<T>;
  /** Replaces status only; spec and metadata are kept as stored. */
  updateStatus<T extends StoredObject>(obj: T): Promise<T>;
  delete<K extends Kind>(kind: K, name: string, opts?: { resourceVersion?: string }): Promise<ObjectOf<K>>;
  delete<T extends StoredObject = StoredObject>(
    kind: string,
    name: string,
    opts?: { resourceVersion?: string },
  ): Promise<T>;
  /**
   * All ops commit together at one new revision, or none does. Resolves once the commit is
   * durable, with the written objects in op order (deleted ones as last seen; `check` ops
   * add no entry). A txn of checks only commits no revision.
   *
   * Every backend keeps the admission invariant here: a write that adds a lease to a worker
   * (a Task entering `leased`/`running`, or changing its lease's worker or reservation) is
   * re-checked against that worker's current leases (admission/guard.ts) in the same
   * transaction, and refused with Conflict naming the dimension when it would break it.
   */
  txn<T extends StoredObject = StoredObject>(ops: TxnOp<T>[]): Promise<T[]>;
  /**
   * txn() in two steps: resolves once the write is applied and visible to `pending`
   * watchers, with a promise for its durability. Writes that arrive while an earlier one is
   * being made durable share its successor's flush (group commit).
   */
  apply(ops: TxnOp[], opts?: ApplyOptions): Promise<Applied>;
  /**
   * The most objects one transaction may write on this backend (etcd refuses a Txn of more
   * than its --max-txn-ops). Callers split larger batches where atomicity allows; a larger
   * transaction fails with RequestEntityTooLarge (413) and changes nothing.
   */
  readonly maxWritesPerTxn: number;
  /** The revision of the last commit. */
  revision(): Promise<number>;
  /**
   * Durable commits made so far and the writes they carried: etcd Txns sent (each a round
   * trip), or SQLite WAL flushes (each an fsync). Writes decided while one is under way
   * share the next, so writes / commits is the group size. `failed`: writes whose commit
   * failed its compares (etcd: a key they read had moved), so they were decided again.
   */
  commitStats(): CommitStats;
  /**
   * Events with revision > fromRevision for `kind` (or every kind when undefined), replayed
   * from the event log, then live, in commit order. Throws Gone when fromRevision is older
   * than the log keeps. Events of one revision (one txn) are delivered in a single
   * synchronous run, so a consumer can tell when a revision has been fully applied.
   */
  watch(
    kind: string | undefined,
    fromRevision: number,
    onEvent: (ev: WatchEvent) => void,
    opts?: WatchOptions,
  ): Promise<WatchHandle>;
  /** Drop event-log entries at or below `revision`. */
  compact(revision: number): Promise<void>;
  close(): Promise<void>;
}

/** Store.commitStats(): durable commits, the writes they carried, and writes decided again. */
export type CommitStats = { commits: number; writes: number; failed: number };
