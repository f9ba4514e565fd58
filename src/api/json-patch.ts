// JSON Patch (RFC 6902), the other PATCH format of the resource API (`kubectl patch
// --type=json`): a list of add / remove / replace / move / copy / test operations on JSON
// Pointer paths (RFC 6901). The whole list applies, or an error names the failing operation
// and nothing changes.

export class JsonPatchError extends Error {
  constructor(
    readonly index: number,
    readonly path: string,
    message: string,
    readonly testFailed = false,
  ) {
    super(`operation ${index} (${path || "/"}): ${message}`);
    this.name = "JsonPatchError";
  }
}

type Op = { op: string; path: string; value?: unknown; from?: string };
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
const OPS = ["add", "remove", "replace", "move", "copy", "test"];

/** "/a/b~1c" -> ["a", "b/c"]; "" is the whole document. */
export function parsePointer(pointer: string): string[] {
  if (pointer === "") return [];
  if (!pointer.startsWith("/")) throw new Error(`a JSON Pointer starts with "/": ${JSON.stringify(pointer)}`);
  return pointer
    .slice(1)
    .split("/")
    .map((t) => t.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function arrayIndex(arr: unknown[], token: string, forAdd: boolean): number {
  if (forAdd && token === "-") return arr.length;
  if (!/^(0|[1-9]\d*)$/.test(token)) throw new Error(`"${token}" is not an array index`);
  const i = Number(token);
  if (i > arr.length || (!forAdd && i === arr.length))
    throw new Error(`index ${i} is out of range (length ${arr.length})`);
  return i;
}

function get(doc: unknown, tokens: string[]): unknown {
  let cur = doc;
  for (const t of tokens) {
    if (Array.isArray(cur)) cur = cur[arrayIndex(cur, t, false)];
    else if (isObject(cur) && Object.hasOwn(cur, t)) cur = cur[t];
    else throw new Error("no value at this path");
  }
  return cur;
}

/** The container holding the last token, and that token. */
function parentOf(doc: unknown, tokens: string[]): [Record<string, unknown> | unknown[], string] {
  const parent = get(doc, tokens.slice(0, -1));
  if (!isObject(parent) && !Array.isArray(parent)) throw new Error("the parent of this path is not an object or array");
  return [parent, tokens[tokens.length - 1]];
}

function add(doc: unknown, tokens: string[], value: unknown): unknown {
  if (!tokens.length) return value;
  const [parent, key] = parentOf(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, true), 0, value);
  else Object.defineProperty(parent, key, { value, enumerable: true, writable: true, configurable: true });
  return doc;
}

function remove(doc: unknown, tokens: string[]): unknown {
  if (!tokens.length) throw new Error("cannot remove the whole document");
  const [parent, key] = parentOf(doc, tokens);
  if (Array.isArray(parent)) parent.splice(arrayIndex(parent, key, false), 1);
  else if (Object.hasOwn(parent, key)) delete parent[key];
  else throw new Error("no value at this path");
  return doc;
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
}

/** Check the shape of a patch document: a list of operations, each with its required members. */
function operations(patch: unknown): Op[] {
  if (!Array.isArray(patch)) throw new JsonPatchError(0, "", "a JSON patch is an array of operations");
  return patch.map((raw, i) => {
    if (!isObject(raw)) throw new JsonPatchError(i, "", "each operation is an object");
    const { op, path, from } = raw;
    if (typeof op !== "string" || !OPS.includes(op))
      throw new JsonPatchError(i, String(path ?? ""), `"op" must be one of ${OPS.join(", ")}`);
    if (typeof path !== "string") throw new JsonPatchError(i, "", `"path" must be a string`);
    if ((op === "move" || op === "copy") && typeof from !== "string")
      throw new JsonPatchError(i, path, `"${op}" needs "from"`);
    if ((op === "add" || op === "replace" || op === "test") && !("value" in raw))
      throw new JsonPatchError(i, path, `"${op}" needs "value"`);
    return raw as Op;
  });
}

/** A new document; `target` is not modified. */
export function applyJsonPatch(target: unknown, patch: unknown): unknown {
  let doc = structuredClone(target);
  operations(patch).forEach((o, i) => {
    try {
      const tokens = parsePointer(o.path);
      switch (o.op) {
        case "add":
          doc = add(doc, tokens, structuredClone(o.value));
          break;
        case "remove":
          doc = remove(doc, tokens);
          break;
        case "replace":
          get(doc, tokens);
          doc = add(tokens.length ? remove(doc, tokens) : doc, tokens, structuredClone(o.value));
          break;
        case "copy":
          doc = add(doc, tokens, structuredClone(get(doc, parsePointer(o.from!))));
          break;
        case "move": {
          const from = parsePointer(o.from!);
          if (tokens.length > from.length && from.every((t, k) => tokens[k] === t))
            throw new Error("cannot move a value into itself");
          const value = get(doc, from);
          doc = add(remove(doc, from), tokens, value);
          break;
        }
        case "test":
          if (!deepEqual(get(doc, tokens), o.value))
            throw new JsonPatchError(i, o.path, `test failed: the value is not ${JSON.stringify(o.value)}`, true);
      }
    } catch (e) {
      if (e instanceof JsonPatchError) throw e;
      throw new JsonPatchError(i, o.path, (e as Error).message);
    }
  });
  return doc;
}
