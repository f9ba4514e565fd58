// Server-side printing: a `meta.k8s.io/v1` Table when the client asks for one
// (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), with the columns of
// src/resources/columns.ts (the CRDs' printer columns and Loom's refinements) — the same
// cells `loom get` prints, so kubectl and loom agree.
import { columnsFor, type Column } from "../resources/columns.ts";
import type { StoredObject } from "../store/store.ts";

export function wantsTable(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(",").some((part) => {
    const p = part.split(";").map((s) => s.trim());
    return p.includes("as=Table") && p.includes("g=meta.k8s.io") && (p.includes("v=v1") || p.includes("v=v1beta1"));
  });
}

export type IncludeObject = "None" | "Metadata" | "Object";

function rowObject(o: StoredObject, include: IncludeObject): unknown {
  if (include === "None") return undefined;
  if (include === "Object") return o;
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata };
}

export function toTable(
  kind: string,
  objects: StoredObject[],
  resourceVersion: string,
  include: IncludeObject = "Metadata",
  cols: Column[] = columnsFor(kind),
) {
  const now = new Date();
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion },
    columnDefinitions: cols.map((c, i) => ({
      name: c.name,
      type: "string",
      format: i === 0 ? "name" : "",
      description: c.name,
      priority: c.priority,
    })),
    rows: objects.map((o) => ({ cells: cols.map((c) => c.cell(o, now)), object: rowObject(o, include) })),
  };
}

/**
 * The object of a BOOKMARK in a Table watch: a Table without rows or columns, carrying the
 * resourceVersion. kubectl prints nothing for it; an object of the watched kind would be
 * printed as a row of its own ("NAME AGE / <unknown>").
 */
export function bookmarkTable(resourceVersion: string) {
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion },
    columnDefinitions: [],
    rows: [],
  };
}

export function includeObjectParam(v: unknown): IncludeObject {
  return v === "None" || v === "Object" ? v : "Metadata";
}
