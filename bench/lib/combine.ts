// Several runs of one scenario as one table (`npm run bench -- --runs N`). This machine is
// shared, and one run's figures move by 10-20% from one run to the next, so a target is
// judged on the median of several runs. Each run is the whole scenario, so a ratio cell
// (Loom against the floor) is still taken within one run; the combined cell is the median
// of those ratios, and every run's own figure stays beside it.
import { fmt, median } from "./stats.ts";
import type { Table } from "./report.ts";

/** A formatted figure: "1,450", "15.0 ms", "34.8 KiB", "0.35×". Anything else is text. */
type Figure = { value: number; unit: string };

const FIGURE = /^(-?\d[\d,]*(?:\.\d+)?)(×| [^\d\s(][^\s(]*)?$/;

export function parseFigure(cell: string): Figure | undefined {
  const m = FIGURE.exec(cell.trim());
  if (!m) return undefined;
  const value = Number(m[1].replaceAll(",", ""));
  return Number.isFinite(value) ? { value, unit: m[2] ?? "" } : undefined;
}

function formatFigure(f: Figure): string {
  if (f.unit === "×") return `${f.value.toFixed(2)}×`;
  return fmt(f.value, f.unit.trim());
}

/**
 * One cell from the same cell of every run. Figures of one unit give their median (with an
 * even count, the lower of the middle two: a figure some run measured), followed by each
 * run's figure in run order. Text that every run printed alike stays as it is; text that
 * differs is every run's, in order, separated by semicolons.
 */
export function combineCell(cells: string[]): string {
  if (cells.every((c) => c === cells[0])) return cells[0];
  const figures = cells.map(parseFigure);
  const unit = figures[0]?.unit;
  if (figures.every((f) => f !== undefined && f.unit === unit)) {
    const m = median(figures.map((f) => f!.value));
    return `${formatFigure({ value: m, unit: unit! })} (${cells.join(", ")})`;
  }
  return cells.join("; ");
}

/** A row's label: its first cell, unless that is a figure (a table of one row of figures has none). */
const rowLabel = (r: string[]) => (parseFigure(r[0] ?? "") ? "" : (r[0] ?? ""));

/**
 * The tables of `runs` (each one run of the same scenario) as one set of tables, cell by
 * cell (combineCell). The runs must have printed the same tables, with the same columns and
 * the same row labels (a row's first cell, when it is not a figure) in the same order;
 * anything else is an error, not a guess.
 */
export function combineRuns(runs: Table[][]): Table[] {
  if (runs.length === 0) throw new Error("combineRuns: no runs");
  if (runs.length === 1) return runs[0];
  const [first, ...rest] = runs;
  for (const [i, tables] of rest.entries()) {
    if (tables.length !== first.length)
      throw new Error(`run ${i + 2} printed ${tables.length} tables, run 1 printed ${first.length}`);
    for (const [j, t] of tables.entries()) {
      const f = first[j];
      const same =
        t.title === f.title &&
        t.columns.join("\u0000") === f.columns.join("\u0000") &&
        t.rows.length === f.rows.length &&
        t.rows.every((r, k) => rowLabel(r) === rowLabel(f.rows[k]) && r.length === f.rows[k].length);
      if (!same) throw new Error(`run ${i + 2}'s table "${t.title}" differs in shape from run 1's "${f.title}"`);
    }
  }
  return first.map((f, j) => {
    const tables = runs.map((r) => r[j]);
    const rows = f.rows.map((row, k) =>
      row.map((cell, c) => (c === 0 && rowLabel(row) ? cell : combineCell(tables.map((t) => t.rows[k][c])))),
    );
    return {
      scenario: f.scenario,
      title: `${f.title}, median of ${runs.length} runs`,
      columns: f.columns,
      rows,
      notes: [
        `each figure is the median of ${runs.length} runs of the whole scenario, one after another (with an even count, the lower middle one), followed by each run's own figure in run order; a ratio is taken within each run, then its median`,
        ...combineNotes(tables.map((t) => t.notes ?? [])),
      ],
    };
  });
}

/** A number in a note's text: "79.2", "1,450", "0.21". */
const NUMBER = /-?\d[\d,]*(?:\.\d+)?/g;

/**
 * Notes every run wrote alike are kept once. A note whose runs differ only in their numbers
 * is kept once too, each number that differs given as its median (with an even count, the
 * lower middle one: a number some run printed) followed by every run's, in run order. Any
 * other difference gives the note once per run.
 */
function combineNotes(notes: string[][]): string[] {
  const longest = Math.max(...notes.map((n) => n.length));
  const out: string[] = [];
  for (let i = 0; i < longest; i++) {
    const each = notes.map((n) => n[i]);
    if (each.every((n) => n === each[0])) {
      if (each[0] !== undefined) out.push(each[0]);
      continue;
    }
    const merged = each.every((n) => n !== undefined) ? mergeNumbers(each) : undefined;
    if (merged !== undefined) out.push(merged);
    else each.forEach((n, r) => n !== undefined && out.push(`run ${r + 1}: ${n}`));
  }
  return out;
}

/** The notes as one, when they are the same text around their numbers; undefined otherwise. */
function mergeNumbers(notes: string[]): string | undefined {
  const text = notes.map((n) => n.split(NUMBER));
  if (text.some((t) => t.join("\u0000") !== text[0].join("\u0000"))) return undefined;
  const numbers = notes.map((n) => n.match(NUMBER) ?? []);
  return text[0]
    .map((between, k) => {
      if (k >= numbers[0].length) return between;
      const each = numbers.map((ns) => ns[k]);
      if (each.every((x) => x === each[0])) return between + each[0];
      const m = median(each.map((x) => Number(x.replaceAll(",", ""))));
      const mid = each.find((x) => Number(x.replaceAll(",", "")) === m)!;
      return `${between}${mid} (${each.join(", ")})`;
    })
    .join("");
}
