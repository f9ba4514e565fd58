// The input limits every door shares, in one table. The CRD schemas state per-field rules;
// what they leave open (a string with no maxLength, an integer with no maximum, an array with
// no maxItems) gets the defaults below when the schemas are compiled, and the parts a schema
// passes through unchecked (payload, host snapshot, error details) are walked with the same
// bounds. The walk recurses only below a depth it has checked, so hostile nesting cannot
// exhaust the stack.
import type { FieldError } from "./field-error.ts";

export const LIMITS = {
  /** Deepest JSON/YAML nesting accepted anywhere (objects and arrays). */
  depth: 64,
  /** A schema string with no maxLength of its own. */
  stringLength: 4096,
  /** A string inside a pass-through part (a command, a log excerpt in an error). */
  freeStringLength: 256 * 1024,
  /** A schema array with no maxItems of its own. */
  arrayItems: 1000,
  /** An array or object inside a pass-through part. */
  freeItems: 10_000,
  /** Lease length a Runner may ask for: a week. */
  leaseSeconds: 7 * 24 * 3600,
} as const;

/** Timers longer than this overflow in Node and fire at once (about 24.8 days). */
export const MAX_TIMER_MS = 2 ** 31 - 1;

/** Integers must survive a round trip through JSON and every number type on the way. */
export const MAX_INT = Number.MAX_SAFE_INTEGER;

/** Single-line text: no C0 control characters and no DEL (ids, labels, hosts, capabilities). */
export const NO_CONTROL = "^[^\\u0000-\\u001F\\u007F]*$";
// eslint-disable-next-line no-control-regex
export const HAS_CONTROL = /[\u0000-\u001F\u007F]/;

/**
 * Whether JSON text nests deeper than `max`. A linear scan of the bytes (UTF-8 never puts
 * a byte below 0x80 inside a multi-byte character), run before JSON.parse so that nothing
 * downstream ever meets a deep value.
 */
export function jsonTooDeep(buf: Uint8Array, max: number = LIMITS.depth): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < buf.length; i++) {
    const c = buf[i];
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return true;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return false;
}

const join = (at: string, key: string | number) =>
  typeof key === "number" ? `${at}[${key}]` : at ? `${at}.${key}` : key;

/**
 * Bounds for any value, schema or not: depth, string length, no NUL, finite numbers, item
 * counts. Stops after a few errors (one bad field is enough to refuse).
 *
 * `prev` is a value already within these bounds that `value` replaces (a stored status): a
 * part of `value` that is the very same object, or the same string or number, at the same
 * place in `prev` is not walked again. Stored objects are never changed in place, so that
 * part is what was checked.
 */
export function boundErrors(
  value: unknown,
  at = "",
  opts: { depth?: number; stringLength?: number; items?: number } = {},
  prev?: unknown,
): FieldError[] {
  const walk = new BoundWalk(
    at,
    opts.depth ?? LIMITS.depth,
    opts.stringLength ?? LIMITS.freeStringLength,
    opts.items ?? LIMITS.freeItems,
  );
  walk.visit(value, prev, 0);
  return walk.errs;
}

/**
 * The walk behind boundErrors. It recurses, but only below a depth it has checked first, so
 * a hostile nesting ends at `maxDepth` frames; it allocates nothing per value (the path is a
 * stack of keys, spelled out only for an error), as most walks find nothing.
 */
class BoundWalk {
  readonly errs: FieldError[] = [];
  private readonly keys: (string | number)[] = [];

  constructor(
    private readonly at: string,
    private readonly maxDepth: number,
    private readonly maxString: number,
    private readonly maxItems: number,
  ) {}

  /** `was`: what stood at this place in `prev`. */
  visit(v: unknown, was: unknown, depth: number): void {
    // The same value at the same place was within bounds: a string is not scanned again either.
    if (this.errs.length >= 5 || v === was) return;
    if (typeof v === "string") {
      if (v.length > this.maxString) this.error(`must be at most ${this.maxString} characters`);
      else if (v.includes("\0")) this.error("must not contain NUL characters");
      return;
    }
    if (typeof v === "number") {
      if (!Number.isFinite(v)) this.error("must be a finite number");
      return;
    }
    if (v === null || typeof v !== "object") return;
    if (depth >= this.maxDepth) return this.error(`nests deeper than ${this.maxDepth} levels`);
    const w = was !== null && typeof was === "object" ? (was as Record<string | number, unknown>) : undefined;
    if (Array.isArray(v)) {
      if (v.length > this.maxItems) return this.error(`must have at most ${this.maxItems} items`);
      for (let i = 0; i < v.length && this.errs.length < 5; i++) {
        this.keys.push(i);
        this.visit(v[i], w?.[i], depth + 1);
        this.keys.pop();
      }
      return;
    }
    let count = 0;
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue;
      if (++count > this.maxItems) return this.error(`must have at most ${this.maxItems} keys`);
      if (k.length > LIMITS.stringLength || k.includes("\0")) {
        this.error("has a key that is too long or contains NUL");
        continue;
      }
      this.keys.push(k);
      this.visit((v as Record<string, unknown>)[k], w?.[k], depth + 1);
      this.keys.pop();
      if (this.errs.length >= 5) return;
    }
  }

  private error(message: string): void {
    const field = this.keys.reduce<string>((path, k) => join(path, k), this.at);
    this.errs.push({ field, message, reason: "FieldValueInvalid" });
  }
}

type Schema = Record<string, any>;

/**
 * An IntOrString field as one schema with two types: each branch's rules apply only to its
 * own type (minimum to the integer, pattern to the string), and a value of neither type gets
 * one error, "must be an integer or a string", rather than one per branch.
 */
function intOrString(s: Schema): Schema {
  const { anyOf, ...rest } = s;
  const branches = (anyOf as Schema[]).map(withDefaultLimits);
  return Object.assign({}, ...branches, rest, { type: branches.map((b) => b.type) });
}

/**
 * A schema with the default limits filled in where it states none: safe integers, bounded
 * strings without control characters, bounded arrays. Explicit rules in the CRD win.
 */
export function withDefaultLimits(s: Schema): Schema {
  if (s["x-kubernetes-int-or-string"] && Array.isArray(s.anyOf)) return intOrString(s);
  const out: Schema = { ...s };
  if (s.type === "integer") {
    out.minimum ??= -MAX_INT;
    out.maximum ??= MAX_INT;
  }
  if (s.type === "string" && !s.enum) {
    out.maxLength ??= LIMITS.stringLength;
    if (!s.format) out.pattern ??= NO_CONTROL;
  }
  if (s.type === "array") out.maxItems ??= LIMITS.arrayItems;
  if (s.properties)
    out.properties = Object.fromEntries(
      Object.entries(s.properties as Record<string, Schema>).map(([k, v]) => [k, withDefaultLimits(v)]),
    );
  if (s.items) out.items = withDefaultLimits(s.items);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    out.additionalProperties = withDefaultLimits(s.additionalProperties);
  return out;
}
