// Names for the generated types that the rest of Loom uses, and the v1 state vocabulary.
export * from "./types.gen.ts";
export * from "./meta.ts";
import type { AnyResource, Kind, TaskSpecExecutionProfileResources, TaskStatus } from "./types.gen.ts";

/** The generated type of one CRD kind: ObjectOf<"Task"> is Task. */
export type ObjectOf<K extends Kind> = Extract<AnyResource, { kind: K }>;

/**
 * Narrow an object to its kind's generated type. The store validates every write of a CRD
 * kind against that kind's schema, so an object of that kind has that shape.
 */
export function isKind<K extends Kind>(obj: { kind: string } | undefined, kind: K): obj is ObjectOf<K> {
  return obj?.kind === kind;
}

/** A resource request, capacity, reservation or headroom, in the contract's whole units. */
export type ResourceSpec = TaskSpecExecutionProfileResources;
export type TaskState = NonNullable<TaskStatus["state"]>;

export const RESOURCE_FIELDS = ["cpu_millis", "memory_mb", "disk_mb", "gpu_count"] as const;
export type ResourceField = (typeof RESOURCE_FIELDS)[number];

/** The two states that hold a lease, and so a reservation. */
export const ACTIVE_STATES: readonly TaskState[] = ["leased", "running"];
export const QUEUED_STATES: readonly TaskState[] = ["queued", "retry_queued"];
export const FINAL_STATES: readonly TaskState[] = [
  "clean",
  "dirty",
  "run_error",
  "needs_review",
  "accepted",
  "ignored",
  "blocked",
  "cancelled",
  "lease_expired",
];

/** The status every new Task starts with, however it is created. */
export function initialStatus(): TaskStatus {
  return { state: "queued", attempt: 1, conditions: [] };
}

export const isActive = (s: string | undefined) => ACTIVE_STATES.includes(s as TaskState);
export const isQueued = (s: string | undefined) => QUEUED_STATES.includes(s as TaskState);
export const isFinal = (s: string | undefined) => FINAL_STATES.includes(s as TaskState);

/** The lease's worker; once the task is final, the worker that ran its last attempt (a requeued task has none until its next lease). */
export const taskWorker = (status: TaskStatus | undefined): string | undefined =>
  status?.lease?.worker ?? (isQueued(status?.state ?? "queued") ? undefined : status?.attempts?.at(-1)?.worker);
