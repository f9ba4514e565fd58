// kubectl's output habits: columns are data, aligned with two spaces, headers in caps,
// `<none>` for missing values, AGE as a HumanDuration, priority-1 columns only with
// `-o wide`, and `-o json|yaml|name` printing the API's own answer untouched.
import { stringify } from "yaml";
import { evalJsonPath, humanDuration, parseJsonPath } from "../resources/jsonpath.ts";

export { evalJsonPath, humanDuration, parseJsonPath };
import type { ResourceVector as Vec, Shortfall } from "../protocol/types.gen.ts";

export { NONE, age, crdColumn, ratio, formatRequests, type Column } from "../resources/columns.ts";
import { NONE, age, type Column } from "../resources/columns.ts";

export const OUTPUT_FORMATS = ["wide", "json", "yaml", "name"] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

// ---------------------------------------------------------------------------
// Alignment

// eslint-disable-next-line no-control-regex
const ANSI = /\x1b\[[0-9;]*m/g;
export const visibleWidth = (s: string) => s.replace(ANSI, "").length;

/**
 * Go's text/tabwriter in small: `\t` ends a cell; a column is aligned over each run of
 * consecutive lines that have a cell in it, padded to the widest cell plus `padding`.
 * Trailing cells (no tab after them) are never padded.
 */
export function tabwrite(lines: string[], padding = 2, minWidths: number[] = []): string[] {
  const cells = lines.map((l) => l.split("\t"));
  const width = cells.map((c) => new Array<number>(Math.max(0, c.length - 1)).fill(0));
  const format = (from: number, to: number, col: number): void => {
    let i = from;
    while (i < to) {
      if (cells[i].length - 1 <= col) {
        i++;
        continue;
      }
      let j = i;
      let w = (minWidths[col] ?? 0) - padding;
      while (j < to && cells[j].length - 1 > col) w = Math.max(w, visibleWidth(cells[j++][col]));
      for (let k = i; k < j; k++) width[k][col] = w + padding;
      format(i, j, col + 1);
      i = j;
    }
  };
  format(0, lines.length, 0);
  return cells.map((c, i) =>
    c
      .map((s, j) => (j < c.length - 1 ? s + " ".repeat(Math.max(0, width[i][j] - visibleWidth(s))) : s))
      .join("")
      .trimEnd(),
  );
}

/** A cell is one line: cut at its first newline, and tabs would break alignment. */
export const cellText = (s: string) => {
  const nl = s.indexOf("\n");
  return (nl >= 0 ? s.slice(0, nl) : s).replace(/\t/g, " ");
};

/** The columns shown: priority 0 always, priority 1 only with -o wide. */
export const visibleColumns = <T>(cols: Column<T>[], wide: boolean) => cols.filter((c) => c.priority === 0 || wide);

/** Rows as cells (already cut), headers first unless `noHeaders`. */
export function tableCells<T>(cols: Column<T>[], items: T[], now: Date, noHeaders = false): string[][] {
  const rows = items.map((o) => cols.map((c) => cellText(safeCell(c, o, now))));
  return noHeaders ? rows : [cols.map((c) => c.name.toUpperCase()), ...rows];
}

function safeCell<T>(c: Column<T>, o: T, now: Date): string {
  try {
    const v = c.cell(o, now);
    return v === "" ? NONE : v;
  } catch {
    return "<error>";
  }
}

/** Aligned lines; `minWidths` keeps later rows (a watch) in the columns of the first print. */
export function formatRows(rows: string[][], minWidths: number[] = []): string[] {
  return tabwrite(
    rows.map((r) => r.join("\t")),
    2,
    minWidths,
  );
}

/** Column widths (including padding) of a printed table, to keep later rows aligned with it. */
export function columnWidths(rows: string[][], padding = 2): number[] {
  const out: number[] = [];
  for (const r of rows) r.forEach((c, i) => (out[i] = Math.max(out[i] ?? 0, visibleWidth(c) + padding)));
  return out;
}

export function formatTable<T>(cols: Column<T>[], items: T[], now: Date): string {
  const lines = formatRows(tableCells(cols, items, now));
  return lines.map((l) => `${l}\n`).join("");
}

// ---------------------------------------------------------------------------
// -o json|yaml|name

/** The API's answer, untouched. */
export function formatObject(o: unknown, format: "json" | "yaml"): string {
  return format === "json" ? `${JSON.stringify(o, null, 2)}\n` : stringify(o, { lineWidth: 0 });
}

// ---------------------------------------------------------------------------
// Units

/**
 * `1536/6144Mi`, `1/4`; `<none>` when nothing is known. Millicores keep their `m` on both
 * sides (`1500m/4000m`): a bare 1500 would read as cores.
 */
/** One dimension with its unit, for headroom and shortfalls. */
export const DIMENSIONS = [
  { field: "cpu_millis", label: "CPU", unit: "m" },
  { field: "memory_mb", label: "MEM", unit: "Mi" },
  { field: "disk_mb", label: "DISK", unit: "Mi" },
  { field: "gpu_count", label: "GPU", unit: "" },
] as const;

/** `2026-01-02T03:04:05Z (5m ago)`, or `(in 30s)` for a time ahead. */
export function when(ts: unknown, now: Date): string {
  if (typeof ts !== "string" || !ts) return NONE;
  const t = Date.parse(ts);
  if (Number.isNaN(t)) return ts;
  return t > now.getTime() + 1000 ? `${ts} (in ${age(now.toISOString(), new Date(t))})` : `${ts} (${age(ts, now)} ago)`;
}

/** Every dimension, zeros included: a snapshot reads the same whatever it holds. */
export function formatVector(v: Vec | undefined): string {
  if (!v) return NONE;
  const parts = DIMENSIONS.map((d) => `${d.label.toLowerCase()}=${v[d.field] ?? 0}${d.unit}`);
  if (v.gpu_types?.length) parts.push(`gpu_types=${v.gpu_types.join("|")}`);
  return parts.join(",");
}

/** Every shortfall as `need/free` (`memory_mb 3072/2048`); a type set as `[need]/[have]`. */
export function formatShortfalls(s: Record<string, Shortfall> | undefined): string {
  if (!s) return NONE;
  const parts: string[] = [];
  for (const [field, x] of Object.entries(s)) {
    if (Array.isArray(x.available))
      parts.push(`${field} [${Array.isArray(x.requested) ? x.requested.join("|") : ""}]/[${x.available.join("|")}]`);
    else if (typeof x.requested === "number")
      parts.push(`${field} ${x.requested}/${Math.max(0, (x.capacity ?? 0) - (x.reserved ?? 0))}`);
  }
  return parts.length ? parts.join(", ") : NONE;
}

// ---------------------------------------------------------------------------
// describe

/**
 * kubectl's PrefixWriter: `write(level, "Key:\tvalue")`, two spaces a level; the output is
 * tab-aligned as a whole, so keys of one section line up.
 */
export class PrefixWriter {
  private readonly lines: string[] = [];
  write(level: number, text: string): void {
    for (const l of text.split("\n")) this.lines.push("  ".repeat(level) + l);
  }
  /** `Key:  value`, the value `<none>` when empty. */
  kv(level: number, key: string, value: unknown): void {
    const v =
      value === undefined || value === null || value === ""
        ? NONE
        : typeof value === "string"
          ? value
          : typeof value === "object"
            ? JSON.stringify(value)
            : String(value);
    this.write(level, `${key}:\t${cellText(v)}`);
  }
  /** A table under a section: headers in caps, rows aligned (`<none>` alone when empty). */
  table(level: number, headers: string[], rows: string[][]): void {
    if (!rows.length) return this.write(level, NONE);
    // Aligned here, with spaces: a table lines up on its own, not with the Key: lines around it.
    for (const l of formatRows([headers, ...rows.map((r) => r.map((c) => cellText(c || NONE)))])) this.write(level, l);
  }
  /** `Title:` and a table one level in, or `Title:  <none>` when there are no rows. */
  section(level: number, title: string, headers: string[], rows: string[][]): void {
    if (!rows.length) return this.kv(level, title, NONE);
    this.write(level, `${title}:`);
    this.table(level + 1, headers, rows);
  }
  toString(): string {
    return tabwrite(this.lines)
      .map((l) => `${l}\n`)
      .join("");
  }
}

/** Nested data as `key:  value` lines, objects indented one more level (a generic describer). */
export function writeNested(w: PrefixWriter, level: number, value: unknown): void {
  if (value === null || value === undefined) return;
  if (Array.isArray(value)) {
    for (const item of value) {
      if (item && typeof item === "object") {
        w.write(level, "-");
        writeNested(w, level + 1, item);
      } else w.write(level, `- ${String(item)}`);
    }
    return;
  }
  if (typeof value !== "object") return w.write(level, String(value));
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    if (v && typeof v === "object" && !(Array.isArray(v) && v.every((x) => typeof x !== "object"))) {
      if (Array.isArray(v) && v.length === 0) w.kv(level, k, "[]");
      else if (!Array.isArray(v) && Object.keys(v).length === 0) w.kv(level, k, "{}");
      else {
        w.write(level, `${k}:`);
        writeNested(w, level + 1, v);
      }
    } else w.kv(level, k, Array.isArray(v) ? v.join(", ") : v);
  }
}
