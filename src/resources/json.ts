// JSON values: which are objects, what "unchanged" means for a spec, labels or a status, and a copy.

/** A JSON object: an object that is neither null nor an array. */
export const isJsonObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

/** Deep equality of JSON values; key order does not matter, array order does. */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) {
    const bb = b as unknown[];
    return a.length === bb.length && a.every((v, i) => jsonEqual(v, bb[i]));
  }
  const ak = Object.keys(a);
  const bo = b as Record<string, unknown>;
  if (ak.length !== Object.keys(bo).length) return false;
  return ak.every(
    (k) => Object.prototype.hasOwnProperty.call(bo, k) && jsonEqual((a as Record<string, unknown>)[k], bo[k]),
  );
}

/**
 * A deep copy with exactly the meaning of JSON.parse(JSON.stringify(v)), without the text in
 * between: what a write keeps of a caller's object. Object members that are undefined,
 * functions or symbols are left out, and in arrays they become null; numbers that are not
 * finite become null; toJSON() is honoured (a Date becomes its ISO string). A cycle or a
 * BigInt throws a TypeError, as JSON.stringify does. Returns undefined where JSON.stringify would.
 */
export function jsonClone<T>(v: T): T {
  return copyValue(v, "", []) as T;
}

function copyValue(v: unknown, key: string, ancestors: object[]): unknown {
  if (v !== null && typeof v === "object" && typeof (v as { toJSON?: unknown }).toJSON === "function")
    v = (v as { toJSON(k: string): unknown }).toJSON(key);
  switch (typeof v) {
    case "string":
    case "boolean":
      return v;
    case "number":
      return Number.isFinite(v) ? (v === 0 ? 0 : v) : null;
    case "bigint":
      throw new TypeError("Do not know how to serialize a BigInt");
    case "object":
      break;
    default:
      return undefined; // undefined, function, symbol
  }
  if (v === null) return null;
  if (v instanceof Number || v instanceof String || v instanceof Boolean) return copyValue(v.valueOf(), key, ancestors);
  if (ancestors.includes(v)) throw new TypeError("Converting circular structure to JSON");
  ancestors.push(v);
  let out: unknown;
  if (Array.isArray(v)) {
    const a = new Array<unknown>(v.length);
    for (let i = 0; i < v.length; i++) a[i] = copyValue(v[i], String(i), ancestors) ?? null;
    out = a;
  } else {
    const o: Record<string, unknown> = {};
    for (const k of Object.keys(v)) {
      const c = copyValue((v as Record<string, unknown>)[k], k, ancestors);
      if (c === undefined) continue;
      if (k === "__proto__")
        Object.defineProperty(o, k, { value: c, enumerable: true, writable: true, configurable: true });
      else o[k] = c;
    }
    out = o;
  }
  ancestors.pop();
  return out;
}
