// The one set of admission reason codes. The engine, conditions, the API and the CLI all
// use these names, so a code means the same thing wherever it appears.

export const Reason = {
  // v1 codes (RUNNER_PROTOCOL section 4); v1 clients see only these in `reason`.
  exclusive_worker_busy: "exclusive_worker_busy",
  worker_has_exclusive_task: "worker_has_exclusive_task",
  resource_reservation_unavailable: "resource_reservation_unavailable",
  worker_concurrency_reached: "worker_concurrency_reached",
  worker_blocked: "worker_blocked",
  worker_not_eligible: "worker_not_eligible",
  // Loom's finer codes; they travel in `reasons[]`.
  capability_missing: "capability_missing",
  worker_not_ready: "worker_not_ready",
  worker_cordoned: "worker_cordoned",
  exceeds_worker_capacity: "exceeds_worker_capacity",
  worker_excluded: "worker_excluded",
  worker_nominated: "worker_nominated",
  // The task's Queue: quota used up (nothing left to borrow), or its own borrowing limit reached.
  queue_quota_exhausted: "queue_quota_exhausted",
  queue_borrowing_limit: "queue_borrowing_limit",
} as const;

export type ReasonCode = (typeof Reason)[keyof typeof Reason];

/** The codes a v1 client may see in `reason`. worker_not_ready is Loom's, but has no coarser v1 code to hide behind. */
export type V1Reason =
  | "worker_blocked"
  | "worker_not_eligible"
  | "worker_not_ready"
  | "exclusive_worker_busy"
  | "worker_has_exclusive_task"
  | "resource_reservation_unavailable"
  | "worker_concurrency_reached";

/** v1 priority: when several checks fail, the single v1 `reason` is the first of these that applies. */
export const V1_ORDER: readonly V1Reason[] = [
  "worker_blocked",
  "worker_not_eligible",
  "worker_not_ready",
  "exclusive_worker_busy",
  "worker_has_exclusive_task",
  "resource_reservation_unavailable",
  "worker_concurrency_reached",
];

/** Fine code -> the v1 code that v1 clients receive for it. */
export const V1_REASON_OF: Readonly<Record<ReasonCode, V1Reason>> = {
  // A v1 code is its own v1 code.
  ...(Object.fromEntries(V1_ORDER.map((r) => [r, r])) as Record<V1Reason, V1Reason>),
  capability_missing: "worker_not_eligible",
  worker_excluded: "worker_not_eligible",
  worker_cordoned: "worker_blocked",
  exceeds_worker_capacity: "resource_reservation_unavailable",
  // The worker's room is held for a starving task: for a v1 client, not available.
  worker_nominated: "resource_reservation_unavailable",
  // A queue's quota is a reservation limit too: for a v1 client, not available.
  queue_quota_exhausted: "resource_reservation_unavailable",
  queue_borrowing_limit: "resource_reservation_unavailable",
};

/**
 * Display order of `reasons[]`: grouped by the v1 code they map to (in v1 order), the
 * finer code before its v1 umbrella, and "never fits" before "not now".
 */
export const REASON_ORDER: readonly ReasonCode[] = [
  "worker_cordoned",
  "worker_blocked",
  "capability_missing",
  "worker_excluded",
  "worker_not_eligible",
  "worker_not_ready",
  "exclusive_worker_busy",
  "worker_has_exclusive_task",
  "exceeds_worker_capacity",
  "worker_nominated",
  "queue_borrowing_limit",
  "queue_quota_exhausted",
  "resource_reservation_unavailable",
  "worker_concurrency_reached",
];

export const isReasonCode = (s: string): s is ReasonCode => Object.prototype.hasOwnProperty.call(V1_REASON_OF, s);

export const v1ReasonOf = (code: ReasonCode): V1Reason => V1_REASON_OF[code];

/** De-duplicated, in REASON_ORDER; a code the order does not list still appears, after the listed ones. */
export function orderReasons(codes: Iterable<ReasonCode>): ReasonCode[] {
  const seen = new Set(codes);
  const listed = REASON_ORDER.filter((c) => seen.has(c));
  return listed.length === seen.size
    ? listed
    : [...listed, ...[...seen].filter((c) => !REASON_ORDER.includes(c)).sort()];
}

/** The single v1 `reason` for a set of fine codes: the first in v1 order, or undefined when there are none. */
export function firstV1Reason(codes: Iterable<ReasonCode>): V1Reason | undefined {
  const v1 = new Set([...codes].map(v1ReasonOf));
  return V1_ORDER.find((c) => v1.has(c));
}
