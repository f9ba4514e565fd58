// When are two task requests the same? v1 treats a resend of the same task as idempotent,
// and its normalised form spells some things differently from the Task Loom makes of the
// same manifest: it writes every resource as a number (zeros included), Loom only the
// requested ones; Loom writes empty `phases`, `commands` and `retry_policy`, v1 leaves them
// out; v1 repeats each phase's name and place in it, and both derive a source descriptor
// from the source; and key order differs. None of it changes what the task asks for.
import { RESOURCE_FIELDS } from "./types.ts";
import { isPlainObject } from "./input-errors.ts";

type Obj = Record<string, unknown>;

/** A profile as a request: placement, and only the resources asked for (not zero, not empty). */
function profileRequest(p: unknown): unknown {
  if (!isPlainObject(p)) return p;
  const out: Obj = { ...p, placement: p.placement ?? "shared" };
  if (isPlainObject(p.resources)) {
    const r: Obj = { ...p.resources };
    for (const k of RESOURCE_FIELDS) if (r[k] === 0) delete r[k];
    out.resources = r;
  }
  return out;
}

/** v1 writes each phase's name again as `phase`, and its place (from 1) as `phase_index`. */
function phaseRequest(p: unknown, i: number): unknown {
  if (!isPlainObject(p)) return p;
  const { phase, phase_index, ...rest } = p;
  return { ...rest, ...(phase !== p.name ? { phase } : {}), ...(phase_index !== i + 1 ? { phase_index } : {}) };
}

/** Keys sorted, empty maps and lists dropped, every execution_profile read as a request. */
function canonical(v: unknown, key?: string): unknown {
  if (key === "execution_profile") v = profileRequest(v);
  if ((key === "phases" || key === "commands") && Array.isArray(v)) v = v.map(phaseRequest);
  if (Array.isArray(v)) return v.map((x) => canonical(x));
  if (!isPlainObject(v)) return v;
  const out: Obj = {};
  for (const k of Object.keys(v).sort()) {
    // Derived from `source` by each side in its own way: the source itself is compared.
    if (k === "source_descriptor" && v.source !== undefined) continue;
    const c = canonical(v[k], k);
    if (c === undefined || (Array.isArray(c) && c.length === 0) || (isPlainObject(c) && Object.keys(c).length === 0))
      continue;
    out[k] = c;
  }
  return out;
}

/** True when two Task specs ask for the same work, however each was spelled. */
export function sameTaskRequest(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}
