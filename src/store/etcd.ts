// The etcd Store: several Hub replicas share one etcd cluster, the store Kubernetes uses.
//
// Layout under a configurable prefix (so several installations can share one etcd):
//   <prefix>/objects/<Kind>/<name>   the object's JSON, without resourceVersion
//   <prefix>/allocations/<worker>    that worker's active leases (the lease guard's index)
//   <prefix>/queue-usage/<queue>     what a Queue's active leases hold (the quota guard's index;
//                                    only for queues that have a Queue object)
//   <prefix>/revision                rewritten by every commit: its mod_revision is the
//                                    revision of this store's last commit
// The objects of a kind given a time to live (the Hub gives Events one) carry an etcd lease,
// and etcd deletes them once it runs out (etcd-expiry.ts).
//
// resourceVersion is the key's mod_revision, a store revision is etcd's revision, a watch
// from a revision is an etcd watch from the next one, and compaction is etcd's (Gone, 410).
//
// A write is optimistic: read every key it depends on, decide exactly as SQLite does
// (ops.ts), then commit one Txn that compares the mod_revision of each key read and writes
// the results. That includes the allocation key of every worker whose leases a write
// changes, which the Txn rewrites, and the Worker of one it adds a lease to (a release needs
// no capacity): two replicas leasing onto one worker at once cannot both commit, and the
// loser decides again on fresh data. Only a stale resourceVersion named by the caller is a
// Conflict; a lost race is retried here.
//
// Group commit: etcd's raft loop already appends concurrent proposals in one batch with one
// fsync, so concurrent apply() calls are sent as concurrent Txns over one HTTP/2 channel.
// They are not merged into one Txn: each write keeps its own revision, as the contract asks.
// A committed Txn is durable on a quorum, so `durable` is resolved when apply() resolves.
import { Etcd3, type ICompare, type IKeyValue, type IOptions, type IRequestOp, type Watcher } from "etcd3";
import type { LeaseView } from "../admission/view.ts";
import { jsonClone } from "../resources/json.ts";
import { conflict, gone, StoreError, tooLarge } from "./errors.ts";
import { labelSelectorMatcher } from "./labels.ts";
import { TxnBatcher } from "./etcd-batch.ts";
import { ExpiryLeases, leaseUnknown } from "./etcd-expiry.ts";
import { EtcdEvent, EtcdRecord, parseStored, SharedWatch } from "./etcd-watch.ts";
import {
  allocationChange,
  badRequest,
  decideOp,
  guardLease,
  objectValidator,
  QueueUsageTxn,
  TxnWrites,
  type OpView,
} from "./ops.ts";
import { allocationQueue, usageOf } from "../admission/guard.ts";
import { queueName, type Amounts } from "../admission/queues.ts";
import type {
  Applied,
  CommitStats,
  ApplyOptions,
  Known,
  ListOptions,
  ListResult,
  Store,
  StoredObject,
  TxnOp,
  WatchEvent,
  WatchHandle,
  WatchOptions,
} from "./store.ts";
import { iso } from "../resources/time.ts";

export type EtcdStoreOptions = {
  endpoints: string[];
  /** Key prefix of this installation, e.g. "/loom". */
  prefix?: string;
  /** PEM contents for TLS: the CA, and a client certificate and key for mutual TLS. */
  tls?: { ca: Buffer; cert?: Buffer; key?: Buffer };
  auth?: { username: string; password: string };
  /** Attempts of one write that keeps losing races before it is reported as Conflict. Default 64. */
  maxAttempts?: number;
  /** The etcd server's --max-txn-ops (default 128, etcd's own default). */
  maxTxnOps?: number;
  /** The etcd server's --max-request-bytes (default 1.5 MiB, etcd's own default). */
  maxRequestBytes?: number;
  /**
   * Kinds whose objects etcd deletes once they have not been written for this many seconds
   * (each put carries an etcd lease: etcd-expiry.ts). Loom's Hub gives Events their TTL here.
   */
  ttlSeconds?: Record<string, number>;
};

/** Thrown by a decision that needs keys not read yet: read them and decide that op again. */
class NeedKeys extends Error {
  constructor(readonly keys: string[]) {
    super("keys not read yet");
  }
}

/** Thrown when a decision made on copies failed: decide again on what etcd holds. */
class Stale extends Error {
  constructor() {
    super("decided on stale copies");
  }
}

/** A put carried a lease etcd no longer knows (revoked): nothing was applied; ask for a new lease and write again. */
class LeaseGone extends Error {
  constructor(cause: unknown) {
    super("etcd no longer knows the lease a put carried", { cause });
  }
}

/** Thrown by a decision about to assume a copy of a key this store is writing: wait for that write, then decide again. */
class Pending extends Error {
  constructor(readonly write: Promise<void>) {
    super("a write of this key is in flight");
  }
}

/** Thrown by a decision that needs a queue's usage summed from every allocation key (a new Queue, or a missing record). */
class NeedSeed extends Error {
  constructor(readonly queue: string) {
    super("queue usage not seeded yet");
  }
}

/** Stands for the revision a Txn will commit at, until etcd tells it. */
// A revision number no etcd reaches (and not "0", which a check reads as "absent"); it is
// replaced before anything leaves the store.
const PENDING_RV = "9999999999999999999";
/** Keys read per range Txn: well under etcd's default --max-txn-ops of 128. */
const READ_BATCH = 100;
/**
 * Objects per range response of a list, at first. One kind can hold far more than a gRPC
 * reply may carry (200,000 Tasks are hundreds of MB), so a list reads it in pages from one
 * snapshot; a page refused as too large is read again at half the size.
 */
const LIST_PAGE = 500;
const MAX_REPLY_BYTES = 64 * 1024 * 1024;
const replyTooLarge = (e: unknown) => /RESOURCE_EXHAUSTED|larger than max/.test(String((e as Error)?.message ?? e));

/**
 * One key a transaction depends on: its value (raw, or already decoded) at mod_revision
 * `mod` (0: absent). `assumed`: taken from the caller's copy or this store's memory, not
 * read from etcd in this attempt, so the compare at commit is what vouches for it.
 * `leases`: an allocation key's value as this store wrote it, decoded (never changed).
 */
type Entry = {
  value?: string;
  obj?: StoredObject;
  mod: number;
  assumed?: boolean;
  leases?: ReadonlyMap<string, LeaseView>;
};
/** An allocation or queue usage key a write sets (value undefined: deletes), with an allocation key's leases. */
type KeyWritten = [key: string, value: string | undefined, leases?: ReadonlyMap<string, LeaseView>];
/** `seededAt`: the revision queue usage was summed from the allocation keys at; none of them may change before the commit. */
type Plan = {
  results: StoredObject[];
  reads: Map<string, Entry>;
  writes: IRequestOp[];
  allocationsWritten: KeyWritten[];
  /** The objects it stores, by key (null: deleted). */
  objects: Map<string, StoredObject | null>;
  seededAt?: number;
};

/** etcd's defaults: --max-txn-ops 128 and --max-request-bytes 1.5 MiB. */
export const ETCD_DEFAULT_MAX_TXN_OPS = 128;
export const ETCD_DEFAULT_MAX_REQUEST_BYTES = 1.5 * 1024 * 1024;
/** Room left in a request for what is not a key or a value (compares, framing). */
const REQUEST_OVERHEAD = 64 * 1024;
/** How many of its own last-written objects the store keeps for its watches (`written`). */
const WRITTEN_OBJECTS = 4096;
/** Keys a write may add to a Txn besides its object's: the revision key, a worker and its allocation key, and a moved lease's old ones. */
const KEYS_BESIDE_OBJECTS = 8;

export class EtcdStore extends TxnWrites implements Store {
  readonly backend = "etcd";
  readonly prefix: string;
  private readonly client: Etcd3;
  private readonly validate = objectValidator();
  private readonly maxAttempts: number;
  private readonly maxTxnOps: number;
  private readonly maxRequestBytes: number;
  readonly maxWritesPerTxn: number;
  /**
   * The allocation and queue-usage keys as this store last wrote them (value and
   * mod_revision): a lease write compares against them instead of reading first. Another
   * replica's write makes the compare fail, and the key is read again.
   */
  private readonly allocations = new Map<string, Entry>();
  /** Writes whose Txn failed its compares and were decided again (commitStats). */
  private failedCommits = 0;
  /**
   * What this process last stored, by key, at the revision it committed at: its own watch
   * events take the object from here instead of decoding etcd's copy. Only objects whose
   * results went to a caller that only reads them (ApplyOptions.readOnlyResults) are kept,
   * so nothing here is changed after the commit. A bounded map in last-written order.
   */
  private readonly written = new Map<string, { revision: number; object: StoredObject }>();
  /**
   * The Workers this store is writing, by key, each with the end of the apply() that writes
   * it. A lease decided on a copy of its Worker older than such a write could only fail its
   * compare (the worker controller rewrites a Worker's status while claims are decided), so
   * the decision waits for the write and takes the object as written instead (`written`).
   */
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly watchers = new Set<Watcher>();
  /** The etcd watch the API's watches share (etcd-watch.ts). */
  private shared: SharedWatch | undefined;
  /** Writes decided while a Txn is in flight go out together in the next (etcd-batch.ts). */
  private readonly batcher: TxnBatcher;
  /** The etcd leases that puts of expiring kinds carry (etcd-expiry.ts). */
  private readonly expiry: ExpiryLeases;
  private closed = false;
  /** The revision this store's first key was written at; nothing of it is older. */
  private base = 0;

  private constructor(opts: EtcdStoreOptions) {
    super();
    if (!opts.endpoints?.length) throw new Error("etcd store: at least one endpoint is needed");
    this.prefix = normalizePrefix(opts.prefix ?? "/loom");
    this.maxAttempts = opts.maxAttempts ?? 64;
    this.maxTxnOps = opts.maxTxnOps ?? ETCD_DEFAULT_MAX_TXN_OPS;
    this.maxRequestBytes = opts.maxRequestBytes ?? ETCD_DEFAULT_MAX_REQUEST_BYTES;
    if (!Number.isInteger(this.maxTxnOps) || this.maxTxnOps < 16)
      throw new Error(`etcd store: maxTxnOps must be an integer of at least 16, got ${opts.maxTxnOps}`);
    this.maxWritesPerTxn = this.maxTxnOps - KEYS_BESIDE_OBJECTS;
    const options: IOptions = {
      hosts: opts.endpoints,
      dialTimeout: 5000,
      grpcOptions: { "grpc.max_receive_message_length": MAX_REPLY_BYTES },
    };
    if (opts.tls)
      options.credentials = { rootCertificate: opts.tls.ca, privateKey: opts.tls.key, certChain: opts.tls.cert };
    if (opts.auth) options.auth = opts.auth;
    this.client = new Etcd3(options);
    this.batcher = new TxnBatcher(
      async (compare, success, failure) => {
        const r = await this.client.kv.txn({ compare, success, failure });
        return { succeeded: r.succeeded, revision: r.header.revision, responses: r.responses };
      },
      this.revisionPut,
      { maxOps: this.maxTxnOps, maxBytes: this.maxRequestBytes - REQUEST_OVERHEAD },
    );
    this.expiry = new ExpiryLeases(
      new Map(Object.entries(opts.ttlSeconds ?? {})),
      async (ttl) => (await this.client.leaseClient.leaseGrant({ TTL: ttl })).ID,
    );
  }

  /** The put every write's Txn ends with: the revision key's mod_revision is the store's revision. */
  private get revisionPut(): IRequestOp {
    return { request_put: { key: Buffer.from(this.revisionKey), value: Buffer.from("") } };
  }

  /** The Txns the writes went out in (group commit, etcd-batch.ts). */
  commitStats(): CommitStats {
    return { commits: this.batcher.stats.txns, writes: this.batcher.stats.writes, failed: this.failedCommits };
  }

  static async open(opts: EtcdStoreOptions): Promise<EtcdStore> {
    const s = new EtcdStore(opts);
    try {
      await s.init();
    } catch (e) {
      s.client.close();
      throw new Error(`etcd store at ${opts.endpoints.join(",")}: ${(e as Error).message}`, { cause: e });
    }
    return s;
  }

  /** The raw client, for leader election and the replica registry under the same prefix. */
  get etcd(): Etcd3 {
    return this.client;
  }

  private async init(): Promise<void> {
    const key = Buffer.from(this.revisionKey);
    await this.client.kv.txn({
      compare: [{ key, target: "Create", result: "Equal", create_revision: 0 }],
      success: [{ request_put: { key, value: Buffer.from("") } }],
    });
    const res = await this.client.kv.range({ key });
    this.base = Number(res.kvs[0].create_revision);
  }

  private get revisionKey(): string {
    return `${this.prefix}/revision`;
  }
  private objectKey(kind: string, name: string): string {
    return `${this.prefix}/objects/${kind}/${name}`;
  }
  private kindPrefix(kind: string | undefined): string {
    return kind === undefined ? `${this.prefix}/objects/` : `${this.prefix}/objects/${kind}/`;
  }
  private allocationKey(worker: string): string {
    return `${this.prefix}/allocations/${worker}`;
  }
  private queueUsageKey(queue: string): string {
    return `${this.prefix}/queue-usage/${queue}`;
  }

  // ---- reads -------------------------------------------------------------------------

  async get<T extends StoredObject = StoredObject>(kind: string, name: string): Promise<T | undefined> {
    this.open();
    const res = await this.client.kv.range({ key: Buffer.from(this.objectKey(kind, name)) });
    return res.kvs[0] ? (fromKv(res.kvs[0]) as T) : undefined;
  }

  async list<T extends StoredObject = StoredObject>(kind: string, opts: ListOptions = {}): Promise<ListResult<T>> {
    this.open();
    const match = labelSelectorMatcher(opts.labelSelector);
    const from = this.kindPrefix(kind);
    const end = prefixEnd(from);
    // The first page and the store revision in one read-only Txn; the later pages read at the
    // etcd revision of that Txn, so the whole list is one snapshot.
    const first = await this.client.kv.txn({
      success: [
        { request_range: { key: Buffer.from(from), range_end: end, limit: LIST_PAGE } },
        { request_range: { key: Buffer.from(this.revisionKey) } },
      ],
    });
    const snapshot = first.header.revision;
    const [page, rev] = first.responses.map((r) => r.response_range);
    const items: T[] = [];
    const take = (kvs: typeof page.kvs) => {
      for (const kv of kvs) {
        const obj = fromKv(kv) as T;
        if (match(obj.metadata?.labels)) items.push(obj);
      }
    };
    take(page.kvs);
    let more = page.more;
    let last = page.kvs[page.kvs.length - 1]?.key;
    let limit = LIST_PAGE;
    while (more && last) {
      let next;
      try {
        next = await this.client.kv.range({
          key: Buffer.concat([last, Buffer.from([0])]),
          range_end: end,
          limit,
          revision: snapshot,
        });
      } catch (e) {
        if (!replyTooLarge(e) || limit === 1) throw e;
        limit = Math.max(1, limit >> 1);
        continue;
      }
      take(next.kvs);
      more = next.more;
      last = next.kvs[next.kvs.length - 1]?.key;
    }
    return { items, revision: rev.kvs[0] ? Number(rev.kvs[0].mod_revision) : 0 };
  }

  async count(kind: string): Promise<number> {
    this.open();
    const from = this.kindPrefix(kind);
    const res = await this.client.kv.range({ key: Buffer.from(from), range_end: prefixEnd(from), count_only: true });
    return Number(res.count);
  }

  expires(kind: string): boolean {
    return this.expiry.expires(kind);
  }

  async revision(): Promise<number> {
    this.open();
    const res = await this.client.kv.range({ key: Buffer.from(this.revisionKey) });
    return res.kvs[0] ? Number(res.kvs[0].mod_revision) : 0;
  }

  // ---- writes ------------------------------------------------------------------------

  /**
   * Decide and commit in one Txn. The first attempt decides on what the caller knows (its
   * informer) and on the allocation keys this store last wrote or read, so an uncontended
   * write is a single round trip; the Txn compares every one of those, and when one has
   * moved the next attempt reads everything it depends on from etcd.
   */
  async apply(ops: TxnOp[], opts: ApplyOptions = {}): Promise<Applied> {
    this.open();
    if (!Array.isArray(ops)) throw badRequest("txn: ops must be an array");
    // A write of Workers is in flight until it is answered (inFlight). Only a write of none
    // waits for one, so no two writes ever wait for each other.
    const workers = ops.flatMap((op) => {
      const [kind, name] = op && typeof op === "object" ? opKindName(op) : ["", ""];
      return kind === "Worker" ? [this.objectKey(kind, name)] : [];
    });
    if (workers.length === 0) return this.leased(ops, opts, true);
    const ended = this.markInFlight(workers);
    try {
      return await this.leased(ops, opts, false);
    } finally {
      ended();
    }
  }

  /** attempts() with the etcd leases its puts of expiring kinds carry (by kind); one etcd no longer knows is replaced once. */
  private async leased(ops: TxnOp[], opts: ApplyOptions, mayWait: boolean): Promise<Applied> {
    for (let replaced = false; ; replaced = true) {
      const etcdLeases = await this.expiry.forOps(ops);
      try {
        return await this.attempts(ops, opts, mayWait, etcdLeases);
      } catch (e) {
        if (!(e instanceof LeaseGone) || replaced) throw e;
        this.expiry.forget();
      }
    }
  }

  /** apply()'s attempts: decide, commit, and decide again while a compare fails; `mayWait`: see plan(). */
  private async attempts(
    ops: TxnOp[],
    opts: ApplyOptions,
    mayWait: boolean,
    etcdLeases: Map<string, string> | undefined,
  ): Promise<Applied> {
    for (let attempt = 1; ; attempt++) {
      const optimistic = attempt === 1;
      let plan: Plan;
      try {
        plan = await this.plan(
          ops,
          optimistic ? opts.known : undefined,
          optimistic,
          opts.ownedInput === true,
          mayWait,
          etcdLeases,
        );
      } catch (e) {
        if (e instanceof Stale) continue;
        throw e;
      }
      if (plan.writes.length === 0)
        return { results: plan.results, revision: await this.revision(), durable: Promise.resolve() };
      const compare: ICompare[] = [...plan.reads].map(([key, e]) => ({
        key: Buffer.from(key),
        target: "Mod" as const,
        result: "Equal" as const,
        mod_revision: e.mod,
      }));
      if (plan.seededAt !== undefined) compare.push(this.allocationsUnchangedSince(plan.seededAt));
      this.checkSize(ops.length, compare.length, [...plan.writes, this.revisionPut]);
      let res;
      try {
        // Alone or in one Txn with other writes decided meanwhile (etcd-batch.ts).
        res = await this.batcher.commit(compare, plan.writes);
      } catch (e) {
        if (etcdLeases && leaseUnknown(e)) throw new LeaseGone(e);
        throw new Error(
          `etcd refused a transaction of ${ops.length} ops (${compare.length} compares, ${plan.writes.length + 1} writes): ${(e as Error).message}`,
          { cause: e },
        );
      }
      if (res.succeeded) {
        const rv = res.revision;
        for (const o of plan.results) if (o.metadata.resourceVersion === PENDING_RV) o.metadata.resourceVersion = rv;
        // A deleted key compares as mod_revision 0, as a read of it finds (read()).
        for (const [key, value, held] of plan.allocationsWritten)
          this.allocations.set(key, {
            value,
            mod: value === undefined ? 0 : Number(rv),
            ...(held ? { leases: held } : {}),
          });
        if (opts.readOnlyResults === true) this.rememberWritten(plan.objects, Number(rv));
        return { results: plan.results, revision: Number(rv), durable: Promise.resolve() };
      }
      // Something read changed before the commit: forget what this store remembered of it
      // and decide again on fresh data.
      this.failedCommits++;
      for (const key of plan.reads.keys()) this.allocations.delete(key);
      if (attempt >= this.maxAttempts) {
        const first = ops.find((o) => o && typeof o === "object");
        const [kind, name] = first ? opKindName(first) : ["object", "?"];
        throw conflict(kind, name, `lost ${attempt} races with concurrent writers; try again`);
      }
      if (attempt > 1) await new Promise((r) => setTimeout(r, Math.random() * Math.min(50, attempt * 2)));
    }
  }

  /** Mark `keys` as being written (inFlight) until the returned function is called. */
  private markInFlight(keys: Iterable<string>): () => void {
    let resolve!: () => void;
    const end = new Promise<void>((r) => (resolve = r));
    const mine = [...keys];
    for (const key of mine) this.inFlight.set(key, end);
    return () => {
      for (const key of mine) if (this.inFlight.get(key) === end) this.inFlight.delete(key);
      resolve();
    };
  }

  private rememberWritten(objects: Map<string, StoredObject | null>, revision: number): void {
    for (const [key, object] of objects) {
      this.written.delete(key);
      if (object) this.written.set(key, { revision, object });
    }
    for (const key of this.written.keys()) {
      if (this.written.size <= WRITTEN_OBJECTS) break;
      this.written.delete(key);
    }
  }

  /** Refuse, before sending, a Txn that etcd's limits would refuse. */
  private checkSize(ops: number, compares: number, writes: IRequestOp[]): void {
    const count = Math.max(compares, writes.length);
    if (count > this.maxTxnOps)
      throw tooLarge(
        `a transaction of ${ops} writes needs ${count} etcd operations, more than etcd's --max-txn-ops (${this.maxTxnOps}); write at most ${this.maxWritesPerTxn} objects per transaction`,
      );
    let bytes = 0;
    for (const w of writes) bytes += (w.request_put?.key?.length ?? 0) + (w.request_put?.value?.length ?? 0) + 16;
    if (bytes > this.maxRequestBytes - REQUEST_OVERHEAD)
      throw tooLarge(
        `a transaction of ${ops} writes is ${bytes} bytes, more than etcd's --max-request-bytes (${this.maxRequestBytes}) allows`,
      );
  }

  /**
   * Decide every op on a consistent view: what was read (with its mod_revision, to compare
   * at commit) plus what earlier ops of this transaction wrote. Throws for a real failure.
   * `known` (the caller's copies) and the remembered allocation keys stand in for reads when
   * `optimistic`; an op whose outcome rests on them fails only after a real read agrees.
   * `mayWait`: a lease on a Worker this store is writing waits for that write (inFlight).
   */
  private async plan(
    ops: TxnOp[],
    known: Known | undefined,
    optimistic: boolean,
    owned: boolean,
    mayWait: boolean,
    etcdLeases: Map<string, string> | undefined,
  ): Promise<Plan> {
    const reads = new Map<string, Entry>();
    const objects = new Map<string, StoredObject | null>();
    const allocations = new Map<string, Map<string, LeaseView>>();
    const results: StoredObject[] = [];
    const now = iso(Date.now());

    const keyOf = (op: TxnOp) => (op && typeof op === "object" ? this.objectKey(...opKindName(op)) : "");
    if (known) this.assumeKnown(reads, ops, known);
    await this.read(reads, ops.map(keyOf));
    const current = (key: string): StoredObject | undefined => {
      if (objects.has(key)) return objects.get(key) ?? undefined;
      const e = reads.get(key);
      if (!e) throw new NeedKeys([key]);
      if (e.obj !== undefined || e.value === undefined) return e.obj;
      return (e.obj = parseStored(e.value, e.mod));
    };
    const seeds = new Map<string, Amounts>();
    const queues = new QueueUsageTxn({
      queue: (q) => current(this.objectKey("Queue", q)),
      stored: (q) => {
        const key = this.queueUsageKey(q);
        if (optimistic && !reads.has(key) && this.allocations.has(key))
          reads.set(key, { ...this.allocations.get(key)!, assumed: true });
        const e = reads.get(key);
        if (!e) throw new NeedKeys([key]);
        return e.value === undefined ? undefined : (JSON.parse(e.value) as Amounts);
      },
      seed: (q) => {
        const s = seeds.get(q);
        if (!s) throw new NeedSeed(q);
        return s;
      },
    });
    /**
     * A worker's lease set as this transaction sees it; its keys must have been read.
     * `guarded`: a lease is added there, so the guard reads the Worker too. Removing a lease
     * cannot break the invariant, so a release reads (and compares) only the allocation key,
     * and a Worker write meanwhile (its status, say) does not fail it.
     */
    const leasesOf = (worker: string, guarded: boolean): Map<string, LeaseView> => {
      const key = this.allocationKey(worker);
      const workerKey = this.objectKey("Worker", worker);
      if (optimistic && !reads.has(key) && this.allocations.has(key))
        reads.set(key, { ...this.allocations.get(key)!, assumed: true });
      if (guarded && optimistic && known && !reads.has(workerKey)) {
        const writing = mayWait ? this.inFlight.get(workerKey) : undefined;
        if (writing) throw new Pending(writing);
        const w = known("Worker", worker);
        if (w) reads.set(workerKey, { ...this.freshest(workerKey, w), assumed: true });
      }
      const missing = [key, ...(guarded ? [workerKey] : [])].filter((k) => !reads.has(k));
      if (missing.length > 0) throw new NeedKeys(missing);
      let m = allocations.get(worker);
      if (!m) {
        const e = reads.get(key)!;
        // The set this store last wrote is kept decoded; one read from etcd is decoded here.
        const was = e.leases ?? (e.value ? Object.entries(JSON.parse(e.value) as Record<string, LeaseView>) : []);
        allocations.set(worker, (m = new Map<string, LeaseView>(was)));
      }
      return m;
    };
    const view: OpView = {
      current: (kind, name) => current(this.objectKey(kind, name)),
      allocate: (kind, before, after) => {
        if (kind === "Queue") return queues.queueObject((after ?? before)!.metadata.name, before, after);
        const change = allocationChange(kind, before, after);
        if (!change) return;
        const { was, now: next } = change;
        // The queues' keys come with the first read of the workers', in the same round trip.
        const queueKeys = [was, next]
          .filter((a) => a !== undefined)
          .map((a) => this.objectKey("Queue", allocationQueue(a)));
        // The caller's copies of the Queues (usually: there is none) stand in for reads, as for any object.
        if (optimistic && known)
          for (const k of queueKeys) {
            if (reads.has(k) || objects.has(k)) continue;
            const q = known("Queue", k.slice(this.objectKey("Queue", "").length));
            if (q !== undefined)
              reads.set(k, { obj: q ?? undefined, mod: q ? Number(q.metadata.resourceVersion) : 0, assumed: true });
          }
        const missing = queueKeys.filter((k) => !reads.has(k) && !objects.has(k));
        if (missing.length)
          throw new NeedKeys([
            ...missing,
            ...(was ? [this.allocationKey(was.worker)] : []),
            ...(next ? [this.allocationKey(next.worker), this.objectKey("Worker", next.worker)] : []),
          ]);
        // Every key is in hand before anything changes, so a NeedKeys retry starts clean.
        const to = next && leasesOf(next.worker, true);
        const from = was && leasesOf(was.worker, false);
        if (next) guardLease(current(this.objectKey("Worker", next.worker)), next, [...to!.values()]);
        queues.lease(was, next);
        if (was) from!.delete(was.task);
        if (next) to!.set(next.task, next.lease);
      },
    };
    const seededAt = await this.decideEach(ops, view, { now, objects, results, reads, seeds, optimistic, owned });
    const { writes, allocationsWritten } = this.writesOf(objects, reads, allocations, queues.touched, etcdLeases);
    // A check-only transaction decided on copies proves nothing: read for real.
    if (writes.length === 0 && optimistic && [...reads.values()].some((r) => r.assumed)) throw new Stale();
    return {
      results,
      reads,
      writes,
      allocationsWritten,
      objects,
      ...(seededAt !== undefined ? { seededAt } : {}),
    };
  }

  /**
   * Decide the ops in order on `view`, reading what a decision finds missing (NeedKeys) and
   * summing a queue's usage when its record is missing (NeedSeed), then deciding that op
   * again. Returns the revision queue usage was summed at, if it was.
   */
  private async decideEach(
    ops: TxnOp[],
    view: OpView,
    d: {
      now: string;
      objects: Map<string, StoredObject | null>;
      results: StoredObject[];
      reads: Map<string, Entry>;
      seeds: Map<string, Amounts>;
      optimistic: boolean;
      /** The ops' objects are the caller's to give (ApplyOptions.ownedInput). */
      owned: boolean;
    },
  ): Promise<number | undefined> {
    const { now, objects, results, reads, seeds, optimistic, owned } = d;
    let seededAt: number | undefined;
    for (const op of ops) {
      for (;;) {
        try {
          const e = decideOp(op, view, now, PENDING_RV, this.validate, owned);
          if (e) {
            objects.set(this.objectKey(e.kind, e.name), e.stored);
            // A deleted object is returned as it was: the caller's own copy, never a shared one.
            results.push(e.type === "DELETED" ? jsonClone(e.result) : e.result);
          }
          break;
        } catch (err) {
          if (err instanceof NeedSeed) {
            const at = await this.seedQueue(err.queue, seeds);
            seededAt = seededAt === undefined ? at : Math.min(seededAt, at);
            continue;
          }
          if (err instanceof NeedKeys) {
            await this.read(reads, err.keys);
            continue;
          }
          if (err instanceof Pending) {
            await err.write;
            continue;
          }
          // A refusal decided on copies may be a stale copy's: only etcd's own answer counts.
          if (optimistic && [...reads.values()].some((r) => r.assumed)) throw new Stale();
          throw err;
        }
      }
    }
    return seededAt;
  }

  /** The caller's copies of the ops' objects stand in for reads (null: known to be absent). */
  private assumeKnown(reads: Map<string, Entry>, ops: TxnOp[], known: Known): void {
    for (const op of ops) {
      if (!op || typeof op !== "object") continue;
      const [kind, name] = opKindName(op);
      const obj = known(kind, name);
      if (obj === undefined) continue;
      const key = this.objectKey(kind, name);
      const e = this.freshest(key, obj);
      if (Number.isSafeInteger(e.mod)) reads.set(key, { ...e, assumed: true });
    }
  }

  /**
   * The caller's copy of a key (null: known to be absent), or this store's own later write
   * of it, which the caller's informer may not show yet: deciding on the older copy would
   * fail the compare against this replica's own write. Either is only assumed, and compared.
   */
  private freshest(key: string, obj: StoredObject | null): { obj: StoredObject | undefined; mod: number } {
    const mod = obj ? Number(obj.metadata.resourceVersion) : 0;
    const own = this.written.get(key);
    if (own && own.revision > mod) return { obj: own.object, mod: own.revision };
    return { obj: obj ?? undefined, mod };
  }

  /** What a decided transaction puts and deletes: its objects, the workers' allocation keys and the queues' usage keys. */
  private writesOf(
    objects: Map<string, StoredObject | null>,
    reads: Map<string, Entry>,
    allocations: Map<string, Map<string, LeaseView>>,
    touched: Map<string, Amounts | null>,
    etcdLeases: Map<string, string> | undefined,
  ): { writes: IRequestOp[]; allocationsWritten: KeyWritten[] } {
    const writes: IRequestOp[] = [];
    for (const [key, obj] of objects) {
      const was = reads.get(key);
      const lease = obj && etcdLeases?.get(obj.kind);
      if (obj)
        writes.push({
          request_put: { key: Buffer.from(key), value: Buffer.from(toStored(obj)), ...(lease ? { lease } : {}) },
        });
      else if (was && (was.obj !== undefined || was.value !== undefined))
        writes.push({ request_delete_range: { key: Buffer.from(key) } });
    }
    const allocationsWritten: KeyWritten[] = [];
    for (const [worker, held] of allocations) {
      const name = this.allocationKey(worker);
      const key = Buffer.from(name);
      if (held.size > 0) {
        const value = JSON.stringify(Object.fromEntries(held));
        writes.push({ request_put: { key, value: Buffer.from(value) } });
        allocationsWritten.push([name, value, held]);
      } else if (reads.get(name)?.value !== undefined) {
        writes.push({ request_delete_range: { key } });
        allocationsWritten.push([name, undefined]);
      }
    }
    for (const [q, use] of touched) {
      const name = this.queueUsageKey(q);
      const key = Buffer.from(name);
      const value = use ? JSON.stringify(use) : undefined;
      if (value) writes.push({ request_put: { key, value: Buffer.from(value) } });
      else writes.push({ request_delete_range: { key } }); // the Queue is gone (deleting a missing key is harmless)
      allocationsWritten.push([name, value]);
    }
    return { writes, allocationsWritten };
  }

  /** Sum one queue's usage from every allocation key, at one revision; returns that revision. */
  private async seedQueue(queue: string, seeds: Map<string, Amounts>): Promise<number> {
    const prefix = `${this.prefix}/allocations/`;
    const res = await this.client.kv.range({ key: Buffer.from(prefix), range_end: prefixEnd(prefix) });
    const leases: LeaseView[] = res.kvs.flatMap((kv) =>
      Object.values(JSON.parse(kv.value.toString()) as Record<string, LeaseView>),
    );
    seeds.set(queue, usageOf(leases.filter((l) => queueName(l) === queue)));
    return Number(res.header.revision);
  }

  /** A compare that fails when any allocation key changed after `rev`: the seed would be stale. */
  private allocationsUnchangedSince(rev: number): ICompare {
    const prefix = `${this.prefix}/allocations/`;
    return {
      key: Buffer.from(prefix),
      range_end: prefixEnd(prefix),
      target: "Mod",
      result: "Less",
      mod_revision: rev + 1,
    };
  }

  /** Read the keys not read yet, each batch in one snapshot. */
  private async read(reads: Map<string, Entry>, keys: string[]): Promise<void> {
    const missing = [...new Set(keys)].filter((k) => !reads.has(k));
    for (let i = 0; i < missing.length; i += READ_BATCH) {
      const batch = missing.slice(i, i + READ_BATCH);
      const res = await this.client.kv.txn({ success: batch.map((k) => ({ request_range: { key: Buffer.from(k) } })) });
      res.responses.forEach((r, j) => {
        const kv = r.response_range.kvs[0];
        reads.set(batch[j], kv ? { value: kv.value.toString(), mod: Number(kv.mod_revision) } : { mod: 0 });
      });
    }
  }

  /** Compacts etcd's history, which every installation sharing the cluster sees. */
  async compact(revision: number): Promise<void> {
    this.open();
    const head = Number(
      (await this.client.kv.range({ key: Buffer.from(this.revisionKey), count_only: true })).header.revision,
    );
    const upTo = Math.min(Math.floor(revision), head);
    if (upTo <= 0) return;
    try {
      await this.client.kv.compact({ revision: upTo, physical: true });
    } catch (e) {
      if (!/compacted/.test((e as Error).message)) throw e; // already compacted at or past it
    }
  }

  // ---- watch -------------------------------------------------------------------------

  async watch(
    kind: string | undefined,
    fromRevision: number,
    onEvent: (ev: WatchEvent) => void,
    opts: WatchOptions = {},
  ): Promise<WatchHandle> {
    this.open();
    void opts.pending; // every event etcd delivers is committed on a quorum already
    // Nothing of this store is older than its first key, so an older start means "from the start".
    const from = Math.max(Math.floor(fromRevision), this.base);
    await this.assertNotCompacted(fromRevision, from);
    const prefix = this.kindPrefix(kind);
    const objects = this.kindPrefix(undefined).length;
    // Every object's events with their last states is what each watch the API serves asks
    // for: those share one etcd watch (etcd-watch.ts).
    if (kind === undefined && opts.lastStateOnDelete !== false) {
      const shared = await this.sharedWatch(from);
      if (shared) return shared.subscribe(from, fromRevision, onEvent, opts.onError);
    }
    const builder = this.client.watch().prefix(prefix);
    if (opts.lastStateOnDelete !== false) builder.withPreviousKV();
    const watcher = builder.startRevision(String(from + 1)).watcher();
    let stopped = false;
    watcher.on("data", (res) => {
      if (stopped) return;
      // etcd never splits one revision across responses: each revision goes out in one run.
      for (const ev of res.events) {
        if (stopped) return;
        const event = new EtcdEvent(new EtcdRecord(ev, objects, this.own));
        try {
          onEvent(event);
        } catch (err) {
          console.error(`store watch callback failed at revision ${event.revision}:`, err);
        }
      }
    });
    watcher.on("error", (err: Error) => {
      if (stopped) return;
      stopped = true;
      this.watchers.delete(watcher);
      const e = watchEnded(err, fromRevision);
      if (opts.onError) opts.onError(e);
      else console.error(`etcd store watch on ${prefix} ended:`, e.message);
    });
    this.watchers.add(watcher);
    await new Promise<void>((resolve, reject) => {
      watcher.once("connected", () => resolve());
      watcher.once("error", reject);
    });
    return {
      stop: () => {
        stopped = true;
        this.watchers.delete(watcher);
        void watcher.cancel().catch(() => undefined);
      },
    };
  }

  /** A put of this process's, at the revision it committed at: the object it stored, not etcd's bytes decoded again. */
  private readonly own = (key: string, revision: number): StoredObject | undefined => {
    const w = this.written.get(key);
    return w?.revision === revision ? w.object : undefined;
  };

  /** The shared watch, started from `from` if there is none; undefined if it cannot serve a watch from `from`. */
  private async sharedWatch(from: number): Promise<SharedWatch | undefined> {
    let shared = this.shared;
    if (!shared) {
      const watcher = this.client
        .watch()
        .prefix(this.kindPrefix(undefined))
        .withPreviousKV()
        .startRevision(String(from + 1))
        .watcher();
      this.watchers.add(watcher);
      const started: SharedWatch = new SharedWatch(
        watcher,
        from,
        this.kindPrefix(undefined).length,
        this.own,
        watchEnded,
        () => {
          this.watchers.delete(watcher);
          if (this.shared === started) this.shared = undefined;
        },
      );
      this.shared = shared = started;
    }
    await shared.ready;
    return shared.covers(from) ? shared : undefined;
  }

  /** Gone exactly when events after `from` have been compacted away: a read at `from` fails. */
  private async assertNotCompacted(asked: number, from: number): Promise<void> {
    if (from < 1) return;
    try {
      await this.client.kv.range({ key: Buffer.from(this.revisionKey), revision: from, count_only: true });
    } catch (e) {
      const msg = (e as Error).message;
      if (/compacted/.test(msg)) throw gone(asked);
      if (!/future revision/.test(msg)) throw e;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.shared?.end();
    await Promise.all([...this.watchers].map((w) => w.cancel().catch(() => undefined)));
    this.watchers.clear();
    this.client.close();
  }

  private open(): void {
    if (this.closed) throw new Error(`etcd store ${this.prefix} is closed`);
  }
}

export const openEtcdStore = (opts: EtcdStoreOptions) => EtcdStore.open(opts);

function normalizePrefix(p: string): string {
  const s = p.replace(/\/+$/, "");
  if (s === "" || /\s/.test(s)) throw new Error(`etcd prefix must be a non-empty key path without spaces, got "${p}"`);
  return s.startsWith("/") ? s : `/${s}`;
}

/** The first key after every key that starts with `prefix`. */
function prefixEnd(prefix: string): Buffer {
  const b = Buffer.from(prefix);
  b[b.length - 1]++;
  return b;
}

function opKindName(op: TxnOp): [string, string] {
  if (op.op === "delete" || op.op === "check") return [String(op.kind ?? ""), String(op.name ?? "")];
  const o = (op as { object?: StoredObject }).object;
  return [String(o?.kind ?? ""), String(o?.metadata?.name ?? "")];
}

/** Stored without resourceVersion: the key's mod_revision is the resourceVersion. */
function toStored(obj: StoredObject): string {
  const { resourceVersion: _, ...metadata } = obj.metadata;
  return JSON.stringify({ ...obj, metadata });
}

/** Why a watch ended: Gone either way, so its consumer lists again. */
function watchEnded(err: Error, asked: number): StoreError {
  return /compacted/.test(err.message)
    ? gone(asked)
    : new StoreError("Gone", 410, `etcd watch ended: ${err.message}; list again and watch from the new revision`);
}

const fromKv = (kv: IKeyValue) => parseStored(kv.value.toString(), Number(kv.mod_revision));
