// The CRDs in crds/ are the single source of truth for every Loom kind: this module
// loads them once, and everything else (validation, generated types, discovery,
// printer columns) reads what it needs from here.
import { readFileSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "yaml";

export const GROUP = "loom.dev";
export const VERSION = "v1alpha1";
export const API_VERSION = `${GROUP}/${VERSION}`;

export const CRD_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "crds");

export type JSONSchema = {
  type?: string;
  format?: string;
  description?: string;
  properties?: Record<string, JSONSchema>;
  additionalProperties?: JSONSchema | boolean;
  items?: JSONSchema;
  required?: string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  minLength?: number;
  "x-kubernetes-preserve-unknown-fields"?: boolean;
  /** With `anyOf: [{type: integer, ...}, {type: string, ...}]`: either (Kubernetes' IntOrString). */
  "x-kubernetes-int-or-string"?: boolean;
  anyOf?: JSONSchema[];
  "x-kubernetes-validations"?: { rule: string; message: string; fieldPath?: string }[];
  [k: string]: unknown;
};

export type PrinterColumn = { name: string; type: string; jsonPath: string; priority?: number; description?: string };

export type CrdInfo = {
  file: string;
  kind: string;
  listKind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  schema: JSONSchema;
  columns: PrinterColumn[];
  hasStatus: boolean;
  raw: Record<string, unknown>;
};

let cache: Map<string, CrdInfo> | undefined;

/** Every CRD in crds/, keyed by kind. Read once per process. */
export function loadCrds(dir: string = CRD_DIR): Map<string, CrdInfo> {
  if (cache && dir === CRD_DIR) return cache;
  const out = new Map<string, CrdInfo>();
  for (const file of readdirSync(dir)
    .filter((f) => f.endsWith(".yaml"))
    .sort()) {
    const raw = parse(readFileSync(join(dir, file), "utf8"), { merge: true });
    const version = raw.spec.versions.find((v: any) => v.name === VERSION);
    if (!version) throw new Error(`${file}: no version ${VERSION}`);
    const names = raw.spec.names;
    out.set(names.kind, {
      file,
      kind: names.kind,
      listKind: names.listKind,
      plural: names.plural,
      singular: names.singular,
      shortNames: names.shortNames ?? [],
      schema: version.schema.openAPIV3Schema,
      columns: version.additionalPrinterColumns ?? [],
      hasStatus: Boolean(version.subresources?.status),
      raw,
    });
  }
  if (dir === CRD_DIR) cache = out;
  return out;
}

export function crdFor(kind: string): CrdInfo {
  const crd = loadCrds().get(kind);
  if (!crd) throw new Error(`unknown kind ${kind}`);
  return crd;
}
