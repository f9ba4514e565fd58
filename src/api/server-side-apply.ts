// Server-side apply (PATCH with application/apply-patch+yaml, `kubectl apply --server-side`).
// A field manager's applied configuration merges into the object, and
// `metadata.managedFields` records, per manager, the fields it set (in the fieldsV1 format).
// A field another manager owns with a different value is a 409 Conflict unless forced, and
// forcing takes the field over. A field this manager applied before and leaves out now is
// removed, unless another manager still owns it. Lists are atomic: a manager owns a whole
// list, as a CRD list without x-kubernetes-list-type.
//
// Only what people declare is owned: spec (every top-level key but apiVersion, kind,
// metadata and status) and metadata's labels, annotations and ownerReferences. Status is
// Loom's to write, so an apply's status is ignored, and entries recorded for a subresource
// are kept as they are.
import { parse as parseYaml } from "yaml";
import { boundErrors, jsonTooDeep } from "../resources/limits.ts";
import type { ManagedFieldsEntry } from "../resources/meta.ts";
import { jsonEqual } from "../resources/json.ts";
import { badRequest, StatusError } from "./status.ts";

type Body = Record<string, unknown>;
type Path = readonly string[];
/** A set of field paths, keyed by their JSON text. */
type FieldSet = Map<string, Path>;

export type ApplyOptions = { manager: string; force: boolean; apiVersion: string; now: string };

const isObject = (v: unknown): v is Body =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
const keyOf = (p: Path) => JSON.stringify(p);
const OWNED_METADATA = ["labels", "annotations", "ownerReferences"];
const NOT_SPEC = new Set(["apiVersion", "kind", "metadata", "status"]);

/** The longest fieldManager accepted, as in Kubernetes. */
const MAX_MANAGER_LENGTH = 128;

/** The request body as an apply configuration: one YAML (or JSON) document holding an object. */
export function parseApplyBody(body: unknown): Body {
  if (!Buffer.isBuffer(body))
    throw badRequest("an apply configuration is a YAML or JSON document (Content-Type application/apply-patch+yaml)");
  // Flow-style nesting is refused before parsing; block-style nesting is bounded right after.
  if (jsonTooDeep(body)) throw badRequest("the apply configuration nests too deeply", "body");
  let v: unknown;
  try {
    v = parseYaml(body.toString("utf8"), { maxAliasCount: 16 });
  } catch (e) {
    throw badRequest(
      `the apply configuration is not one YAML or JSON document: ${(e as Error).message.split("\n")[0]}`,
      "body",
    );
  }
  const bounds = boundErrors(v);
  if (bounds.length)
    throw new StatusError(
      "Invalid",
      422,
      `the apply configuration is invalid: ${bounds[0].field}: ${bounds[0].message}`,
      bounds.map((b) => ({ reason: b.reason, message: b.message, field: b.field })),
    );
  if (!isObject(v))
    throw badRequest("the apply configuration must be an object with apiVersion, kind and metadata.name");
  return v;
}

/** The fieldManager an apply names; kubectl always sends one. */
export function managerParam(v: string | undefined): string {
  if (v === undefined || v === "")
    throw badRequest(
      "fieldManager is required for apply (kubectl apply --server-side sends it; --field-manager names it)",
      "fieldManager",
    );
  // eslint-disable-next-line no-control-regex
  if (v.length > MAX_MANAGER_LENGTH || /[\u0000-\u001F\u007F]/.test(v))
    throw badRequest(
      `fieldManager must be at most ${MAX_MANAGER_LENGTH} characters without control characters`,
      "fieldManager",
    );
  return v;
}

/** A copy without null values: a null in an apply configuration sets nothing. */
function withoutNulls(v: unknown): unknown {
  if (Array.isArray(v)) return v;
  if (!isObject(v)) return v;
  const out: Body = {};
  for (const [k, c] of Object.entries(v)) if (c !== null) define(out, k, withoutNulls(c));
  return out;
}

/** The part of an object a manager can own. */
function ownedPart(o: Body): Body {
  const out: Body = {};
  for (const [k, v] of Object.entries(o)) if (!NOT_SPEC.has(k) && v !== null) define(out, k, withoutNulls(v));
  const m = isObject(o.metadata) ? o.metadata : {};
  const meta: Body = {};
  for (const k of OWNED_METADATA) if (m[k] !== undefined && m[k] !== null) meta[k] = withoutNulls(m[k]);
  if (Object.keys(meta).length) out.metadata = meta;
  return out;
}

/** Every leaf a configuration sets (a scalar, a list, an empty object), as paths. */
function leaves(v: Body): FieldSet {
  const out: FieldSet = new Map();
  const walk = (x: unknown, at: string[]) => {
    if (isObject(x) && Object.keys(x).length) for (const [k, c] of Object.entries(x)) walk(c, [...at, k]);
    else out.set(keyOf(at), at);
  };
  for (const [k, c] of Object.entries(v)) walk(c, [k]);
  return out;
}

/** fieldsV1: `{"f:spec": {"f:host": {}}}`; a "." member marks a map owned as well as some of its fields. */
export function encodeFields(set: FieldSet): Body {
  const root: Body = {};
  for (const p of set.values()) {
    let n = root;
    for (const k of p) {
      const f = `f:${k}`;
      if (!isObject(n[f])) define(n, f, {});
      n = n[f] as Body;
    }
  }
  // A path that is also the parent of another keeps its own mark.
  for (const p of set.values()) {
    const n = getAt(
      root,
      p.map((k) => `f:${k}`),
    );
    if (isObject(n) && Object.keys(n).length && !n["."]) n["."] = {};
  }
  return root;
}

/** The paths a fieldsV1 value names; a member in another notation (k:, v:, i:) is read as its whole list. */
export function decodeFields(v: unknown): FieldSet {
  const out: FieldSet = new Map();
  const walk = (n: unknown, at: string[]) => {
    const keys = isObject(n) ? Object.keys(n) : [];
    if (at.length && (keys.length === 0 || keys.includes(".") || keys.some((k) => !k.startsWith("f:") && k !== ".")))
      out.set(keyOf(at), at);
    if (keys.some((k) => !k.startsWith("f:") && k !== ".")) return;
    for (const k of keys) if (k.startsWith("f:")) walk((n as Body)[k], [...at, k.slice(2)]);
  };
  walk(v, []);
  return out;
}

function define(o: Body, k: string, v: unknown): void {
  // A "__proto__" key from a document is data, never a prototype change.
  Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
}

function getAt(o: unknown, p: Path): unknown {
  let cur = o;
  for (const k of p) {
    if (!isObject(cur) || !Object.hasOwn(cur, k)) return undefined;
    cur = cur[k];
  }
  return cur;
}

/** Removes the value at `p`, then any object this left empty, down to the top-level key (spec, metadata). */
function removeAt(o: Body, p: Path): void {
  const parents: Body[] = [o];
  for (const k of p.slice(0, -1)) {
    const next = parents.at(-1)![k];
    if (!isObject(next)) return;
    parents.push(next);
  }
  delete parents.at(-1)![p.at(-1)!];
  for (let i = parents.length - 1; i >= 2; i--) {
    if (Object.keys(parents[i]).length) break;
    delete parents[i - 1][p[i - 1]];
  }
}

/** Objects merge key by key; anything else (lists included) replaces. `target` is changed in place. */
function mergeInto(target: Body, v: Body): void {
  for (const [k, c] of Object.entries(v)) {
    const t = target[k];
    if (isObject(t) && isObject(c)) mergeInto(t, c);
    else define(target, k, structuredClone(c));
  }
}

/** Whether `a` is `b` or lies under it. */
const under = (a: Path, b: Path) => b.length <= a.length && b.every((k, i) => a[i] === k);
/** Whether one path is the other or lies under it. */
const overlaps = (a: Path, b: Path) => under(a, b) || under(b, a);

function readEntries(v: unknown): ManagedFieldsEntry[] {
  if (!Array.isArray(v)) return [];
  return v.filter(
    (e): e is ManagedFieldsEntry => isObject(e) && typeof e.manager === "string" && typeof e.operation === "string",
  );
}

const fieldName = (p: Path) => p.join(".");

/**
 * The object after `manager` applies `applied` to `cur` (undefined when it does not exist yet):
 * metadata, status and the rest of `cur` kept, the owned part merged, fields this manager
 * dropped removed, and managedFields updated. Throws a 409 Conflict naming each field another
 * manager owns with a different value, unless `force`.
 */
export function applyConfiguration(cur: Body | undefined, applied: Body, o: ApplyOptions): Body {
  const appliedMeta = isObject(applied.metadata) ? applied.metadata : {};
  if (
    Array.isArray(appliedMeta.managedFields) ? appliedMeta.managedFields.length > 0 : appliedMeta.managedFields != null
  )
    throw badRequest(
      "metadata.managedFields must be empty or absent in an apply configuration: the Hub records it",
      "metadata.managedFields",
    );
  const config = ownedPart(applied);
  const mine = leaves(config);
  const base: Body = cur
    ? structuredClone(cur)
    : { apiVersion: applied.apiVersion, kind: applied.kind, metadata: { name: appliedMeta.name } };
  const meta = isObject(base.metadata) ? base.metadata : (base.metadata = {});

  const entries = readEntries(meta.managedFields);
  const isMine = (e: ManagedFieldsEntry) => e.manager === o.manager && e.operation === "Apply" && !e.subresource;
  const previous = entries.find(isMine);
  const before = previous ? decodeFields(previous.fieldsV1) : new Map<string, Path>();
  const others = entries
    .filter((e) => !isMine(e))
    .map((e) => ({ entry: e, fields: e.subresource ? undefined : decodeFields(e.fieldsV1) }));

  // Conflicts: a field of another manager that this apply sets to a different value.
  const conflicts: { manager: string; field: Path }[] = [];
  for (const other of others) {
    if (!other.fields) continue;
    for (const [k, theirs] of [...other.fields]) {
      for (const p of mine.values()) {
        if (!overlaps(p, theirs)) continue;
        const at = p.length <= theirs.length ? p : theirs;
        if (jsonEqual(getAt(base, at), getAt(config, at))) continue;
        if (o.force) other.fields.delete(k);
        else conflicts.push({ manager: other.entry.manager, field: theirs });
        break;
      }
    }
  }
  if (conflicts.length) {
    const list = conflicts.map((c) => `${fieldName(c.field)} is owned by "${c.manager}" with another value`).join("; ");
    throw new StatusError(
      "Conflict",
      409,
      `Apply failed with ${conflicts.length} conflict${conflicts.length === 1 ? "" : "s"}: ${list} (force=true takes ${conflicts.length === 1 ? "it" : "them"} over)`,
      conflicts.map((c) => ({
        reason: "FieldManagerConflict",
        message: `conflict with "${c.manager}" using ${o.apiVersion}`,
        field: fieldName(c.field),
      })),
    );
  }

  // Fields this manager set before and leaves out now go, unless someone still holds them.
  for (const p of before.values()) {
    if ([...mine.values()].some((q) => under(q, p))) continue;
    if (others.some((x) => x.fields && [...x.fields.values()].some((q) => under(q, p)))) continue;
    removeAt(base, p);
  }
  mergeInto(base, config);

  const unchanged =
    previous && previous.apiVersion === o.apiVersion && jsonEqual([...before.keys()].sort(), [...mine.keys()].sort());
  const own: ManagedFieldsEntry | undefined =
    mine.size === 0
      ? undefined
      : {
          manager: o.manager,
          operation: "Apply",
          apiVersion: o.apiVersion,
          time: unchanged ? previous.time : o.now,
          fieldsType: "FieldsV1",
          fieldsV1: encodeFields(mine),
        };
  // Entries keep their order (a new manager goes last), so an apply that changes nothing rewrites nothing.
  const managed: ManagedFieldsEntry[] = [];
  for (const e of entries) {
    const other = others.find((x) => x.entry === e);
    if (!other) {
      if (own) managed.push(own);
    } else if (!other.fields) managed.push(e);
    else if (other.fields.size) managed.push({ ...e, fieldsV1: encodeFields(other.fields) });
  }
  if (own && !previous) managed.push(own);
  if (managed.length) meta.managedFields = managed;
  else delete meta.managedFields;
  return base;
}
