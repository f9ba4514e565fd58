// Inventory v1 (RUNNER_PROTOCOL §6) -> Worker resources. The Worker CRD is the schema for
// each worker; this module adds what the file format itself defines (version, top-level
// keys, connection_defaults, ids) and reports problems in the file's own terms.
import { API_VERSION, crdFor } from "./crds.ts";
import { validateObject } from "./validate.ts";
import type { Worker } from "./types.ts";
import { type ItemFieldError, dedupeErrors, fieldError, isPlainObject, rebaseField } from "./input-errors.ts";
import { normaliseGpuTypes } from "./profile.ts";
import { V1_FIELDS_ANNOTATION, V1_ONLY_WORKER_KEYS, keptAnnotation, keptNote, unknownField } from "./v1-fields.ts";

export const INVENTORY_KEYS = [
  "inventory_version",
  "controller",
  "controller_public_url",
  "controller_worker_url",
  "controller_private_url",
  "connection_defaults",
  "workers",
] as const;

export const CONTROLLER_KEYS = ["connection_mode", "host", "private_host", "user", "key_path", "bind_host"] as const;
export const CONTROLLER_CONNECTION_MODES = ["ssh-start", "prestarted", "local-process"] as const;
const CONTROLLER_URL_KEYS = ["controller_public_url", "controller_worker_url", "controller_private_url"] as const;

/** Keys a worker entry may have: the Worker spec's fields, plus worker_id (which becomes metadata.name). */
export function workerKeys(): string[] {
  return ["worker_id", ...workerSpecKeys()];
}

function workerSpecKeys(): string[] {
  return Object.keys(crdFor("Worker").schema.properties?.spec?.properties ?? {});
}

/** The inventory's own settings (not per worker); the Hub and the quick start read them. */
export type InventorySettings = {
  controller?: {
    connection_mode?: (typeof CONTROLLER_CONNECTION_MODES)[number];
    host?: string;
    private_host?: string;
    user?: string;
    key_path?: string;
    bind_host?: string;
  };
  controller_public_url?: string;
  controller_worker_url?: string;
  controller_private_url?: string;
};

/** `notes` name the v1 fields Loom keeps without acting on them; a field v1 did not know either is an error. */
export type InventoryResult = {
  workers: Worker[];
  settings: InventorySettings;
  errors: ItemFieldError[];
  notes: ItemFieldError[];
};

/** The worker keys an inventory may use: the Worker spec's, and v1's that Loom keeps without acting on. */
type WorkerKeys = { spec: ReadonlySet<string>; v1Only: ReadonlySet<string>; known: readonly string[] };

/** Where each inventory's problems and notes are collected. */
type Findings = { errors: ItemFieldError[]; notes: ItemFieldError[] };

/** connection_defaults: what every worker inherits into its spec, and the v1-only keys kept on every worker. */
type Defaults = { spec: Record<string, unknown>; kept: Record<string, unknown> };

/**
 * Convert one parsed inventory document. Every problem is collected; workers that could be
 * built are returned even when there are errors, so callers decide (a file with any error
 * is applied by nobody).
 */
export function inventoryToWorkers(doc: unknown): InventoryResult {
  const found: Findings = { errors: [], notes: [] };
  const settings: InventorySettings = {};
  const workers: Worker[] = [];
  if (!isPlainObject(doc))
    return {
      workers,
      settings,
      errors: [fieldError("", "an inventory must be an object", "FieldValueTypeInvalid")],
      notes: found.notes,
    };
  found.errors.push(...inventorySettings(doc, settings));
  const specKeys = new Set(workerSpecKeys());
  const v1Only = new Set<string>(V1_ONLY_WORKER_KEYS);
  const keys: WorkerKeys = { spec: specKeys, v1Only, known: ["worker_id", ...specKeys, ...v1Only] };
  const defaults = connectionDefaults(doc.connection_defaults, keys, found);

  if (doc.workers === undefined) found.errors.push(fieldError("workers", "required", "FieldValueRequired"));
  else if (!Array.isArray(doc.workers))
    found.errors.push(fieldError("workers", "must be a list", "FieldValueTypeInvalid"));
  else {
    const seen = new Map<string, number>();
    doc.workers.forEach((entry, i) => {
      const w = inventoryWorker(entry, `workers[${i}]`, keys, defaults, found);
      if (!w) return;
      const first = seen.get(w.worker.metadata.name);
      if (first !== undefined) {
        found.errors.push(
          fieldError(
            w.idField,
            `duplicate worker id "${w.worker.metadata.name}" (also workers[${first}])`,
            "FieldValueDuplicate",
            w.worker.metadata.name,
          ),
        );
        return;
      }
      seen.set(w.worker.metadata.name, i);
      workers.push(w.worker);
    });
  }
  return { workers, settings, errors: dedupeErrors(found.errors), notes: found.notes };
}

/** The inventory-level keys: the version, the controller block and its URLs (into `settings`). */
function inventorySettings(doc: Record<string, unknown>, settings: InventorySettings): ItemFieldError[] {
  const errors: ItemFieldError[] = [];
  // Every inventory-level key is v1's and Loom's: any other is a typo (or a file of another kind).
  for (const k of Object.keys(doc))
    if (!(INVENTORY_KEYS as readonly string[]).includes(k)) errors.push(unknownField(k, k, INVENTORY_KEYS));

  if (doc.inventory_version === undefined)
    errors.push(fieldError("inventory_version", "required", "FieldValueRequired"));
  else if (doc.inventory_version !== 1)
    errors.push(fieldError("inventory_version", "must be 1", "FieldValueNotSupported"));

  errors.push(...checkController(doc.controller, settings));
  for (const k of CONTROLLER_URL_KEYS) {
    const v = doc[k];
    if (v === undefined) continue;
    if (typeof v !== "string" || !isHttpUrl(v))
      errors.push(fieldError(k, "must be an http(s) URL", "FieldValueInvalid"));
    else settings[k] = v;
  }
  return errors;
}

/**
 * connection_defaults are copied under every worker; the v1 keys Loom does not act on (v1's
 * `ssh` options, say) are kept on every worker too, and noted here once.
 */
function connectionDefaults(raw: unknown, keys: WorkerKeys, found: Findings): Defaults {
  const defaults: Defaults = { spec: {}, kept: {} };
  if (raw === undefined) return defaults;
  if (!isPlainObject(raw)) {
    found.errors.push(fieldError("connection_defaults", "must be an object", "FieldValueTypeInvalid"));
    return defaults;
  }
  for (const [k, v] of Object.entries(raw)) {
    if (keys.spec.has(k)) defaults.spec[k] = v;
    else if (k === "worker_id")
      found.errors.push(
        fieldError(
          "connection_defaults.worker_id",
          "worker_id cannot be a default: it must be unique per worker",
          "FieldUnknown",
        ),
      );
    else if (!keys.v1Only.has(k)) found.errors.push(unknownField(`connection_defaults.${k}`, k, keys.known));
    else {
      defaults.kept[k] = v;
      found.notes.push(keptNote(`connection_defaults.${k}`, `on every worker (annotation ${V1_FIELDS_ANNOTATION})`));
    }
  }
  return defaults;
}

/**
 * One `workers[i]` entry as a Worker, its problems reported in the file's terms. Undefined
 * when it has no usable name; its spec is still checked then, so one pass reports everything.
 */
function inventoryWorker(
  entry: unknown,
  at: string,
  keys: WorkerKeys,
  defaults: Defaults,
  found: Findings,
): { worker: Worker; idField: string } | undefined {
  if (!isPlainObject(entry)) {
    found.errors.push(fieldError(at, "must be an object", "FieldValueTypeInvalid"));
    return undefined;
  }
  const { worker_id, ...all } = entry;
  const own: Record<string, unknown> = {};
  const kept: Record<string, unknown> = { ...defaults.kept };
  for (const [k, v] of Object.entries(all)) {
    if (keys.spec.has(k)) own[k] = v;
    else kept[k] = v;
  }
  const idField = worker_id !== undefined ? `${at}.worker_id` : `${at}.host`;
  const raw = worker_id !== undefined ? worker_id : entry.host;
  let name: string | undefined;
  if (raw === undefined || raw === "")
    found.errors.push(
      fieldError(`${at}.worker_id`, "required (or host, which it falls back to)", "FieldValueRequired"),
    );
  else if (typeof raw !== "string") found.errors.push(fieldError(idField, "must be a string", "FieldValueTypeInvalid"));
  else name = raw;
  const spec: Record<string, unknown> = { ...defaults.spec, ...own };
  if (isPlainObject(spec.resource_capacity)) spec.resource_capacity = normaliseGpuTypes(spec.resource_capacity);
  for (const k of Object.keys(all)) {
    if (keys.spec.has(k)) continue;
    if (keys.v1Only.has(k))
      found.notes.push(keptNote(`${at}.${k}`, `on the Worker (annotation ${V1_FIELDS_ANNOTATION})`, name));
    else found.errors.push(unknownField(`${at}.${k}`, k, keys.known, name));
  }
  const annotations = keptAnnotation(kept);
  const metadata = { name: name ?? "unnamed", ...(Object.keys(annotations).length ? { annotations } : {}) };
  const worker: Worker = { apiVersion: API_VERSION, kind: "Worker", metadata, spec: spec };

  // Back to the file's terms: a field the worker sets is its own; one it inherits is connection_defaults'.
  const where = (field: string): string => {
    if (field === "metadata.name") return idField;
    const top = /^spec\.([^.[]+)/.exec(field)?.[1];
    if (top !== undefined && !(top in own) && top in defaults.spec)
      return rebaseField(field, "spec", "connection_defaults") ?? field;
    return rebaseField(field, "spec", at) ?? rebaseField(field, "", at)!;
  };
  for (const e of validateObject(worker)) {
    if (name === undefined && e.field === "metadata.name") continue;
    const field = where(e.field);
    found.errors.push(field.startsWith("connection_defaults") ? { ...e, field } : { ...e, field, subject: name });
  }
  // v1 registration needs an initial concurrency, and the inventory is where it comes from.
  if (spec.initial_concurrency === undefined)
    found.errors.push(fieldError(`${at}.initial_concurrency`, "required", "FieldValueRequired", name));
  return name === undefined ? undefined : { worker, idField };
}

function checkController(c: unknown, settings: InventorySettings): ItemFieldError[] {
  if (c === undefined) return [];
  if (!isPlainObject(c)) return [fieldError("controller", "must be an object", "FieldValueTypeInvalid")];
  const errs: ItemFieldError[] = [];
  for (const [k, v] of Object.entries(c)) {
    if (!(CONTROLLER_KEYS as readonly string[]).includes(k))
      errs.push(unknownField(`controller.${k}`, k, CONTROLLER_KEYS));
    else if (typeof v !== "string")
      errs.push(fieldError(`controller.${k}`, "must be a string", "FieldValueTypeInvalid"));
    else if (k === "connection_mode" && !(CONTROLLER_CONNECTION_MODES as readonly string[]).includes(v))
      errs.push(
        fieldError(
          "controller.connection_mode",
          `must be one of: ${CONTROLLER_CONNECTION_MODES.join(", ")}`,
          "FieldValueNotSupported",
        ),
      );
  }
  if (errs.length === 0) settings.controller = c;
  return errs;
}

function isHttpUrl(s: string): boolean {
  try {
    const u = new URL(s);
    return u.protocol === "http:" || u.protocol === "https:";
  } catch {
    return false;
  }
}
