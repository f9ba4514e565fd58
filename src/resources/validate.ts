// One validator per kind, compiled with ajv from the CRD schemas. Every door (files,
// the HTTP API, the CLI) validates through here, so they accept and reject the same things.
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { type JSONSchema, loadCrds, API_VERSION } from "./crds.ts";
import { boundErrors, HAS_CONTROL, NO_CONTROL, withDefaultLimits } from "./limits.ts";
import type { FieldError } from "./field-error.ts";
import { isJsonObject } from "./json.ts";

export type { FieldError, FieldReason } from "./field-error.ts";

/**
 * The CEL rules the CRDs use (x-kubernetes-validations), with their meaning in JS.
 * A real API server evaluates the CEL text; Loom evaluates this table. A rule the
 * table does not know fails schema compilation, so no rule is ever skipped silently.
 */
const CEL_RULES: Record<string, (self: any) => boolean> = {
  "!has(self.gpu_types) || size(self.gpu_types) == 0 || (has(self.gpu_count) && self.gpu_count > 0)": (s) =>
    !Array.isArray(s.gpu_types) || s.gpu_types.length === 0 || (typeof s.gpu_count === "number" && s.gpu_count > 0),
  "!has(self.initial_concurrency) || !has(self.max_concurrency) || self.initial_concurrency <= self.max_concurrency": (
    s,
  ) =>
    typeof s.initial_concurrency !== "number" ||
    typeof s.max_concurrency !== "number" ||
    s.initial_concurrency <= s.max_concurrency,
  "!has(self.state) || !(self.state in ['leased', 'running']) || has(self.lease)": (s) =>
    s.state !== "leased" && s.state !== "running" ? true : s.lease !== undefined,
};

/**
 * Kubernetes prunes fields a structural schema does not declare; Loom rejects them
 * instead (like kubectl's strict field validation), so a typo never disappears quietly.
 */
function closeObjects(s: JSONSchema): JSONSchema {
  const out: JSONSchema = { ...s };
  if (s.properties) {
    out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, closeObjects(v)]));
    if (!s["x-kubernetes-preserve-unknown-fields"] && s.additionalProperties === undefined)
      out.additionalProperties = false;
  }
  if (s.items) out.items = closeObjects(s.items);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    out.additionalProperties = closeObjects(s.additionalProperties);
  return out;
}

const K8S_ANNOTATIONS: readonly [string, "boolean" | "string" | "array"][] = [
  ["x-kubernetes-preserve-unknown-fields", "boolean"],
  ["x-kubernetes-int-or-string", "boolean"],
  ["x-kubernetes-list-type", "string"],
  ["x-kubernetes-list-map-keys", "array"],
  // The protocol schemas' note to their type generator (protocol/gen.ts): the TypeScript type of a field checked by hand.
  ["x-ts-type", "string"],
];

function makeAjv(): Ajv {
  const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
  // Structural-schema markers for a Kubernetes API server; Loom reads preserve-unknown-fields in
  // closeObjects and checks int-or-string through the anyOf beside it. Declaring them keeps strict
  // mode, which rejects any other unknown keyword: a misspelt or misplaced key fails compilation.
  for (const [keyword, schemaType] of K8S_ANNOTATIONS) ajv.addKeyword({ keyword, schemaType });
  ajv.addFormat("int64", true);
  ajv.addFormat("int32", true);
  // RFC 3339 as Kubernetes writes it; Date.parse alone would take "1" or "May 5".
  ajv.addFormat("date-time", {
    type: "string",
    validate: (v: string) => RFC3339.test(v) && Number.isFinite(Date.parse(v)),
  });
  ajv.addKeyword({
    keyword: "x-kubernetes-validations",
    type: "object",
    compile(rules: { rule: string; message: string; fieldPath?: string }[]) {
      const checks = rules.map((r) => {
        const fn = CEL_RULES[r.rule];
        if (!fn) throw new Error(`x-kubernetes-validations: rule not supported by Loom: ${r.rule}`);
        return { ...r, fn };
      });
      // Runs on every object with a rule, in every write: nothing is allocated when the rules hold.
      const validate = (data: unknown): boolean => {
        let failed: typeof checks | undefined;
        for (const c of checks) if (!c.fn(data)) (failed ??= []).push(c);
        if (!failed) return true;
        (validate as any).errors = failed.map((c) => ({
          keyword: "x-kubernetes-validations",
          message: c.message,
          params: { fieldPath: c.fieldPath ?? "" },
        }));
        return false;
      };
      return validate;
    },
  });
  return ajv;
}

const RFC3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$/;

const validators = new Map<string, ValidateFunction>();
const ajv = makeAjv();

function validatorFor(kind: string): ValidateFunction | undefined {
  let v = validators.get(kind);
  if (!v) {
    const crd = loadCrds().get(kind);
    if (!crd) return undefined;
    v = ajv.compile(closeObjects(withDefaultLimits(crd.schema)));
    validators.set(kind, v);
  }
  return v;
}

/** Status validators compiled so far (SchemaNode): what a test reads to see that a write compiled nothing. */
let statusCompiles = 0;
export const statusValidatorsCompiled = () => statusCompiles;
function compileStatusPart(schema: JSONSchema): ValidateFunction {
  statusCompiles++;
  const v = ajv.compile(schema);
  // ajv's code is JavaScript V8 compiles on its first call; calling it once here, on nothing,
  // does that now rather than in the first write that reaches it.
  v(undefined);
  v.errors = null;
  return v;
}

/**
 * One node of a kind's status schema, compiled two ways: whole, and as a shell that keeps the
 * rules of the value itself (its type, known fields, required fields, item count, CEL rules)
 * with each field's or item's own schema left open. The shell and every part passing is
 * exactly the whole passing: a part's schema looks at nothing outside the part. So a write
 * that changes one field deep inside is checked by the shells on the way down and by that
 * field's schema, not by the schema of everything around it.
 */
class SchemaNode {
  private whole: ValidateFunction | undefined;
  private shell: ValidateFunction | undefined;
  private readonly parts = new Map<string, SchemaNode>();
  private item: SchemaNode | undefined;
  private readonly byField: boolean;
  private readonly byItem: boolean;

  constructor(private readonly schema: JSONSchema) {
    this.byField = schema.properties !== undefined && Object.keys(schema.properties).length > 0;
    this.byItem = !this.byField && schema.items !== undefined;
  }

  /**
   * Push onto `errs` what is wrong with `value`, found at `path` (keys from the status down;
   * spelt out only for an error). `prev` is the value it replaces, which passed: a part that
   * is the very same value there is not checked again (stored objects are never changed in place).
   */
  check(value: unknown, prev: unknown, path: (string | number)[], errs: FieldError[]): void {
    if (value === prev) return;
    if (this.byField && isJsonObject(value) && isJsonObject(prev)) {
      this.run(this.shellOf(), value, path, errs);
      const props = this.schema.properties!;
      for (const k in value) {
        const v = value[k];
        // An unknown field is the shell's to refuse.
        if (v === prev[k] || !Object.hasOwn(value, k) || !Object.hasOwn(props, k)) continue;
        path.push(k);
        this.partOf(k).check(v, prev[k], path, errs);
        path.pop();
      }
      return;
    }
    if (this.byItem && Array.isArray(value) && Array.isArray(prev)) {
      this.run(this.shellOf(), value, path, errs);
      const item = (this.item ??= new SchemaNode(this.schema.items!));
      for (let i = 0; i < value.length; i++) {
        if (value[i] === prev[i]) continue;
        path.push(i);
        item.check(value[i], prev[i], path, errs);
        path.pop();
      }
      return;
    }
    this.run((this.whole ??= compileStatusPart(this.schema)), value, path, errs);
  }

  /**
   * Compile this node's validators and every part's, one per step: what check() would
   * otherwise compile on the first write that reaches each of them.
   */
  *compileEach(root = false): Generator<void> {
    // A status as a whole is checked only when the object had none: rare, and the largest compile.
    if (!root || (!this.byField && !this.byItem)) {
      this.whole ??= compileStatusPart(this.schema);
      yield;
    }
    if (!this.byField && !this.byItem) return;
    this.shellOf();
    yield;
    if (this.byField) for (const k of Object.keys(this.schema.properties!)) yield* this.partOf(k).compileEach();
    else yield* (this.item ??= new SchemaNode(this.schema.items!)).compileEach();
  }

  private shellOf(): ValidateFunction {
    if (!this.shell) {
      const open = this.byField
        ? { ...this.schema, properties: Object.fromEntries(Object.keys(this.schema.properties!).map((k) => [k, {}])) }
        : { ...this.schema, items: {} };
      this.shell = compileStatusPart(open);
    }
    return this.shell;
  }

  private partOf(k: string): SchemaNode {
    let n = this.parts.get(k);
    if (!n) this.parts.set(k, (n = new SchemaNode(this.schema.properties![k])));
    return n;
  }

  private run(v: ValidateFunction, value: unknown, path: (string | number)[], errs: FieldError[]): void {
    if (v(value)) return;
    const at = path.map((k) => `/${String(k).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
    for (const e of v.errors ?? []) {
      const f = toFieldError({ ...e, instancePath: at + e.instancePath });
      if (f) errs.push(f);
    }
  }
}

/** Each kind's status schema, with the limits and closed objects of validateObject's; null: the kind has no status schema. */
const statusSchemas = new Map<string, SchemaNode | null>();

function statusSchemaOf(kind: string): SchemaNode | null {
  let node = statusSchemas.get(kind);
  if (node !== undefined) return node;
  const status = loadCrds().get(kind)?.schema.properties?.status;
  node = status ? new SchemaNode(closeObjects(withDefaultLimits(status))) : null;
  statusSchemas.set(kind, node);
  return node;
}

/**
 * Validate only the status of an object whose metadata and spec are already stored: what a
 * status write changes. Same rules, limits and messages as validateObject, on less input.
 * `prev` is the stored status the write replaces: a part that is the very same value as
 * there was validated when it was stored, so only the parts the write changed are checked,
 * with the rules of every object and list that holds them (SchemaNode).
 */
export function validateStatus(obj: { kind: string; status?: unknown }, prev?: unknown): FieldError[] {
  const was = isJsonObject(prev) ? prev : undefined;
  const bounds = boundErrors({ status: obj.status }, "", {}, was && { status: was });
  if (bounds.length) return bounds;
  const node = statusSchemaOf(obj.kind);
  if (!node || obj.status === undefined) return [];
  const errs: FieldError[] = [];
  node.check(obj.status, was, ["status"], errs);
  return dedupe(errs);
}

/**
 * Every status validator of every kind compiled, one schema per step. validateStatus compiles
 * what a write reaches on first use, which costs a few milliseconds each: a Hub runs this in
 * the background once it serves, so its first claims and completions do not pay for it.
 */
export function* compileStatusValidators(): Generator<void> {
  for (const kind of loadCrds().keys()) {
    const node = statusSchemaOf(kind);
    if (node) yield* node.compileEach(true);
  }
}

/** Compile a request schema with the same ajv, rules and default limits as the CRDs. */
export function compileSchema(schema: JSONSchema): (data: unknown) => FieldError[] {
  const v = ajv.compile(withDefaultLimits(schema));
  return (data) => {
    const bounds = boundErrors(data);
    if (bounds.length) return bounds;
    if (v(data)) return [];
    return dedupe((v.errors ?? []).map(toFieldError).filter((e): e is FieldError => e !== undefined));
  };
}

/** The schema of one field of a kind, e.g. ("Worker", "spec.max_concurrency"), so request rules come from the CRD. */
export function crdField(kind: string, path: string): JSONSchema {
  let s: JSONSchema | undefined = loadCrds().get(kind)?.schema;
  for (const k of path.split(".")) s = s?.properties?.[k];
  if (!s) throw new Error(`no field ${path} in the ${kind} schema`);
  return s;
}

/** Compile every kind now: a broken CRD stops start-up instead of the first request. */
export function compileAll(): string[] {
  return [...loadCrds().keys()].map((k) => (validatorFor(k), k));
}

/** "/spec/cases/3/x" -> "spec.cases[3].x" */
export function jsonPointerToField(ptr: string): string {
  let out = "";
  for (const raw of ptr.split("/").slice(1)) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (/^\d+$/.test(seg)) out += `[${seg}]`;
    else out += out ? `.${seg}` : seg;
  }
  return out;
}

export function joinField(base: string, rest: string): string {
  if (!base) return rest;
  if (!rest) return base;
  return rest.startsWith("[") ? base + rest : `${base}.${rest}`;
}

function toFieldError(e: ErrorObject): FieldError | undefined {
  const at = jsonPointerToField(e.instancePath);
  const p = e.params as any;
  switch (e.keyword) {
    case "required":
      return { field: joinField(at, p.missingProperty), message: "required", reason: "FieldValueRequired" };
    case "additionalProperties":
      return { field: joinField(at, p.additionalProperty), message: "unknown field", reason: "FieldUnknown" };
    case "enum":
      return { field: at, message: `must be one of: ${p.allowedValues.join(", ")}`, reason: "FieldValueNotSupported" };
    case "type":
      return {
        field: at,
        message: `must be ${String(p.type)
          .split(",")
          .map((t) => `${/^[aeiou]/.test(t) ? "an" : "a"} ${t}`)
          .join(" or ")}`,
        reason: "FieldValueTypeInvalid",
      };
    case "minimum":
      return {
        field: at,
        message: p.limit === 0 ? "must be non-negative" : `must be >= ${p.limit}`,
        reason: "FieldValueInvalid",
      };
    case "maximum":
      return { field: at, message: `must be <= ${p.limit}`, reason: "FieldValueInvalid" };
    case "maxLength":
      return { field: at, message: `must be at most ${p.limit} characters`, reason: "FieldValueInvalid" };
    case "minLength":
      return {
        field: at,
        message: p.limit === 1 ? "must not be empty" : `must be at least ${p.limit} characters`,
        reason: "FieldValueInvalid",
      };
    case "maxItems":
      return { field: at, message: `must have at most ${p.limit} items`, reason: "FieldValueInvalid" };
    case "pattern":
      return {
        field: at,
        message: p.pattern === NO_CONTROL ? "must not contain control characters" : `must match ${p.pattern}`,
        reason: "FieldValueInvalid",
      };
    case "format":
      return {
        field: at,
        message: p.format === "date-time" ? "must be an RFC 3339 date-time" : `must be a valid ${p.format}`,
        reason: "FieldValueInvalid",
      };
    case "x-kubernetes-validations":
      return {
        field: joinField(at, String(p.fieldPath).replace(/^\./, "")),
        message: e.message ?? "invalid",
        reason: "FieldValueInvalid",
      };
    default:
      return { field: at, message: e.message ?? e.keyword, reason: "FieldValueInvalid" };
  }
}

/** Kubernetes' label syntax: a name part of 1-63 characters, alphanumeric at both ends, with `-`, `_`, `.` inside. */
const LABEL_NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/;

/** A label key is `[prefix/]name`, the prefix a DNS subdomain of at most 253 characters; a value is empty or a name part. */
function labelErrors(k: string, val: string): FieldError[] {
  const field = `metadata.labels.${k}`;
  const slash = k.indexOf("/");
  const [prefix, name] = slash < 0 ? [undefined, k] : [k.slice(0, slash), k.slice(slash + 1)];
  const errs: FieldError[] = [];
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN_RE.test(prefix)))
    errs.push({
      field,
      message:
        "the key's prefix must be a DNS subdomain: at most 253 characters of a-z 0-9 - and ., each part starting and ending with a letter or digit",
      reason: "FieldValueInvalid",
    });
  if (!LABEL_NAME_RE.test(name))
    errs.push({
      field,
      message:
        "the key's name (after any prefix/) must be 1-63 characters of A-Z a-z 0-9 - _ . beginning and ending with a letter or digit",
      reason: "FieldValueInvalid",
    });
  if (val !== "" && !LABEL_NAME_RE.test(val))
    errs.push({
      field,
      message: "must be empty or 1-63 characters of A-Z a-z 0-9 - _ . beginning and ending with a letter or digit",
      reason: "FieldValueInvalid",
    });
  return errs;
}

const NAME_RE = /^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/;

/**
 * Metadata rules Loom applies to every kind (the CRDs leave metadata to the server). The
 * objects people write (the CRD kinds) follow Kubernetes' label syntax; Loom's internal
 * records (Events, Results) label themselves with object names and file paths, which are
 * only kept bounded and free of control characters.
 */
export function validateMetadata(obj: any, opts: { labelSyntax?: boolean } = {}): FieldError[] {
  const errs: FieldError[] = [];
  const m = obj?.metadata;
  if (!m || typeof m !== "object" || Array.isArray(m))
    return [{ field: "metadata", message: "required", reason: "FieldValueRequired" }];
  if (
    m.resourceVersion !== undefined &&
    (typeof m.resourceVersion !== "string" || !/^\d{0,19}$/.test(m.resourceVersion))
  )
    errs.push({
      field: "metadata.resourceVersion",
      message: "must be a string holding a revision number",
      reason: "FieldValueTypeInvalid",
    });
  if (typeof m.name !== "string" || m.name === "")
    errs.push({ field: "metadata.name", message: "required", reason: "FieldValueRequired" });
  else if (!NAME_RE.test(m.name))
    errs.push({
      field: "metadata.name",
      message: "must be 1-253 characters of A-Z a-z 0-9 _ . - and start with a letter or digit",
      reason: "FieldValueInvalid",
    });
  for (const key of ["labels", "annotations"] as const) {
    const v = m[key];
    if (v === undefined) continue;
    if (!v || typeof v !== "object" || Array.isArray(v))
      errs.push({ field: `metadata.${key}`, message: "must be a map of strings", reason: "FieldValueTypeInvalid" });
    else
      for (const [k, val] of Object.entries(v)) {
        if (typeof val !== "string")
          errs.push({ field: `metadata.${key}.${k}`, message: "must be a string", reason: "FieldValueTypeInvalid" });
        else if (key === "labels" && opts.labelSyntax) errs.push(...labelErrors(k, val));
        else if (k.length > 253 || HAS_CONTROL.test(k))
          errs.push({
            field: `metadata.${key}`,
            message: "keys must be at most 253 characters without control characters",
            reason: "FieldValueInvalid",
          });
        else if (key === "labels" && (val.length > 1024 || HAS_CONTROL.test(val)))
          errs.push({
            field: `metadata.${key}.${k}`,
            message: "must be at most 1024 characters without control characters",
            reason: "FieldValueInvalid",
          });
      }
  }
  return errs;
}

/** Validate a whole object of any Loom kind. Returns every problem, not only the first. */
export function validateObject(obj: any, opts: { kind?: string } = {}): FieldError[] {
  if (!obj || typeof obj !== "object" || Array.isArray(obj))
    return [{ field: "", message: "must be an object", reason: "FieldValueTypeInvalid" }];
  const kind = opts.kind ?? obj.kind;
  const errs: FieldError[] = [];
  if (obj.apiVersion !== undefined && obj.apiVersion !== API_VERSION)
    errs.push({ field: "apiVersion", message: `must be ${API_VERSION}`, reason: "FieldValueNotSupported" });
  // Bounds first: a hostile value (deep, huge, NUL) is refused before anything walks it.
  const bounds = boundErrors(obj);
  if (bounds.length) return bounds;
  const v = typeof kind === "string" ? validatorFor(kind) : undefined;
  if (!v)
    return [
      ...errs,
      {
        field: "kind",
        message: `must be one of: ${[...loadCrds().keys()].join(", ")}`,
        reason: "FieldValueNotSupported",
      },
    ];
  errs.push(...validateMetadata(obj, { labelSyntax: true }));
  if (!v(obj))
    for (const e of v.errors ?? []) {
      const fe = toFieldError(e);
      if (fe) errs.push(fe);
    }
  return dedupe(errs);
}

function dedupe(errs: FieldError[]): FieldError[] {
  const seen = new Set<string>();
  return errs.filter((e) => {
    const k = `${e.field}\0${e.message}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

export function formatFieldErrors(errs: FieldError[], prefix = ""): string[] {
  return errs.map((e) => `${prefix}${e.field || "<root>"}: ${e.message}`);
}

/** Thrown by every door when input is invalid; carries all field errors at once. */
export class ValidationError extends Error {
  constructor(
    readonly errors: FieldError[],
    readonly source?: string,
  ) {
    super(formatFieldErrors(errors, source ? `${source}: ` : "").join("\n"));
    this.name = "ValidationError";
  }
}
