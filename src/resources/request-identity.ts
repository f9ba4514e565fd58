// When are two task requests the same? v1 treats a resend of the same task as idempotent,
// and its normalised form spells some things differently from the Task Loom makes of the
// same manifest: it writes every resource as a number (zeros included), Loom only the
// requested ones; Loom writes empty `phases`, `commands` and `retry_policy`, v1 leaves them
// out; and key order differs. Neither changes what the task asks for, so neither counts.
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

/** Keys sorted, empty maps and lists dropped, every execution_profile read as a request. */
function canonical(v: unknown, key?: string): unknown {
  if (key === "execution_profile") v = profileRequest(v);
  if (Array.isArray(v)) return v.map((x) => canonical(x));
  if (!isPlainObject(v)) return v;
  const out: Obj = {};
  for (const k of Object.keys(v).sort()) {
    const c = canonical(v[k], k);
    if (c === undefined || (Array.isArray(c) && c.length === 0) || (isPlainObject(c) && Object.keys(c).length === 0)) continue;
    out[k] = c;
  }
  return out;
}

/** True when two Task specs ask for the same work, however each was spelled. */
export function sameTaskRequest(a: unknown, b: unknown): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}
