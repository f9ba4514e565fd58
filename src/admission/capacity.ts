// A worker's effective capacity: what the scheduler may reserve on it. The inventory wins
// where it declares a field; otherwise the Runner's registered value; otherwise the
// conservative default v1 derives from the host snapshot.
import { HAS_CONTROL, MAX_INT } from "../resources/limits.ts";
import { RESOURCE_FIELDS, type ResourceField, type ResourceSpec, type Worker } from "../resources/types.ts";
import { normaliseTypes, wholeUnits, zero, type Vector } from "./vector.ts";

/** The Runner's host snapshot (`health.resources` at registration). Fields may be absent or junk. */
export type HostResources = Record<string, unknown>;

const num = (x: unknown): number | undefined => (typeof x === "number" && Number.isFinite(x) ? x : undefined);

/** RUNNER_PROTOCOL section 4: the capacity v1 assumes for a field nobody declared. */
export function defaultCapacityFromHost(host?: HostResources | null): Vector {
  const h = host ?? {};
  return {
    cpu_millis: Math.max(1000, wholeUnits(num(h.cpu_count)) * 1000),
    memory_mb: wholeUnits(num(h.mem_available_mb) ?? num(h.mem_total_mb) ?? 0),
    disk_mb: wholeUnits(num(h.disk_available_mb) ?? num(h.disk_total_mb) ?? 0),
    gpu_count: 0,
    gpu_types: [],
  };
}

/** base with every field the override declares replaced (how a Runner merges its overrides at registration). */
export function overlayCapacity(base: Vector, override?: ResourceSpec | null): Vector {
  const out: Vector = { ...base, gpu_types: [...base.gpu_types] };
  for (const f of RESOURCE_FIELDS) if (num(override?.[f]) !== undefined) out[f] = wholeUnits(override![f]);
  if (Array.isArray(override?.gpu_types)) out.gpu_types = normaliseTypes(override.gpu_types);
  return out;
}

/** A capacity input that breaks a rule: `field` is its path, `detail` the rule. */
export class CapacityError extends Error {
  constructor(
    readonly field: string,
    readonly detail: string,
  ) {
    super(`${field}: ${detail}`);
    this.name = "CapacityError";
  }
}

const CAPACITY_KEYS: readonly string[] = [...RESOURCE_FIELDS, "gpu_types"];

const isTypeName = (s: unknown) => typeof s === "string" && s.trim() !== "" && s.length <= 253 && !HAS_CONTROL.test(s);

/**
 * A partial capacity as a Runner flag, an inventory override or a registration body gives it
 * (RUNNER_PROTOCOL section 4): booleans and strings refused, floats truncated, unknown keys
 * refused, gpu_types sorted and de-duplicated and only with a positive gpu_count.
 */
export function parseCapacity(raw: unknown, field = "resource_capacity"): Partial<Vector> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw new CapacityError(field, "must be an object");
  const out: Partial<Vector> = {};
  for (const [k, v] of Object.entries(raw)) {
    if (!CAPACITY_KEYS.includes(k))
      throw new CapacityError(`${field}.${k}`, `unknown field; allowed: ${CAPACITY_KEYS.join(", ")}`);
    if (k === "gpu_types") {
      if (!Array.isArray(v) || v.length > 64 || !v.every(isTypeName))
        throw new CapacityError(`${field}.gpu_types`, "must be a list of non-empty strings");
      out.gpu_types = normaliseTypes(v);
      continue;
    }
    if (typeof v !== "number" || !Number.isFinite(v) || v > MAX_INT)
      throw new CapacityError(`${field}.${k}`, "must be a non-negative integer no larger than 2^53-1");
    if (v < 0) throw new CapacityError(`${field}.${k}`, "must be non-negative");
    out[k as ResourceField] = Math.trunc(v);
  }
  if (out.gpu_types?.length && !(out.gpu_count! > 0))
    throw new CapacityError(`${field}.gpu_types`, "requires a positive gpu_count");
  return out;
}

/** Where a capacity field came from. "unknown": no inventory value, no registration, no host snapshot. */
export type CapacitySource = "spec" | "registration" | "host" | "unknown";

export type EffectiveCapacity = {
  capacity: Vector;
  sources: Record<ResourceField | "gpu_types", CapacitySource>;
  /** Fields whose value is a placeholder: a shortfall there may go away once the Runner registers. */
  unknown: ResourceField[];
};

/** Decided once per Worker object: a stored object never changes, a write makes a new one. */
const decided = new WeakMap<Worker, EffectiveCapacity>();

/**
 * What the scheduler may reserve on `worker`, and where each figure came from. The answer is
 * shared by every caller for as long as the object is current, so it is frozen.
 */
export function effectiveCapacity(worker: Worker): EffectiveCapacity {
  let eff = decided.get(worker);
  if (!eff) decided.set(worker, (eff = deepFreeze(decideCapacity(worker))));
  return eff;
}

function deepFreeze(e: EffectiveCapacity): EffectiveCapacity {
  Object.freeze(e.capacity.gpu_types);
  Object.freeze(e.capacity);
  Object.freeze(e.sources);
  Object.freeze(e.unknown);
  return Object.freeze(e);
}

function decideCapacity(worker: Worker): EffectiveCapacity {
  const spec = worker.spec.resource_capacity;
  const reg = worker.status?.registration;
  const host = reg?.host_resources;
  const hasHost = typeof host === "object" && host !== null && !Array.isArray(host);
  const fallback = defaultCapacityFromHost(hasHost ? host : undefined);
  const capacity = zero();
  const sources = {} as EffectiveCapacity["sources"];
  for (const f of RESOURCE_FIELDS) {
    if (num(spec?.[f]) !== undefined) [capacity[f], sources[f]] = [wholeUnits(spec![f]), "spec"];
    else if (num(reg?.resource_capacity?.[f]) !== undefined)
      [capacity[f], sources[f]] = [wholeUnits(reg!.resource_capacity![f]), "registration"];
    else [capacity[f], sources[f]] = [fallback[f], hasHost ? "host" : "unknown"];
  }
  if (Array.isArray(spec?.gpu_types))
    [capacity.gpu_types, sources.gpu_types] = [normaliseTypes(spec.gpu_types), "spec"];
  else if (Array.isArray(reg?.resource_capacity?.gpu_types))
    [capacity.gpu_types, sources.gpu_types] = [normaliseTypes(reg.resource_capacity.gpu_types), "registration"];
  else sources.gpu_types = hasHost ? "host" : "unknown";
  return { capacity, sources, unknown: RESOURCE_FIELDS.filter((f) => sources[f] === "unknown") };
}
