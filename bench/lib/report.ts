// What a scenario hands back: one table of rows, printed at once and later written to
// BENCH.md. Cells are strings already formatted; `notes` say how to read the table.
import { fmt } from "./stats.ts";

export type Table = { scenario: string; title: string; columns: string[]; rows: string[][]; notes?: string[] };

export type Sizes = { quick: boolean };

export function printTable(t: Table): void {
  const widths = t.columns.map((c, i) => Math.max(c.length, ...t.rows.map((r) => (r[i] ?? "").length)));
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ");
  console.log(`\n== ${t.scenario}: ${t.title}`);
  console.log(line(t.columns));
  for (const r of t.rows) console.log(line(r));
  for (const n of t.notes ?? []) console.log(`   ${n}`);
}

export const cell = (v: number, unit = "") => fmt(v, unit);
export const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : "n/a");
