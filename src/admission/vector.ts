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
export const clone = (v: Vector): Vector => ({ ...v, gpu_types: [...v.gpu_types] });

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

/** Sum of counts; gpu_types is the union, so a sum of reservations shows every type in use. */
export function add(a: Vector, b: Vector): Vector {
  const out = zero();
  for (const f of RESOURCE_FIELDS) out[f] = a[f] + b[f];
  // Both sides are sorted and de-duplicated already: with one side empty the other is the union.
  if (b.gpu_types.length === 0) out.gpu_types = [...a.gpu_types];
  else if (a.gpu_types.length === 0) out.gpu_types = [...b.gpu_types];
  else out.gpu_types = normaliseTypes([...a.gpu_types, ...b.gpu_types]);
  return out;
}

export const sum = (vs: Iterable<Vector>): Vector => [...vs].reduce(add, zero());

/**
 * a - b floored at 0 in every dimension (headroom is never negative). gpu_types stays a's:
 * the types a worker has do not change with what is reserved on it.
 */
export function sub(a: Vector, b: Vector): Vector {
  const out = zero();
  for (const f of RESOURCE_FIELDS) out[f] = Math.max(0, a[f] - b[f]);
  out.gpu_types = [...a.gpu_types];
  return out;
}
