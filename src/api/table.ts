// Server-side printing: a `meta.k8s.io/v1` Table when the client asks for one
// (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), with the columns the CRDs
// declare, as a real API server does for custom resources. kubectl prints these as is.
import { cellValue, columnsFor, humanDuration, type Column } from "../resources/columns.ts";
import type { StoredObject } from "../store/store.ts";

export function wantsTable(accept: string | undefined): boolean {
  if (!accept) return false;
  return accept.split(",").some((part) => {
    const p = part.split(";").map((s) => s.trim());
    return p.includes("as=Table") && p.includes("g=meta.k8s.io") && (p.includes("v=v1") || p.includes("v=v1beta1"));
  });
}

/** Events have no CRD; their columns are the ones `kubectl get events` shows. */
const EVENT_COLUMNS: (Column & { value(e: Record<string, any>, now: number): unknown })[] = [
  { name: "Last Seen", type: "string", description: "Time since the event was last seen", priority: 0, value: (e, now) => (e.lastTimestamp ? humanDuration(now - Date.parse(e.lastTimestamp)) : null) },
  { name: "Type", type: "string", description: "Normal or Warning", priority: 0, value: (e) => e.type },
  { name: "Reason", type: "string", description: "Why", priority: 0, value: (e) => e.reason },
  { name: "Object", type: "string", description: "The object it is about", priority: 0, value: (e) => `${String(e.involvedObject?.kind ?? "").toLowerCase()}/${e.involvedObject?.name ?? ""}` },
  { name: "Message", type: "string", description: "What happened", priority: 0, value: (e) => e.message },
];

export type IncludeObject = "None" | "Metadata" | "Object";

function rowObject(o: StoredObject, include: IncludeObject): unknown {
  if (include === "None") return undefined;
  if (include === "Object") return o;
  return { kind: "PartialObjectMetadata", apiVersion: "meta.k8s.io/v1", metadata: o.metadata };
}

export function toTable(kind: string, objects: StoredObject[], resourceVersion: string, include: IncludeObject = "Metadata", withDefinitions = true) {
  const now = Date.now();
  const isEvent = kind === "Event";
  const cols = isEvent ? EVENT_COLUMNS : columnsFor(kind);
  return {
    kind: "Table",
    apiVersion: "meta.k8s.io/v1",
    metadata: { resourceVersion },
    columnDefinitions: withDefinitions ? cols.map(({ name, type, format, description, priority }) => ({ name, type, format: format ?? "", description, priority })) : [],
    rows: objects.map((o) => ({
      cells: isEvent ? EVENT_COLUMNS.map((c) => c.value(o as Record<string, any>, now)) : cols.map((c) => cellValue(o, c, now)),
      object: rowObject(o, include),
    })),
  };
}

export function includeObjectParam(v: unknown): IncludeObject {
  return v === "None" || v === "Object" ? v : "Metadata";
}
