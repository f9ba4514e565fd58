// Declarative apply of one source file: what the file declares is created or updated,
// what it declared before and no longer does is pruned. Planning is pure (stored objects
// in, steps out); applying writes one file's steps in one store transaction, so a file's
// change lands whole or not at all.
import type { InputError } from "../resources/input-errors.ts";
import { isActive, isQueued } from "../resources/types.ts";
import { isStoreError } from "../store/errors.ts";
import { chunks } from "../store/ops.ts";
import { DEFAULT_RETRY, retryOnConflict } from "../store/retry.ts";
import { jsonEqual } from "../resources/json.ts";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import { jsonClone } from "../resources/json.ts";

/** The file that declares an object; the only mark that lets a file prune it. */
export const SOURCE_ANNOTATION = "loom.dev/source-file";
/** Set on a Worker its file no longer declares while it still holds leases. */
export const PRUNED_ANNOTATION = "loom.dev/pruned";
/** The kinds a file may declare. */
export const GITOPS_KINDS = ["Worker", "Campaign", "Task", "Queue"] as const;

export type ApplyOptions = {
  /** The declaring file; written to every object as SOURCE_ANNOTATION. */
  source: string;
  /** Remove what this source declared before and no longer declares. */
  prune: boolean;
  /**
   * Whether `owner`, the source a stored object is annotated with, still declares it.
   * When it does not (the object moved to this file), this file takes the object over
   * instead of reporting a conflict. Defaults to "still declares".
   */
  stillDeclares?: (owner: string, kind: string, name: string) => boolean;
  /** Another source that declares this object now; a prune candidate is then handed over, not pruned. */
  declaredElsewhere?: (kind: string, name: string) => string | undefined;
};

export type PlanStep =
  | { op: "create"; kind: string; name: string; object: StoredObject }
  | { op: "update"; kind: string; name: string; object: StoredObject }
  /** Prune, first half: a Worker that still holds leases is cordoned and marked pruned. */
  | { op: "cordon"; kind: string; name: string; object: StoredObject; activeTasks: string[] }
  | { op: "delete"; kind: string; name: string; resourceVersion?: string }
  /** Nothing written; `reason` says why (still leased, task already running, handed over). */
  | { op: "keep"; kind: string; name: string; reason: string; activeTasks?: string[] };

export type Plan = {
  source: string;
  steps: PlanStep[];
  /** Declared objects already as stored. */
  unchanged: number;
  /** Objects another source declares; a plan with errors must not be applied. */
  errors: InputError[];
  /** What the plan was made from, so applyPlan can plan again after a conflict. */
  desired: StoredObject[];
  opts: ApplyOptions;
};

export type ApplyResult = {
  plan: Plan;
  /** Objects as written (deleted ones as last seen), in step order; empty when the plan had errors. */
  written: StoredObject[];
  /** Transactions tried; more than one means a conflict was planned around. */
  attempts: number;
};

export const keyOf = (kind: string, name: string) => `${kind}/${name}`;
const key = (o: StoredObject) => keyOf(o.kind, o.metadata.name);
export const sourceOf = (o: StoredObject): string | undefined => o.metadata.annotations?.[SOURCE_ANNOTATION];
const isGitopsKind = (k: string) => (GITOPS_KINDS as readonly string[]).includes(k);

type TaskLike = StoredObject & { status?: { state?: string; lease?: { worker?: string } } };
const taskState = (t: StoredObject) => (t as TaskLike).status?.state;
/** A task with no status has not been picked up yet: it counts as queued. */
const stillQueued = (t: StoredObject) => taskState(t) === undefined || isQueued(taskState(t));

/** Fields a file may carry from `get -o yaml` that the store owns. */
const SERVER_META = ["uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"] as const;

/** The object as declared, reduced to what a file may set, with its source annotation. */
function declared(o: StoredObject, source: string): StoredObject {
  const copy = jsonClone(o);
  for (const f of SERVER_META) delete copy.metadata[f];
  delete copy.status;
  copy.metadata.annotations = { ...(copy.metadata.annotations ?? {}), [SOURCE_ANNOTATION]: source };
  return copy;
}

/**
 * Create / update / prune steps for one source. `current` is what the store holds (Workers,
 * Campaigns, and the Tasks needed to see leases and file-declared tasks); `desired` is
 * what the file declares now.
 */
export function planApply(current: StoredObject[], desired: StoredObject[], opts: ApplyOptions): Plan {
  const { source } = opts;
  const stillDeclares = opts.stillDeclares ?? (() => true);
  const byKey = new Map(current.filter((o) => isGitopsKind(o.kind)).map((o) => [key(o), o]));
  const plan: Plan = { source, steps: [], unchanged: 0, errors: [], desired, opts };
  const wanted = new Set<string>();

  for (const raw of desired) {
    if (!isGitopsKind(raw.kind)) continue;
    const d = declared(raw, source);
    const { kind, name } = { kind: d.kind, name: d.metadata.name };
    wanted.add(key(d));
    const cur = byKey.get(key(d));
    if (!cur) {
      // Tasks start queued, as a dispatched task does; Workers and Campaigns get status from their controllers.
      const object = kind === "Task" ? { ...d, status: { state: "queued", attempt: 1, conditions: [] } } : d;
      plan.steps.push({ op: "create", kind, name, object });
      continue;
    }
    const owner = sourceOf(cur);
    if (owner !== undefined && owner !== source && stillDeclares(owner, kind, name)) {
      plan.errors.push({
        source,
        field: "metadata.name",
        message: `${kind} "${name}" already declared by ${owner}`,
        reason: "FieldValueDuplicate",
        subject: key(d),
      });
      continue;
    }
    const step = updateStep(cur, d);
    if (step) plan.steps.push(step);
    else plan.unchanged++;
  }

  if (opts.prune) {
    const activeOn = activeLeases(current);
    for (const cur of byKey.values()) {
      if (sourceOf(cur) !== source || wanted.has(key(cur))) continue;
      plan.steps.push(pruneStep(cur, activeOn.get(cur.metadata.name) ?? [], opts));
    }
  }
  return plan;
}

/** The write that makes `cur` match the declaration, or undefined when it already does. */
function updateStep(cur: StoredObject, d: StoredObject): PlanStep | undefined {
  const { kind, name } = { kind: cur.kind, name: cur.metadata.name };
  const wasPruned = cur.metadata.annotations?.[PRUNED_ANNOTATION] !== undefined;
  // Declared labels and annotations win; keys the file never set (an operator's, a controller's) stay.
  const labels = { ...(cur.metadata.labels ?? {}), ...(d.metadata.labels ?? {}) };
  const annotations: Record<string, string> = {
    ...(cur.metadata.annotations ?? {}),
    ...(d.metadata.annotations ?? {}),
  };
  delete annotations[PRUNED_ANNOTATION]; // declared again: no longer on its way out
  let spec = d.spec as Record<string, unknown> | undefined;
  const curSpec = (cur.spec ?? {}) as Record<string, unknown>;
  // An operator's cordon survives a re-apply, as a Node's does under kubectl apply. A cordon
  // that pruning set goes with the pruned mark.
  if (kind === "Worker" && spec && !("unschedulable" in spec) && curSpec.unschedulable === true && !wasPruned)
    spec = { ...spec, unschedulable: true };
  let keepReason: string | undefined;
  // A task that has left the queue runs what it was leased with; only queued tasks take a new spec.
  if (kind === "Task" && !jsonEqual(spec, cur.spec) && !stillQueued(cur)) {
    keepReason = `task is ${taskState(cur)}; its spec change is not applied`;
    spec = cur.spec as Record<string, unknown>;
  }
  const ownerReferences = d.metadata.ownerReferences ?? cur.metadata.ownerReferences;
  const same =
    jsonEqual(spec, cur.spec) &&
    jsonEqual(labels, cur.metadata.labels ?? {}) &&
    jsonEqual(annotations, cur.metadata.annotations ?? {}) &&
    jsonEqual(ownerReferences, cur.metadata.ownerReferences);
  if (same) return keepReason ? { op: "keep", kind, name, reason: keepReason } : undefined;
  const metadata = {
    ...cur.metadata,
    annotations,
    ...(Object.keys(labels).length ? { labels } : {}),
    ...(ownerReferences ? { ownerReferences } : {}),
  };
  const object: StoredObject = { ...cur, metadata, spec };
  delete object.status; // the store keeps the stored status on update
  return { op: "update", kind, name, object };
}

/** Task names holding an active lease, per worker. */
function activeLeases(current: StoredObject[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const t of current) {
    if (t.kind !== "Task" || !isActive(taskState(t))) continue;
    const w = (t as TaskLike).status?.lease?.worker;
    if (!w) continue;
    out.set(w, [...(out.get(w) ?? []), t.metadata.name]);
  }
  return out;
}

function pruneStep(cur: StoredObject, active: string[], opts: ApplyOptions): PlanStep {
  const { kind, name } = { kind: cur.kind, name: cur.metadata.name };
  const rv = cur.metadata.resourceVersion;
  const other = opts.declaredElsewhere?.(kind, name);
  if (other !== undefined && other !== opts.source)
    return { op: "keep", kind, name, reason: `now declared by ${other}` };
  switch (kind) {
    case "Worker": {
      if (active.length === 0) return { op: "delete", kind, name, resourceVersion: rv };
      const spec = (cur.spec ?? {}) as Record<string, unknown>;
      if (cur.metadata.annotations?.[PRUNED_ANNOTATION] === "true" && spec.unschedulable === true)
        return {
          op: "keep",
          kind,
          name,
          reason: `pruned; deleted when its ${active.length} active lease(s) end`,
          activeTasks: active,
        };
      // No new leases; the running ones finish, then the worker goes.
      const object: StoredObject = {
        ...cur,
        metadata: {
          ...cur.metadata,
          annotations: { ...(cur.metadata.annotations ?? {}), [PRUNED_ANNOTATION]: "true" },
        },
        spec: { ...spec, unschedulable: true },
      };
      delete object.status;
      return { op: "cordon", kind, name, object, activeTasks: active };
    }
    case "Queue":
      // Its tasks stay; with the Queue gone they are no longer limited by it.
      return { op: "delete", kind, name, resourceVersion: rv };
    case "Campaign":
      // Background deletion, as kubectl delete: the campaign controller then deletes its tasks.
      return { op: "delete", kind, name, resourceVersion: rv };
    default:
      if (stillQueued(cur)) return { op: "delete", kind, name, resourceVersion: rv };
      return { op: "keep", kind, name, reason: `task is ${taskState(cur)}; not pruned` };
  }
}

/** The store ops of a plan: updates and deletes name the resourceVersion they were planned from. */
export function planOps(plan: Plan): TxnOp[] {
  const ops: TxnOp[] = [];
  for (const s of plan.steps) {
    if (s.op === "create") ops.push({ op: "create", object: s.object });
    else if (s.op === "update" || s.op === "cordon") ops.push({ op: "update", object: s.object });
    else if (s.op === "delete")
      ops.push({
        op: "delete",
        kind: s.kind,
        name: s.name,
        ...(s.resourceVersion ? { resourceVersion: s.resourceVersion } : {}),
      });
  }
  return ops;
}

/**
 * What planApply needs from the store for one source. Tasks are listed only when they can
 * matter (declared tasks, a Worker to prune, or `includeTasks`), since there can be many.
 */
export async function readCurrent(
  store: Store,
  desired: StoredObject[],
  opts: ApplyOptions & { includeTasks?: boolean },
): Promise<StoredObject[]> {
  const [workers, campaigns, queues] = await Promise.all([
    store.list("Worker"),
    store.list("Campaign"),
    store.list("Queue"),
  ]);
  const wanted = new Set(desired.map(key));
  const workerToPrune = opts.prune && workers.items.some((w) => sourceOf(w) === opts.source && !wanted.has(key(w)));
  const needTasks = (opts.includeTasks ?? true) || desired.some((o) => o.kind === "Task") || workerToPrune;
  const tasks = needTasks ? (await store.list("Task")).items : [];
  return [...workers.items, ...campaigns.items, ...queues.items, ...tasks];
}

const RETRYABLE = ["Conflict", "AlreadyExists", "NotFound"] as const;
export const MAX_APPLY_ATTEMPTS = DEFAULT_RETRY.attempts;

/**
 * Write a plan in one transaction. When someone wrote in between (a stale resourceVersion,
 * a name taken or gone), read again, plan again and retry (retryOnConflict). A plan with
 * errors (or one that gains errors on a re-plan) writes nothing.
 */
export async function applyPlan(
  store: Store,
  plan: Plan,
  readOpts: { includeTasks?: boolean } = {},
): Promise<ApplyResult> {
  return retryOnConflict(
    async (attempt) => {
      if (attempt > 1)
        plan = planApply(
          await readCurrent(store, plan.desired, { ...plan.opts, ...readOpts }),
          plan.desired,
          plan.opts,
        );
      const ops = plan.errors.length ? [] : planOps(plan);
      if (ops.length === 0) return { plan, written: [], attempts: attempt - 1 };
      // A plan larger than one transaction of the store (etcd) goes in chunks; a chunk that
      // meets a race re-plans from what is stored, so the chunks already written count as done.
      const written: StoredObject[] = [];
      for (const chunk of chunks(ops, store.maxWritesPerTxn)) written.push(...(await store.txn(chunk)));
      return { plan, written, attempts: attempt };
    },
    { attempts: MAX_APPLY_ATTEMPTS, retryable: (e) => RETRYABLE.some((r) => isStoreError(e, r)) },
  );
}

export type PlanCounts = {
  created: number;
  updated: number;
  cordoned: number;
  deleted: number;
  kept: number;
  unchanged: number;
};

export function countPlan(plan: Plan): PlanCounts {
  const n = (op: PlanStep["op"]) => plan.steps.filter((s) => s.op === op).length;
  return {
    created: n("create"),
    updated: n("update"),
    cordoned: n("cordon"),
    deleted: n("delete"),
    kept: n("keep"),
    unchanged: plan.unchanged,
  };
}
