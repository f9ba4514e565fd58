// Decisions become text only here, at print time (kube-scheduler's FitError does the same).
// The summary keeps per-worker detail: a single "0/N" line that hides one worker's reason
// is what this avoids.
import { RESOURCE_FIELDS, type ResourceField } from "../resources/types.ts";
import { isSetShortfall, type Failure, type Shortfall } from "./checks.ts";
import type { Decision } from "./decide.ts";
import { REASON_ORDER, type ReasonCode } from "./reasons.ts";

const list = (xs: readonly string[]) => (xs.length ? xs.join(", ") : "none");

function describeShortfall(field: ResourceField, s: Shortfall, f: Failure): string {
  if (!f.resolvable) return `${field}: need ${s.requested}, capacity ${s.capacity}: never fits, even empty (${f.code})`;
  const free = Math.max(0, s.capacity - s.reserved);
  const line = `${field}: need ${s.requested}, free ${free} (capacity ${s.capacity}, reserved ${s.reserved}, short ${s.short})`;
  // Only an unknown capacity lets a request larger than the whole worker stay resolvable.
  return s.requested > s.capacity ? `${line}; capacity not reported yet` : line;
}

/** One failure as a phrase, with its numbers. */
export function describeFailure(f: Failure, d: Decision): string {
  if (f.message) return `${f.code}: ${f.message}`;
  if (f.field && f.shortfall && !isSetShortfall(f.shortfall) && RESOURCE_FIELDS.includes(f.field as ResourceField))
    return describeShortfall(f.field as ResourceField, f.shortfall, f);
  if (f.field === "gpu_types" && isSetShortfall(f.shortfall))
    return `gpu_types: need [${f.shortfall.requested.join(", ")}], worker has [${f.shortfall.available.join(", ")}] (${f.code})`;
  const c = d.admission.concurrency;
  switch (f.code) {
    case "capability_missing": {
      const s = isSetShortfall(f.shortfall) ? f.shortfall : { requested: [], available: [] };
      return `capability_missing: needs ${list(s.requested)}, worker offers ${list(s.available)}`;
    }
    case "worker_excluded":
      return "worker_excluded: a different_worker retry excludes this worker";
    case "worker_cordoned":
      return "worker_cordoned: cordoned, no new leases";
    case "worker_not_ready":
      return "worker_not_ready: no heartbeat within the grace period";
    case "exclusive_worker_busy":
      return `exclusive_worker_busy: exclusive placement needs an empty worker, ${c.active_count} active`;
    case "worker_has_exclusive_task":
      return "worker_has_exclusive_task: an exclusive lease is active";
    case "worker_concurrency_reached":
      return `worker_concurrency_reached: active ${c.active_count}, limit ${c.effective_limit} (desired ${c.desired_concurrency}, max ${c.max_concurrency})`;
    default:
      return f.code;
  }
}

/** One line for one worker: "ok", or every failure with its numbers. */
export function explainWorker(d: Decision): string {
  return d.ok ? "ok" : d.failures.map((f) => describeFailure(f, d)).join("; ");
}

export type Summary = {
  total: number;
  /** Workers that admit the task now. */
  admittable: string[];
  /** The code rejecting the most workers (ties go to REASON_ORDER); absent when nothing rejects. */
  dominant?: ReasonCode;
  /** Workers rejected for each code; a worker with several codes counts under each. */
  counts: Partial<Record<ReasonCode, number>>;
  /** At least one worker, and every worker has a failure that holds even when it is empty. */
  unsatisfiable: boolean;
};

// A code the order does not list ranks last, so it is still counted and shown.
const rank = (c: ReasonCode) => (REASON_ORDER.includes(c) ? REASON_ORDER.indexOf(c) : REASON_ORDER.length);

function codesByCount(counts: Partial<Record<ReasonCode, number>>): ReasonCode[] {
  return (Object.keys(counts) as ReasonCode[]).sort((a, b) => counts[b]! - counts[a]! || rank(a) - rank(b));
}

export function summarize(decisions: readonly Decision[]): Summary {
  const counts: Partial<Record<ReasonCode, number>> = {};
  for (const d of decisions) for (const r of d.reasons) counts[r] = (counts[r] ?? 0) + 1;
  const dominant = codesByCount(counts)[0];
  return {
    total: decisions.length,
    admittable: decisions.filter((d) => d.ok).map((d) => d.worker),
    ...(dominant ? { dominant } : {}),
    counts,
    unsatisfiable: decisions.length > 0 && decisions.every((d) => d.unresolvable),
  };
}

const FIELD_ORDER: readonly string[] = [...RESOURCE_FIELDS, "gpu_types"];

/**
 * At most this many workers are named per group; the rest are counted. The task-wide line
 * is stored in a condition on every queued task, so it must stay small with 1000 workers;
 * the per-worker detail is one task-admission call away.
 */
export const NAMED_PER_GROUP = 5;

/** The first NAMED_PER_GROUP items as text, and how many more there are; only those named are spelled out. */
function capped<T>(items: readonly T[], text: (item: T, i: number) => string = String): string {
  const named = items.slice(0, NAMED_PER_GROUP).map(text).join(", ");
  return items.length <= NAMED_PER_GROUP ? named : `${named}, +${items.length - NAMED_PER_GROUP} more`;
}

/** "memory_mb short 1024 on a, short 512 on b, gpu_types [a100] on c": grouped by field, the name said once. */
function resourceDetail(code: ReasonCode, decisions: readonly Decision[]): string {
  const items = decisions
    .flatMap((d) =>
      d.failures.filter((f) => f.code === code && f.field && FIELD_ORDER.includes(f.field)).map((f) => ({ d, f })),
    )
    .sort((a, b) => FIELD_ORDER.indexOf(a.f.field!) - FIELD_ORDER.indexOf(b.f.field!));
  return capped(items, ({ d, f }, i) => {
    const what = isSetShortfall(f.shortfall)
      ? `[${f.shortfall.requested.join(", ")}]`
      : `short ${f.shortfall?.short ?? 0}`;
    // The field is named where its run starts.
    return `${i > 0 && items[i - 1].f.field === f.field ? "" : `${f.field} `}${what} on ${d.worker}`;
  });
}

function capabilityDetail(decisions: readonly Decision[]): string {
  const byCap = new Map<string, string[]>();
  for (const d of decisions)
    for (const f of d.failures)
      if (f.code === "capability_missing" && isSetShortfall(f.shortfall)) {
        const cap = f.shortfall.requested.join(", ");
        const workers = byCap.get(cap);
        if (workers) workers.push(d.worker);
        else byCap.set(cap, [d.worker]);
      }
  return [...byCap].map(([cap, ws]) => `${cap} on ${capped(ws)}`).join("; ");
}

function detail(code: ReasonCode, rejected: readonly Decision[]): string {
  const having = rejected.filter((d) => d.reasons.includes(code));
  if (code === "resource_reservation_unavailable" || code === "exceeds_worker_capacity")
    return resourceDetail(code, having);
  if (code === "capability_missing") return capabilityDetail(having);
  // A queue's numbers are the same on every worker: said once.
  if (code === "queue_quota_exhausted" || code === "queue_borrowing_limit")
    return [
      ...new Set(having.flatMap((d) => d.failures.filter((f) => f.code === code).map((f) => f.message ?? ""))),
    ].join("; ");
  return capped(having.map((d) => d.worker));
}

/**
 * The task-wide line, kube-scheduler style but keeping each worker's detail:
 * "0/3 workers admit: 2 resource_reservation_unavailable (memory_mb short 1024 on evaluation-01,
 * short 512 on evaluation-02), 1 capability_missing (gpu on evaluation-03)".
 */
export function explainTask(decisions: readonly Decision[]): string {
  const s = summarize(decisions);
  if (s.total === 0) return "0/0 workers admit: no workers";
  const head = `${s.admittable.length}/${s.total} workers admit${s.admittable.length ? ` (${capped(s.admittable)})` : ""}`;
  const rejected = decisions.filter((d) => !d.ok);
  const groups = codesByCount(s.counts).map((code) => {
    const more = detail(code, rejected);
    return `${s.counts[code]} ${code}${more ? ` (${more})` : ""}`;
  });
  const tail = s.unsatisfiable ? "; unsatisfiable: no worker fits it even when empty" : "";
  return groups.length ? `${head}: ${groups.join(", ")}${tail}` : head;
}
