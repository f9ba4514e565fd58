// Resource vectors in the contract's whole units. Every request, capacity, reservation and
// headroom is one of these, fully filled in, so arithmetic never meets a missing field.
import { RESOURCE_FIELDS, type ResourceSpec } from "../resources/types.ts";

export type Vector = {
  cpu_millis: number;
  memory_mb: number;
  disk_mb: number;
  gpu_count: number;
  /** Sorted, de-duplicated accelerator types. */
  gpu_types: string[];
};

export const zero = (): Vector => ({ cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0, gpu_types: [] });

/** A copy that shares no array with the original, for snapshots that outlive the view. */
export const clone = (v: Vector): Vector => ({
  cpu_millis: v.cpu_millis,
  memory_mb: v.memory_mb,
  disk_mb: v.disk_mb,
  gpu_count: v.gpu_count,
  gpu_types: v.gpu_types.slice(),
});

/** `v`, its gpu_types included, made unchangeable: such a vector is shared, never copied. */
export function freeze(v: Vector): Vector {
  Object.freeze(v.gpu_types);
  return Object.freeze(v);
}

/**
 * What a snapshot holds of `v`: `v` itself when frozen (a task's request, a worker's
 * capacity: nothing can change it under the snapshot), else a copy. An admission decision
 * takes both for every worker it looks at.
 */
export const snapshotOf = (v: Vector): Vector => (Object.isFrozen(v) && Object.isFrozen(v.gpu_types) ? v : clone(v));

const typesOf = (v: Vector): string[] => (Object.isFrozen(v.gpu_types) ? v.gpu_types : v.gpu_types.slice());

/** v1 truncates floats; anything that is not a non-negative finite number counts as 0. */
export function wholeUnits(x: unknown): number {
  return typeof x === "number" && Number.isFinite(x) && x > 0 ? Math.floor(x) : 0;
}

export function normaliseTypes(types: unknown): string[] {
  if (!Array.isArray(types)) return [];
  const names = types
    .filter((s): s is string => typeof s === "string")
    .map((s) => s.trim())
    .filter(Boolean);
  return [...new Set(names)].sort();
}

/** A partial spec as a full vector: missing fields are 0, gpu_types sorted and de-duplicated. */
export function normalise(spec?: ResourceSpec | null): Vector {
  const out = zero();
  for (const f of RESOURCE_FIELDS) out[f] = wholeUnits(spec?.[f]);
  out.gpu_types = normaliseTypes(spec?.gpu_types);
  return out;
}

// The arithmetic below names the four counts (RESOURCE_FIELDS) one by one: it runs for every
// lease in every admission decision, and field by field it allocates only the result.

/** Sum of counts; gpu_types is the union, so a sum of reservations shows every type in use. */
export function add(a: Vector, b: Vector): Vector {
  return {
    cpu_millis: a.cpu_millis + b.cpu_millis,
    memory_mb: a.memory_mb + b.memory_mb,
    disk_mb: a.disk_mb + b.disk_mb,
    gpu_count: a.gpu_count + b.gpu_count,
    gpu_types: unionTypes(a.gpu_types, b.gpu_types),
  };
}

// Both sides are sorted and de-duplicated already: with one side empty the other is the union.
const unionTypes = (a: string[], b: string[]): string[] =>
  b.length === 0 ? a.slice() : a.length === 0 ? b.slice() : normaliseTypes([...a, ...b]);

/** The sum of any number of vectors (add() over them, from zero), allocating only the result. */
export const sum = (vs: Iterable<Vector>): Vector => sumOf(Array.isArray(vs) ? vs : [...vs], (v) => v);

/** The sum of the vector `of` each item holds (a reservation of each lease), without a list of them. */
export function sumOf<T>(items: readonly T[], of: (item: T) => Vector): Vector {
  let cpu_millis = 0;
  let memory_mb = 0;
  let disk_mb = 0;
  let gpu_count = 0;
  let types: string[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const v = of(items[i]);
    cpu_millis += v.cpu_millis;
    memory_mb += v.memory_mb;
    disk_mb += v.disk_mb;
    gpu_count += v.gpu_count;
    if (v.gpu_types.length) types = types ? unionTypes(types, v.gpu_types) : v.gpu_types;
  }
  return { cpu_millis, memory_mb, disk_mb, gpu_count, gpu_types: types ? types.slice() : [] };
}

/**
 * a - b floored at 0 in every dimension (headroom is never negative). gpu_types stays a's:
 * the types a worker has do not change with what is reserved on it.
 */
export function sub(a: Vector, b: Vector): Vector {
  return {
    cpu_millis: Math.max(0, a.cpu_millis - b.cpu_millis),
    memory_mb: Math.max(0, a.memory_mb - b.memory_mb),
    disk_mb: Math.max(0, a.disk_mb - b.disk_mb),
    gpu_count: Math.max(0, a.gpu_count - b.gpu_count),
    gpu_types: typesOf(a),
  };
}

/** sub(capacity, add(reserved, requested)) without the sum in between: the headroom a lease would leave. */
export function headroomAfter(capacity: Vector, reserved: Vector, requested: Vector): Vector {
  return {
    cpu_millis: Math.max(0, capacity.cpu_millis - reserved.cpu_millis - requested.cpu_millis),
    memory_mb: Math.max(0, capacity.memory_mb - reserved.memory_mb - requested.memory_mb),
    disk_mb: Math.max(0, capacity.disk_mb - reserved.disk_mb - requested.disk_mb),
    gpu_count: Math.max(0, capacity.gpu_count - reserved.gpu_count - requested.gpu_count),
    gpu_types: typesOf(capacity),
  };
}
