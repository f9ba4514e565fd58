// Printer columns, defined once in the CRDs (additionalPrinterColumns) and evaluated here,
// so the server-side Table that kubectl prints and `loom get` show the same cells.
import { loadCrds, type PrinterColumn } from "./crds.ts";
import { evalJsonPath, humanDuration } from "./jsonpath.ts";

export { evalJsonPath, humanDuration };

export type Column = { name: string; type: string; format?: string; description: string; priority: number; jsonPath?: string };

/** The columns of a kind: Name first, then the CRD's printer columns in order. */
export function columnsFor(kind: string): Column[] {
  const crd = loadCrds().get(kind);
  const extra: PrinterColumn[] = crd?.columns ?? [];
  return [
    { name: "Name", type: "string", format: "name", description: "Name of the object", priority: 0 },
    ...extra.map((c) => ({ name: c.name, type: c.type, description: c.description ?? c.jsonPath, priority: c.priority ?? 0, jsonPath: c.jsonPath })),
  ];
}

/** One cell as the API server renders it: dates as ages, lists joined, missing as null. */
export function cellValue(obj: unknown, c: Column, now: number): unknown {
  if (!c.jsonPath) return (obj as { metadata?: { name?: string } })?.metadata?.name ?? "";
  const vs = evalJsonPath(obj, c.jsonPath);
  if (vs.length === 0) return null;
  const v = vs[0];
  if (c.type === "date" && typeof v === "string") {
    const t = Date.parse(v);
    return Number.isNaN(t) ? v : humanDuration(now - t);
  }
  if (vs.length > 1 || typeof v === "object") return vs.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(",");
  return v;
}
