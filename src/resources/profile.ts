// Execution profiles (RESOURCE_ADMISSION "Task Execution Profile"): a profile may be given
// in several layers; later layers override placement, and resource fields merge by name.
import type { TaskSpecExecutionProfile } from "./types.gen.ts";
import { RESOURCE_FIELDS, type ResourceSpec } from "./types.ts";
import { type ItemFieldError, fieldError, isPlainObject } from "./input-errors.ts";

export type Placement = "shared" | "exclusive";
export type ExecutionProfile = TaskSpecExecutionProfile & { placement: Placement; resources: ResourceSpec };

/** What an omitted profile means: shared, with zero resource requirements. */
export function emptyProfile(): ExecutionProfile {
  return { placement: "shared", resources: {} };
}

/**
 * Merge profile layers, earliest first. Non-object layers are skipped (profileShapeErrors
 * reports them). Unknown keys are carried through so that schema validation names them
 * rather than the merge dropping them.
 */
export function mergeProfiles(...layers: unknown[]): ExecutionProfile {
  const out: Record<string, unknown> = { placement: "shared" };
  const resources: Record<string, unknown> = {};
  for (const layer of layers) {
    if (!isPlainObject(layer)) continue;
    for (const [k, v] of Object.entries(layer)) {
      if (k === "resources") {
        if (isPlainObject(v)) Object.assign(resources, v);
      } else if (v !== undefined) out[k] = v;
    }
  }
  out.resources = normaliseGpuTypes(resources);
  // The layers are unchecked input; every caller checks the profile within its Task's schema.
  return out as unknown as ExecutionProfile;
}

/** gpu_types is a set: sorted and de-duplicated (RUNNER_PROTOCOL §4). Left alone when malformed, so errors point at the given index. */
export function normaliseGpuTypes<T extends Record<string, unknown>>(r: T): T {
  const t = r.gpu_types;
  if (Array.isArray(t) && t.every((x) => typeof x === "string" && x !== "")) {
    return { ...r, gpu_types: [...new Set(t as string[])].sort() };
  }
  return r;
}

/** Shape problems a merge would otherwise hide: a layer or its resources that is not an object. */
export function profileShapeErrors(layer: unknown, field: string): ItemFieldError[] {
  if (layer === undefined) return [];
  if (!isPlainObject(layer)) return [fieldError(field, "must be an object", "FieldValueTypeInvalid")];
  if (layer.resources !== undefined && !isPlainObject(layer.resources))
    return [fieldError(`${field}.resources`, "must be an object", "FieldValueTypeInvalid")];
  return [];
}

/** A resource number that was not whole, and what it became. */
export type Truncation = { field: string; from: number; to: number };

/**
 * v1 truncates a fractional resource request (`int(250.9)` is 250, RUNNER_PROTOCOL §4), as
 * Loom does with a registered capacity. Only finite, non-negative numbers are touched;
 * anything else is left for the schema to name.
 */
export function truncateResources(
  profile: ExecutionProfile,
  field: string,
): { profile: ExecutionProfile; truncated: Truncation[] } {
  const truncated: Truncation[] = [];
  const resources: Record<string, unknown> = { ...profile.resources };
  for (const k of RESOURCE_FIELDS) {
    const v = resources[k];
    if (typeof v === "number" && Number.isFinite(v) && v >= 0 && !Number.isInteger(v)) {
      resources[k] = Math.trunc(v);
      truncated.push({ field: `${field}.resources.${k}`, from: v, to: Math.trunc(v) });
    }
  }
  return truncated.length ? { profile: { ...profile, resources: resources }, truncated } : { profile, truncated };
}
