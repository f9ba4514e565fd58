// JSON merge patch (RFC 7386), the PATCH format of the resource API: objects merge key by
// key, `null` removes a key, anything else (arrays included) replaces the target value.

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** A new value; `target` is not modified (subtrees the patch does not touch are shared). */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    // defineProperty: a "__proto__" key from JSON is data, never a prototype change.
    else
      Object.defineProperty(out, k, {
        value: mergePatch(out[k], v),
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return out;
}
