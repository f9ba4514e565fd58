// Files -> resources. One entry point for every file Loom reads (the CLI, `loom validate`,
// GitOps folders): it recognises what each document holds, converts seed formats
// (inventory v1, manifest v1) to resources, validates everything against the CRDs, and
// reports every problem of every file in one pass, each with its file, line and field.
import { readFileSync, readdirSync, statSync } from "node:fs";
import { extname, join } from "node:path";
import { LineCounter, isMap, isScalar, isSeq, parseAllDocuments, parseDocument, type Document } from "yaml";
import { validateObject } from "./validate.ts";
import { API_VERSION } from "./crds.ts";
import { KINDS, type Campaign, type Queue, type Task, type Worker } from "./types.ts";

/** A resource a file declares. */
export type LoadedResource = Worker | Campaign | Task | Queue;
import {
  type InputError,
  type ItemFieldError,
  InputValidationError,
  dedupeErrors,
  fieldError,
  isPlainObject,
  prefixErrors,
} from "./input-errors.ts";
import { type InventorySettings, inventoryToWorkers } from "./inventory.ts";
import { convertJsonlManifest, convertManifest, expandCampaign } from "./manifest.ts";

export type LoadResult = {
  /** Workers (from inventories and resource documents), Campaigns (from manifests and resource documents) and Tasks given as resources. */
  resources: LoadedResource[];
  /** Tasks the Campaigns expand to. They are not resources of the files (the Campaign controller creates them); they are here so files can be checked and previewed. */
  tasks: Task[];
  /** The inventory-level settings (controller, URLs) of each inventory read. */
  inventories: (InventorySettings & { source: string })[];
  /** Every problem. When it names a file, nothing from that file should be applied. */
  errors: InputError[];
  /** v1 fields Loom keeps without acting on them: shown, never errors. */
  notes: InputError[];
};

/** The file extensions a directory walk picks up. */
export const INPUT_EXTENSIONS = [".json", ".yaml", ".yml", ".jsonl"] as const;

type Locate = (field: string) => number | undefined;
type Origin = { source: string; field: string; subject?: string; locate: Locate };
type Acc = LoadResult & { origins: Map<object, Origin> };

const emptyAcc = (): Acc => ({ resources: [], tasks: [], inventories: [], errors: [], notes: [], origins: new Map() });

/** Parse one file's text; `sourceName` names it in errors and picks the format by extension (.jsonl, .json, otherwise YAML). */
export function parseDocuments(text: string, sourceName: string): LoadResult {
  const acc = emptyAcc();
  parseInto(acc, text, sourceName);
  return finish(acc);
}

/** Read one file (a directory is walked as by loadPaths). */
export function loadFile(path: string): LoadResult {
  return loadPaths([path]);
}

/**
 * Files or directories; directories are walked recursively for *.json, *.yaml, *.yml and
 * *.jsonl (hidden entries skipped) in sorted order. Names must be unique across all of them.
 */
export function loadPaths(paths: string[]): LoadResult {
  const acc = emptyAcc();
  const files: string[] = [];
  for (const p of paths) {
    // "-" is standard input, as in kubectl apply -f -; YAML reads JSON too.
    if (p === "-") {
      parseInto(acc, readFileSync(0, "utf8"), "<stdin>");
      continue;
    }
    let st;
    try {
      st = statSync(p);
    } catch (e) {
      acc.errors.push({
        source: p,
        ...fieldError("", `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`),
      });
      continue;
    }
    if (st.isDirectory()) files.push(...walk(p));
    else files.push(p);
  }
  for (const file of [...new Set(files)]) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      acc.errors.push({
        source: file,
        ...fieldError("", `cannot read: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`),
      });
      continue;
    }
    parseInto(acc, text, file);
  }
  return finish(acc);
}

/** Throw an InputValidationError carrying every error, for callers that want an exception. */
export function assertLoaded(result: LoadResult): LoadResult {
  if (result.errors.length) throw new InputValidationError(result.errors);
  return result;
}

function walk(dir: string): string[] {
  const out: string[] = [];
  const visit = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      if (name.startsWith(".")) continue;
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) visit(p);
      else if ((INPUT_EXTENSIONS as readonly string[]).includes(extname(name).toLowerCase())) out.push(p);
    }
  };
  visit(dir);
  return out.sort();
}

function parseInto(acc: Acc, raw: string, source: string): void {
  const text = raw.replace(/^\uFEFF/, ""); // editors on some platforms write a BOM; JSON.parse rejects it
  const ext = extname(source).toLowerCase();
  if (ext === ".jsonl") return addJsonl(acc, text, source);
  if (ext === ".json") return addJson(acc, text, source);
  return addYaml(acc, text, source);
}

function addJsonl(acc: Acc, text: string, source: string): void {
  const r = convertJsonlManifest(text);
  acc.errors.push(...r.errors.map((e) => ({ ...e, source })));
  acc.notes.push(...r.notes.map((e) => ({ ...e, source })));
  if (!r.campaign) return;
  const locate: Locate = (field) => {
    const m = /^cases\[(\d+)\]/.exec(field);
    return m ? r.lines[Number(m[1])] : undefined;
  };
  addObject(acc, r.campaign, { source, field: "campaign_id", locate: () => r.lines[0] });
  for (const t of r.tasks)
    addTask(acc, t, { source, field: `cases[${sourceIndex(t)}]`, subject: t.metadata.name, locate });
}

function addJson(acc: Acc, text: string, source: string): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message.replace(/\s+/g, " ");
    acc.errors.push({ source, ...fieldError("", `invalid JSON: ${message}`), line: jsonErrorLine(text, message) });
    return;
  }
  // JSON is parsed again as YAML only to find lines, and only when something needs one.
  let locate: Locate | undefined;
  const lazy: Locate = (field) => {
    if (!locate) {
      const lc = new LineCounter();
      const doc = parseDocument(text, { lineCounter: lc, uniqueKeys: false });
      locate = (f) => nodeLine(doc, lc, f);
    }
    return locate(field);
  };
  addValue(acc, value, source, lazy);
}

function addYaml(acc: Acc, text: string, source: string): void {
  const lc = new LineCounter();
  const docs = parseAllDocuments(text, { lineCounter: lc, prettyErrors: true });
  for (const doc of docs as Document[]) {
    if (doc.errors.length) {
      for (const e of doc.errors) {
        const pos = e.linePos?.[0];
        const message = e.message.split("\n")[0].replace(/ at line \d+, column \d+:?$/, "");
        acc.errors.push({
          source,
          ...fieldError("", `invalid YAML: ${message}${pos ? ` (column ${pos.col})` : ""}`),
          line: pos?.line,
        });
      }
      continue;
    }
    const value = doc.toJS({ maxAliasCount: 1000 });
    if (value === null || value === undefined) continue; // an empty document (a stray "---")
    addValue(acc, value, source, (field) => nodeLine(doc, lc, field));
  }
}

/** One parsed document: decide what it holds by its keys. */
function addValue(acc: Acc, value: unknown, source: string, locate: Locate): void {
  const at = (e: ItemFieldError): InputError => ({ ...e, source, line: e.line ?? locate(e.field) });
  const push = (errs: ItemFieldError[]): void => void acc.errors.push(...errs.map(at));
  const note = (notes: ItemFieldError[]): void => void acc.notes.push(...notes.map(at));

  if (Array.isArray(value)) {
    value.forEach((item, i) => addResource(acc, item, `[${i}]`, source, locate, push));
    return;
  }
  if (!isPlainObject(value)) {
    push([
      fieldError(
        "",
        "must be an object: a Loom resource (apiVersion, kind), an inventory (inventory_version) or a campaign manifest (schema_version)",
        "FieldValueTypeInvalid",
      ),
    ]);
    return;
  }
  if ("apiVersion" in value || "kind" in value) {
    if (isList(value)) {
      if (!Array.isArray(value.items)) return push([fieldError("items", "must be a list", "FieldValueTypeInvalid")]);
      value.items.forEach((item, i) => addResource(acc, item, `items[${i}]`, source, locate, push));
    } else addResource(acc, value, "", source, locate, push);
    return;
  }
  if ("inventory_version" in value || "workers" in value) {
    const r = inventoryToWorkers(value);
    push(r.errors);
    note(r.notes);
    acc.inventories.push({ source, ...r.settings });
    const entries = Array.isArray(value.workers) ? value.workers : [];
    for (const w of r.workers) {
      const i = entries.findIndex((e) => isPlainObject(e) && (e.worker_id ?? e.host) === w.metadata.name);
      const field =
        isPlainObject(entries[i]) && entries[i].worker_id !== undefined
          ? `workers[${i}].worker_id`
          : `workers[${i}].host`;
      addObject(acc, w, { source, field, subject: w.metadata.name, locate });
    }
    return;
  }
  if ("schema_version" in value || "cases" in value || "runs" in value || "campaign_id" in value) {
    const r = convertManifest(value);
    push(r.errors);
    note(r.notes);
    if (r.campaign) addObject(acc, r.campaign, { source, field: "campaign_id", locate });
    for (const t of r.tasks)
      addTask(acc, t, { source, field: `cases[${sourceIndex(t)}]`, subject: t.metadata.name, locate });
    return;
  }
  push([
    fieldError(
      "",
      "not a Loom resource (apiVersion, kind), an inventory (inventory_version) or a campaign manifest (schema_version, campaign_id, cases)",
      "FieldValueInvalid",
    ),
  ]);
}

function isList(v: Record<string, unknown>): boolean {
  return v.kind === "List" || (typeof v.kind === "string" && v.kind.endsWith("List") && "items" in v);
}

/** A Loom resource document (or a List item at `at`). */
function addResource(
  acc: Acc,
  obj: unknown,
  at: string,
  source: string,
  locate: Locate,
  push: (errs: ItemFieldError[]) => void,
): void {
  if (!isPlainObject(obj))
    return push([fieldError(at, "must be an object with apiVersion and kind", "FieldValueTypeInvalid")]);
  const name = isPlainObject(obj.metadata) && typeof obj.metadata.name === "string" ? obj.metadata.name : undefined;
  const subject = typeof obj.kind === "string" ? `${obj.kind}/${name ?? "<unnamed>"}` : undefined;
  const errs: ItemFieldError[] = [];
  if (obj.apiVersion === undefined)
    errs.push(fieldError("apiVersion", `required (${API_VERSION})`, "FieldValueRequired"));
  errs.push(...validateObject(obj));
  push(prefixErrors(errs, at).map((e) => ({ ...e, subject })));
  if (obj.apiVersion !== API_VERSION || !(KINDS as readonly unknown[]).includes(obj.kind) || name === undefined) return;

  const resource = obj as LoadedResource;
  addObject(acc, resource, { source, field: prefixField(at, "metadata.name"), subject, locate });
  if (resource.kind === "Campaign" && isPlainObject(obj.spec)) {
    const r = expandCampaign(resource);
    push(prefixErrors(r.errors, prefixField(at, "spec")));
    for (const t of r.tasks)
      addTask(acc, t, {
        source,
        field: prefixField(at, `spec.cases[${sourceIndex(t)}]`),
        subject: t.metadata.name,
        locate,
      });
  }
}

const prefixField = (at: string, field: string) => (at ? `${at}.${field}` : field);
// source_index counts cases from 1, as v1 does; cases[] counts from 0.
const sourceIndex = (t: Task) =>
  ((t.spec.payload as { normalized?: { source_index?: number } } | undefined)?.normalized?.source_index ?? 1) - 1;

function addObject(acc: Acc, obj: object, origin: Origin): void {
  acc.resources.push(obj as LoadedResource);
  acc.origins.set(obj, origin);
}

function addTask(acc: Acc, t: Task, origin: Origin): void {
  acc.tasks.push(t);
  acc.origins.set(t, origin);
}

/** Names are unique per kind across everything loaded; expanded tasks share the Task namespace. */
function finish(acc: Acc): LoadResult {
  const seen = new Map<string, Origin>();
  const where = (o: Origin) => {
    const line = o.locate(o.field);
    return `${o.source}${line ? `:${line}` : ""}`;
  };
  const keep = (obj: LoadedResource | Task): boolean => {
    const key = `${obj.kind}/${obj.metadata.name}`;
    const origin = acc.origins.get(obj)!;
    const prev = seen.get(key);
    if (!prev) {
      seen.set(key, origin);
      return true;
    }
    acc.errors.push({
      source: origin.source,
      ...fieldError(
        origin.field,
        `duplicate ${obj.kind} "${obj.metadata.name}" (also declared at ${where(prev)})`,
        "FieldValueDuplicate",
        origin.subject,
      ),
      line: origin.locate(origin.field),
    });
    return false;
  };
  const resources = acc.resources.filter(keep);
  const tasks = acc.tasks.filter(keep);
  return {
    resources,
    tasks,
    inventories: acc.inventories,
    errors: dedupeErrors(acc.errors),
    notes: dedupeErrors(acc.notes),
  };
}

/** The line of the deepest node on a field path ("cases[3].env.X"); keys are preferred, so an unknown key points at itself. */
function nodeLine(doc: Document, lc: LineCounter, field: string): number | undefined {
  const lineOf = (n: unknown): number | undefined => {
    const r = (n as { range?: [number, number, number] } | null)?.range;
    return r ? lc.linePos(r[0]).line : undefined;
  };
  let node: unknown = doc.contents;
  let line = lineOf(node);
  for (const m of field.matchAll(/([^.[\]]+)|\[(\d+)\]/g)) {
    if (m[2] !== undefined && isSeq(node)) {
      node = node.items[Number(m[2])];
    } else if (m[1] !== undefined && isMap(node)) {
      const pair = node.items.find((p) => String(isScalar(p.key) ? p.key.value : p.key) === m[1]);
      if (!pair) break;
      line = lineOf(pair.key) ?? line;
      node = pair.value;
      continue;
    } else break;
    if (node === undefined || node === null) break;
    line = lineOf(node) ?? line;
  }
  return line;
}

function jsonErrorLine(text: string, message: string): number | undefined {
  const pos = /position (\d+)/.exec(message);
  const offset = pos ? Number(pos[1]) : jsonErrorOffset(text);
  // An error at the very end is reported on the last line that has text.
  return offset === undefined ? undefined : text.slice(0, Math.min(offset, text.trimEnd().length)).split("\n").length;
}

/**
 * Where JSON text first goes wrong. Node 20's JSON.parse does not always say, and a
 * parse error must name its line. A strict scanner of the JSON grammar, nothing more.
 */
export function jsonErrorOffset(text: string): number | undefined {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const fail = (): never => {
    // The offset itself is thrown, and caught below: the scanner has nothing else to say.
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    throw i;
  };
  const lit = (w: string) => (text.startsWith(w, i) ? (i += w.length) : fail());
  const str = () => {
    i++;
    while (i < text.length && text[i] !== '"') {
      if (text[i] === "\\") {
        i++;
        if (text[i] === "u") {
          if (!/^[0-9a-fA-F]{4}$/.test(text.slice(i + 1, i + 5))) fail();
          i += 4;
        } else if (!'"\\/bfnrt'.includes(text[i] ?? "")) fail();
      } else if (text.charCodeAt(i) < 0x20) fail();
      i++;
    }
    if (i >= text.length) fail();
    i++;
  };
  const num = () => {
    const m = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i));
    if (!m || m[0] === "-") fail();
    i += m![0].length;
  };
  const value = (): void => {
    ws();
    const c = text[i];
    if (c === "{") {
      i++;
      ws();
      if (text[i] === "}") return void i++;
      for (;;) {
        ws();
        if (text[i] !== '"') fail();
        str();
        ws();
        if (text[i] !== ":") fail();
        i++;
        value();
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "}") return void i++;
        else fail();
      }
    } else if (c === "[") {
      i++;
      ws();
      if (text[i] === "]") return void i++;
      for (;;) {
        value();
        ws();
        if (text[i] === ",") i++;
        else if (text[i] === "]") return void i++;
        else fail();
      }
    } else if (c === '"') str();
    else if (c === "t") lit("true");
    else if (c === "f") lit("false");
    else if (c === "n") lit("null");
    else num();
  };
  try {
    value();
    ws();
    return i < text.length ? i : undefined;
  } catch (at) {
    // Nesting deeper than the stack (a RangeError) names no line rather than a wrong one.
    if (typeof at !== "number") return undefined;
    return Math.min(at, text.length);
  }
}
