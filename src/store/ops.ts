// What every backend does to a write before storing it, in one place: input copies,
// identities, preconditions, the object a create/update/updateStatus produces, validation
// and the lease guard's refusal. Backends differ only in how they read and commit.
import { randomUUID } from "node:crypto";
import {
  allocationOf,
  allocationQueue,
  leaseViolations,
  queueViolations,
  sameAllocation,
  type Allocation,
} from "../admission/guard.ts";
import { addAmounts, demandOf, type Amounts } from "../admission/queues.ts";
import { shareLeaseView, type LeaseView } from "../admission/view.ts";
import { isKind } from "../resources/types.ts";
import { loadCrds } from "../resources/crds.ts";
import { isJsonObject, jsonClone, jsonEqual } from "../resources/json.ts";
import { validateMetadata, validateObject, validateStatus } from "../resources/validate.ts";
import { alreadyExists, conflict, invalid, notFound, StoreError } from "./errors.ts";
import type { Applied, ApplyOptions, StoredObject, TxnOp, WatchEventType } from "./store.ts";

export const badRequest = (message: string) => new StoreError("BadRequest", 400, message);

/**
 * A private deep copy of the caller's object; later mutations by the caller cannot reach
 * the store. A status write reads nothing but the identity, the precondition and the
 * status, so only those are copied. An `owned` object (ApplyOptions.ownedInput) is taken
 * as it is: its caller never touches it again.
 */
function copyInput(obj: StoredObject, statusOnly = false, owned = false): StoredObject {
  if (!obj || typeof obj !== "object" || Array.isArray(obj)) throw badRequest("object must be a JSON object");
  const m = obj.metadata;
  if (!m || typeof m !== "object" || Array.isArray(m))
    throw new StoreError("Invalid", 422, `${String(obj.kind)}: metadata is required`, [
      { field: "metadata", message: "required", reason: "FieldValueRequired" },
    ]);
  if (!statusOnly) return owned ? obj : jsonClone(obj);
  const part = { kind: obj.kind, metadata: { name: m.name, resourceVersion: m.resourceVersion }, status: obj.status };
  return (owned ? part : jsonClone(part)) as StoredObject;
}

function identity(obj: StoredObject): { kind: string; name: string } {
  if (typeof obj.kind !== "string" || obj.kind === "") throw badRequest("object has no kind");
  if (typeof obj.metadata.name !== "string" || obj.metadata.name === "")
    throw new StoreError("Invalid", 422, `${obj.kind}: metadata.name is required`, [
      { field: "metadata.name", message: "required", reason: "FieldValueRequired" },
    ]);
  return { kind: obj.kind, name: obj.metadata.name };
}

function opIdentity(op: { kind: unknown; name: unknown }): void {
  if (typeof op.kind !== "string" || op.kind === "" || typeof op.name !== "string" || op.name === "")
    throw badRequest("txn: delete and check ops need a kind and a name");
}

function precondition(kind: string, name: string, want: string | undefined, cur: StoredObject): void {
  if (want !== undefined && want !== "" && want !== cur.metadata.resourceVersion)
    throw conflict(
      kind,
      name,
      `the object has been modified (resourceVersion ${want} is stale, current is ${cur.metadata.resourceVersion}); read it again and retry`,
    );
}

/** A `check` op against what is stored (`have` undefined: the object does not exist). */
function checkOp(op: Extract<TxnOp, { op: "check" }>, have: string | undefined): void {
  if (typeof op.resourceVersion !== "string")
    throw badRequest(`txn: check of ${op.kind} "${op.name}" needs a resourceVersion`);
  if ((have ?? "0") === op.resourceVersion) return;
  throw conflict(
    op.kind,
    op.name,
    op.resourceVersion === "0"
      ? "must not exist, but it does"
      : have === undefined
        ? `expected resourceVersion ${op.resourceVersion}, but it does not exist`
        : `expected resourceVersion ${op.resourceVersion}, found ${have}`,
  );
}

/** The object a create stores: a fresh uid, creationTimestamp and generation 1. */
function createdObject(input: StoredObject, now: string, rv: string): StoredObject {
  // A caller-supplied status is kept: a Runner's registration creates a Worker with both.
  const { deletionTimestamp: _dropped, ...metadata } = input.metadata;
  return {
    ...input,
    metadata: { ...metadata, uid: randomUUID(), creationTimestamp: now, generation: 1, resourceVersion: rv },
  };
}

/** The object an update (metadata + spec, status kept) or updateStatus (status only) stores. */
function changedObject(
  op: "update" | "updateStatus",
  input: StoredObject,
  cur: StoredObject,
  rv: string,
): StoredObject {
  let obj: StoredObject;
  if (op === "update") {
    // The status is the stored one: left out of the copy rather than deleted from it (laidOut()).
    const { status: _kept, ...fields } = input;
    obj = {
      ...fields,
      metadata: {
        ...input.metadata,
        // Once set, a deletion stays requested whoever updates the object (GitOps, a controller).
        ...(cur.metadata.deletionTimestamp ? { deletionTimestamp: cur.metadata.deletionTimestamp } : {}),
        // A write that leaves managedFields out keeps them (server-side apply's record); [] clears them.
        ...(input.metadata.managedFields === undefined && cur.metadata.managedFields !== undefined
          ? { managedFields: cur.metadata.managedFields }
          : {}),
        uid: cur.metadata.uid,
        creationTimestamp: cur.metadata.creationTimestamp,
        generation: (cur.metadata.generation ?? 1) + (jsonEqual(cur.spec, input.spec) ? 0 : 1),
        resourceVersion: rv,
      },
    };
    if (cur.status !== undefined) obj.status = cur.status;
  } else {
    const { status: _replaced, ...rest } = cur;
    obj = { ...rest, metadata: { ...cur.metadata, resourceVersion: rv } };
    if (input.status !== undefined) obj.status = laidOut(input.status);
  }
  return obj;
}

/**
 * A status as the store keeps it: a new object with the same fields, which share their
 * values with `status`. A status its writer built by deleting a field (a lease that ended,
 * a nomination cleared) is one V8 holds as a hash table, about three times the size of a
 * fresh object and slower to read, and the informer keeps it for the object's life. A
 * status that is not a JSON object is left for validation to refuse.
 */
function laidOut(status: unknown): unknown {
  return isJsonObject(status) ? { ...status } : status;
}

/**
 * Checks an object about to be stored; `statusOnly`: only its status changed (the rest is
 * stored already), and `prevStatus` is the stored status it replaces.
 */
export type Validator = (obj: StoredObject, statusOnly?: boolean, prevStatus?: unknown) => void;

/** CRD kinds are validated against their schema, every other kind (Event, ...) by its metadata. */
export function objectValidator(): Validator {
  const crdKinds = new Set(loadCrds().keys());
  return (obj, statusOnly = false, prevStatus) => {
    const causes = statusOnly
      ? validateStatus(obj, prevStatus)
      : crdKinds.has(obj.kind)
        ? validateObject(obj)
        : validateMetadata(obj);
    if (causes.length > 0) throw invalid(obj.kind, obj.metadata.name, causes);
  };
}

/** How a Task write changes its worker's lease set: nothing, a release, or a (possibly moved) lease. */
export function allocationChange(
  kind: string,
  before: StoredObject | undefined,
  after: StoredObject | undefined,
): { was?: Allocation; now?: Allocation } | undefined {
  if (kind !== "Task") return undefined;
  if (isKind(before, "Task") && isKind(after, "Task") && shareLeaseView(before, after)) return undefined;
  const was = isKind(before, "Task") ? allocationOf(before) : undefined;
  const now = isKind(after, "Task") ? allocationOf(after) : undefined;
  return sameAllocation(was, now) ? undefined : { was, now };
}

/** Refuse a lease the worker (the object stored under its name) cannot hold beside `held` (admission/guard.ts), naming every broken dimension. */
export function guardLease(worker: StoredObject | undefined, now: Allocation, held: readonly LeaseView[]): void {
  const causes = leaseViolations(
    isKind(worker, "Worker") ? worker : undefined,
    now,
    held.filter((l) => l.task !== now.task),
  );
  if (causes.length > 0)
    throw new StoreError(
      "Conflict",
      409,
      `task "${now.task}": a lease on worker "${now.worker}" would break admission: ${causes.map((c) => c.message).join("; ")}`,
      causes.map((c) => ({ ...c, reason: "FieldValueInvalid" as const })),
    );
}

/**
 * Refuse a lease that takes its queue past nominal + borrowing limit (admission/guard.ts).
 * `queue` is the Queue object stored under the lease's queue name (undefined: not limited);
 * `usedWithout` is what the queue's other active leases hold, as this transaction sees them.
 */
export function guardQueue(queue: StoredObject | undefined, now: Allocation, usedWithout: Amounts): void {
  const causes = queueViolations(isKind(queue, "Queue") ? queue : undefined, now, usedWithout);
  if (causes.length > 0)
    throw new StoreError(
      "Conflict",
      409,
      `task "${now.task}": a lease in queue "${allocationQueue(now)}" would break its quota: ${causes.map((c) => c.message).join("; ")}`,
      causes.map((c) => ({ ...c, reason: "FieldValueInvalid" as const })),
    );
}

/** The single-object writes, each one txn: what every backend offers on top of apply(). */
export abstract class TxnWrites {
  abstract apply(ops: TxnOp[], opts?: ApplyOptions): Promise<Applied>;
  abstract readonly maxWritesPerTxn: number;

  /** Resolves once the commit is durable, with the written objects in op order (each of its op's kind, so of type T). */
  async txn<T extends StoredObject = StoredObject>(ops: TxnOp<T>[]): Promise<T[]> {
    const a = await this.apply(ops);
    await a.durable;
    return a.results as T[];
  }

  async create<T extends StoredObject>(obj: T): Promise<T> {
    return (await this.txn([{ op: "create", object: obj }]))[0];
  }

  async update<T extends StoredObject>(obj: T): Promise<T> {
    return (await this.txn([{ op: "update", object: obj }]))[0];
  }

  async updateStatus<T extends StoredObject>(obj: T): Promise<T> {
    return (await this.txn([{ op: "updateStatus", object: obj }]))[0];
  }

  async delete<T extends StoredObject = StoredObject>(
    kind: string,
    name: string,
    opts: { resourceVersion?: string } = {},
  ): Promise<T> {
    return (await this.txn([{ op: "delete", kind, name, resourceVersion: opts.resourceVersion }]))[0] as T;
  }
}

/** Split `items` into chunks of at most `size` (a store's maxWritesPerTxn, capped by what the caller wants per commit). */
export function chunks<T>(items: readonly T[], size: number): T[][] {
  const n = Math.max(1, Math.floor(size));
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += n) out.push(items.slice(i, i + n));
  return out;
}

/** What a backend shows decideOp(): the objects as this transaction sees them, and its lease guard. */
export interface OpView {
  current(kind: string, name: string): StoredObject | undefined;
  /** Keep the lease index in step with a Task write; throws to refuse it (guardLease). */
  allocate(kind: string, before: StoredObject | undefined, after: StoredObject | undefined): void;
}

/**
 * One op's effect: the object to store (null: delete it), the entry it adds to the results,
 * and the resourceVersion of the object it replaces or deletes (none for a create).
 */
export type OpEffect =
  | {
      kind: string;
      name: string;
      type: WatchEventType;
      stored: StoredObject | null;
      result: StoredObject;
      replaced?: string;
    }
  | undefined;

/**
 * Decide one op of a transaction against `view`, exactly the same on every backend: throws a
 * StoreError for anything that must fail the transaction. `rv` is the revision it commits at;
 * `owned`: the op's object is the caller's to give (ApplyOptions.ownedInput), stored uncopied.
 * Nothing here changes the input, so an op may be decided again after a retry.
 */
export function decideOp(
  op: TxnOp,
  view: OpView,
  now: string,
  rv: string,
  validate: Validator,
  owned = false,
): OpEffect {
  switch (op?.op) {
    case "create": {
      const input = copyInput(op.object, false, owned);
      const { kind, name } = identity(input);
      if (view.current(kind, name)) throw alreadyExists(kind, name);
      const obj = createdObject(input, now, rv);
      validate(obj);
      view.allocate(kind, undefined, obj);
      return { kind, name, type: "ADDED", stored: obj, result: obj };
    }
    case "update":
    case "updateStatus": {
      const statusOnly = op.op === "updateStatus";
      const input = copyInput(op.object, statusOnly, owned);
      const { kind, name } = identity(input);
      const cur = view.current(kind, name);
      if (!cur) throw notFound(kind, name);
      precondition(kind, name, input.metadata.resourceVersion, cur);
      const obj = changedObject(op.op, input, cur, rv);
      validate(obj, statusOnly, statusOnly ? cur.status : undefined);
      view.allocate(kind, cur, obj);
      return { kind, name, type: "MODIFIED", stored: obj, result: obj, replaced: cur.metadata.resourceVersion };
    }
    case "delete": {
      opIdentity(op);
      const cur = view.current(op.kind, op.name);
      if (!cur) throw notFound(op.kind, op.name);
      precondition(op.kind, op.name, op.resourceVersion, cur);
      view.allocate(op.kind, cur, undefined);
      return {
        kind: op.kind,
        name: op.name,
        type: "DELETED",
        stored: null,
        result: cur,
        replaced: cur.metadata.resourceVersion,
      };
    }
    case "check":
      opIdentity(op);
      checkOp(op, view.current(op.kind, op.name)?.metadata.resourceVersion);
      return undefined;
    default:
      throw badRequest(`txn: unknown op ${JSON.stringify((op as { op?: unknown })?.op)}`);
  }
}

/**
 * Per-queue usage inside one transaction, for a backend that keeps one usage record per
 * Queue (etcd: a key compared and rewritten in the same Txn, as a worker's allocation key
 * is). The record is an index of the active leases, like the allocations index: it is
 * seeded from the leases themselves when a Queue is created (or its record is missing), and
 * moved by exactly each lease change after that. Queues with no Queue object keep none.
 * Every read happens before any change, so a backend that throws to fetch a key
 * (NeedKeys) can decide the op again from a clean state.
 */
export class QueueUsageTxn {
  /** Queues touched in this transaction: their usage as it will be stored (null: delete the record). */
  readonly touched = new Map<string, Amounts | null>();

  constructor(
    private readonly io: {
      /** The Queue object stored under this name, as the transaction sees it. */
      queue(name: string): StoredObject | undefined;
      /** The stored usage record; undefined when there is none. */
      stored(name: string): Amounts | undefined;
      /** The queue's usage summed from every active lease (the seed). */
      seed(name: string): Amounts;
    },
  ) {}

  private usage(q: string, fresh = false): Amounts {
    const cur = this.touched.get(q);
    if (cur && !fresh) return cur;
    return (!fresh && this.io.stored(q)) || this.io.seed(q);
  }

  /** A Task write moved a lease from `was` to `now`: guard the queue it joins, move both queues' usage. */
  lease(was: Allocation | undefined, now: Allocation | undefined): void {
    const wq = was && isKind(this.io.queue(allocationQueue(was)), "Queue") ? allocationQueue(was) : undefined;
    const nq = now && isKind(this.io.queue(allocationQueue(now)), "Queue") ? allocationQueue(now) : undefined;
    const wasUse = wq !== undefined ? this.usage(wq) : undefined;
    let nowUse = nq !== undefined ? (nq === wq ? wasUse! : this.usage(nq)) : undefined;
    // Reads done: from here on nothing throws for a missing key.
    if (wq !== undefined) {
      const after = addAmounts(wasUse!, demandOf(was!.lease.reservation), -1);
      this.touched.set(wq, after);
      if (nq === wq) nowUse = after;
    }
    if (nq !== undefined) {
      guardQueue(this.io.queue(nq), now!, nowUse!);
      this.touched.set(nq, addAmounts(nowUse!, demandOf(now!.lease.reservation)));
    }
  }

  /** A Queue was created (seed its record from the leases) or deleted (drop it). */
  queueObject(name: string, before: StoredObject | undefined, after: StoredObject | undefined): void {
    if (!after) this.touched.set(name, null);
    else if (!before) this.touched.set(name, this.usage(name, true));
  }
}
