// Printer columns, defined once in the CRDs (additionalPrinterColumns) and evaluated here,
// so the server-side Table that kubectl prints and `loom get` show the same cells.
import { loadCrds, type PrinterColumn } from "./crds.ts";

/**
 * The JSONPath subset printer columns use: `.a.b`, `.a[0]`, and a filter on a list of
 * objects, `.a[?(@.k=="v")].b`. A path that does not resolve gives undefined.
 */
export function evalJsonPath(obj: unknown, path: string): unknown {
  const re = /\.([A-Za-z_][\w-]*)|\[(\d+)\]|\[\?\(@\.([\w-]+)\s*==\s*(?:"([^"]*)"|'([^']*)')\)\]/gy;
  let cur: unknown[] = [obj];
  let m: RegExpExecArray | null;
  let at = 0;
  while (at < path.length) {
    re.lastIndex = at;
    m = re.exec(path);
    if (!m) throw new Error(`unsupported JSONPath ${JSON.stringify(path)} at ${at}`);
    at = re.lastIndex;
    const [, key, index, fk, fv1, fv2] = m;
    cur = cur.flatMap((v): unknown[] => {
      if (key !== undefined) return v && typeof v === "object" && !Array.isArray(v) && key in v ? [(v as Record<string, unknown>)[key]] : [];
      if (index !== undefined) return Array.isArray(v) && Number(index) < v.length ? [v[Number(index)]] : [];
      const want = fv1 ?? fv2;
      return Array.isArray(v) ? v.filter((x) => x && typeof x === "object" && String((x as Record<string, unknown>)[fk]) === want) : [];
    });
  }
  return cur.length === 0 ? undefined : cur.length === 1 ? cur[0] : cur;
}

/** kubectl's AGE: two significant units at most (`90s`, `5m30s`, `3h5m`, `6d4h`, `2y40d`). */
export function humanDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 10) return s % 60 ? `${m}m${s % 60}s` : `${m}m`;
  if (m < 180) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 8) return m % 60 ? `${h}h${m % 60}m` : `${h}h`;
  if (h < 48) return `${h}h`;
  const d = Math.floor(h / 24);
  if (d < 8) return h % 24 ? `${d}d${h % 24}h` : `${d}d`;
  if (d < 365 * 2) return `${d}d`;
  const y = Math.floor(d / 365);
  return d % 365 ? `${y}y${d % 365}d` : `${y}y`;
}

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
  const v = evalJsonPath(obj, c.jsonPath);
  if (v === undefined || v === null) return null;
  if (c.type === "date" && typeof v === "string") {
    const t = Date.parse(v);
    return Number.isNaN(t) ? v : humanDuration(now - t);
  }
  if (Array.isArray(v)) return v.map((x) => (typeof x === "object" ? JSON.stringify(x) : String(x))).join(",");
  if (typeof v === "object") return JSON.stringify(v);
  return v;
}
