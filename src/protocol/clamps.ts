// The numbers a v1 client sends with a claim, a push or a task listing, moved into range as
// v1 does (RUNNER_PROTOCOL 1a/1b) rather than refused. A v1 Runner started with
// --claim-wait-seconds 90 must still run; what was clamped is said in the X-Loom-Clamped
// header, so nothing is changed silently.
import { LIMITS } from "../resources/limits.ts";
import { HubError } from "./errors.ts";

export const CLAMPED_HEADER = "x-loom-clamped";

/** One value moved into range: the field, what was asked, what is used. */
export type Clamp = { field: string; asked: number; used: number };

/** `zeroIsDefault`: v1 wrote `int(x or default)` there, so a 0 means the default. */
type Range = { min: number; max: number; dflt: number; integer: boolean; zeroIsDefault: boolean };

/**
 * v1's rules: integers are truncated (`int(x)`), a missing value means the default, then the
 * result is clamped to [min, max]. Anything that is not a number is still a 400 naming the
 * field: v1 answered that with a 500.
 */
function clamp(v: unknown, field: string, r: Range, clamps: Clamp[]): number {
  if (v === undefined || v === null) return r.dflt;
  const n = typeof v === "string" && v.trim() !== "" ? Number(v) : v;
  if (typeof n !== "number" || !Number.isFinite(n))
    throw new HubError(400, `invalid_${field}`, {
      field,
      detail: `must be a number (${r.min} to ${r.max}; others are clamped)`,
      received: v,
    });
  const base = (r.integer ? Math.trunc(n) : n) || (r.zeroIsDefault ? r.dflt : 0);
  const used = Math.min(r.max, Math.max(r.min, base));
  if (used !== n) clamps.push({ field, asked: n, used });
  return used;
}

// v1's claim: limit in 1..1024 (default 1); wait_seconds in 0..60.
const LIMIT: Range = { min: 1, max: 1024, dflt: 1, integer: true, zeroIsDefault: true };
const WAIT: Range = { min: 0, max: 60, dflt: 0, integer: false, zeroIsDefault: true };
// v1's /api/tasks: limit in 1..500 (default 100), offset at least 0.
const LIST_LIMIT: Range = { min: 1, max: 500, dflt: 100, integer: true, zeroIsDefault: false };
const OFFSET: Range = { min: 0, max: Number.MAX_SAFE_INTEGER, dflt: 0, integer: true, zeroIsDefault: false };

const MIN_LEASE_SECONDS = 30;

/** The rule every lease call shares: at least 30 whole seconds, at most a week, 600 by default. */
export const leaseSecondsOf = (v: unknown, dflt = 600) => {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v))
    throw new HubError(400, "invalid_lease_seconds", { field: "lease_seconds", detail: "must be a number of seconds" });
  if (v > LIMITS.leaseSeconds)
    throw new HubError(400, "invalid_lease_seconds", {
      field: "lease_seconds",
      detail: `must be at most ${LIMITS.leaseSeconds} seconds (7 days)`,
    });
  return Math.max(MIN_LEASE_SECONDS, Math.floor(v));
};

/** A number that must lie in [min, max] (not clamped): a 400 `invalid_<field>` otherwise. */
export function numIn(v: unknown, min: number, max: number, dflt: number, field: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max)
    throw new HubError(400, `invalid_${field}`, {
      field,
      detail: `must be a number from ${min} to ${max}`,
      received: v,
    });
  return v;
}

export type ClaimParams = { limit: number; waitMs: number; leaseSeconds: number; clamps: Clamp[] };

export function claimParams(body: { limit?: unknown; wait_seconds?: unknown; lease_seconds?: unknown }): ClaimParams {
  const clamps: Clamp[] = [];
  const limit = clamp(body.limit, "limit", LIMIT, clamps);
  const wait = clamp(body.wait_seconds, "wait_seconds", WAIT, clamps);
  const leaseSeconds = leaseSecondsOf(body.lease_seconds);
  if (typeof body.lease_seconds === "number" && body.lease_seconds !== leaseSeconds)
    clamps.push({ field: "lease_seconds", asked: body.lease_seconds, used: leaseSeconds });
  return { limit, waitMs: wait * 1000, leaseSeconds, clamps };
}

export function listParams(q: Record<string, string | undefined>): { limit: number; offset: number; clamps: Clamp[] } {
  const clamps: Clamp[] = [];
  // `?limit=` (empty) is v1's default too.
  const limit = clamp(q.limit || undefined, "limit", LIST_LIMIT, clamps);
  const offset = clamp(q.offset || undefined, "offset", OFFSET, clamps);
  return { limit, offset, clamps };
}

/** `limit=1024 (asked 2000), wait_seconds=60 (asked 100)`, or undefined when nothing moved. */
export function clampNotice(clamps: Clamp[]): string | undefined {
  return clamps.length ? clamps.map((c) => `${c.field}=${c.used} (asked ${c.asked})`).join(", ") : undefined;
}

/** The clamps a claim body asks for, for the reply header; a body the claim refuses has none. */
export function claimClamps(body: { limit?: unknown; wait_seconds?: unknown; lease_seconds?: unknown }): Clamp[] {
  try {
    return claimParams(body).clamps;
  } catch {
    return [];
  }
}
