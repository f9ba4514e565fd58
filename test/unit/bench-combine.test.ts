// `npm run bench -- --runs N`: N runs of a scenario become one table whose figures are the
// medians of the runs, each run's own figure beside it.
import { describe, expect, it } from "vitest";
import { combineCell, combineRuns, parseFigure } from "../../bench/lib/combine.ts";
import type { Table } from "../../bench/lib/report.ts";

const lease = (leases: string, ratio: string, p99: string, note: string): Table => ({
  scenario: "lease",
  title: "lease throughput",
  columns: ["server", "leases/s", "claim p99"],
  rows: [
    ["floor", "4,000", "14.0 ms"],
    ["Loom", leases, p99],
    ["ratio Loom/floor", ratio, ""],
  ],
  notes: ["targets: the same in every run", note],
});

describe("bench --runs", () => {
  it("reads the figures the report prints, and leaves text alone", () => {
    expect(parseFigure("1,450")).toEqual({ value: 1450, unit: "" });
    expect(parseFigure("0.35×")).toEqual({ value: 0.35, unit: "×" });
    expect(parseFigure("15.0 ms")).toEqual({ value: 15, unit: " ms" });
    expect(parseFigure("34.8 KiB")).toEqual({ value: 34.8, unit: " KiB" });
    expect(parseFigure("n/a")).toBeUndefined();
    expect(parseFigure("not within 150 s")).toBeUndefined();
    expect(parseFigure("2.46 ms / 23.0 ms (2,701 claims, 0 failed)")).toBeUndefined();
  });

  it("gives each figure's median, then every run's figure in run order", () => {
    expect(combineCell(["0.22×", "0.29×", "0.22×"])).toBe("0.22× (0.22×, 0.29×, 0.22×)");
    expect(combineCell(["88.1 ms", "106.4 ms", "92.0 ms"])).toBe("92.0 ms (88.1 ms, 106.4 ms, 92.0 ms)");
    expect(combineCell(["1,450", "1,206", "1,300"])).toBe("1,300 (1,450, 1,206, 1,300)");
    // An even count takes the lower middle figure: one a run measured.
    expect(combineCell(["10.0 ms", "30.0 ms"])).toBe("10.0 ms (10.0 ms, 30.0 ms)");
    // The same text in every run stays; differing text, or figures in different units, are listed.
    expect(combineCell(["", "", ""])).toBe("");
    expect(combineCell(["n/a", "1.00 ms"])).toBe("n/a; 1.00 ms");
    expect(combineCell(["1.00 s", "900 ms"])).toBe("1.00 s; 900 ms");
  });

  it("combines whole tables and their notes, and refuses runs whose tables differ in shape", () => {
    const runs = [
      [lease("1,450", "0.35×", "88.1 ms", "races: 1.0")],
      [lease("1,206", "0.30×", "106.4 ms", "races: 2.0")],
      [lease("1,300", "0.33×", "92.0 ms", "races: 1.0")],
    ];
    const [t] = combineRuns(runs);
    expect(t.title).toBe("lease throughput, median of 3 runs");
    expect(t.rows).toEqual([
      ["floor", "4,000", "14.0 ms"],
      ["Loom", "1,300 (1,450, 1,206, 1,300)", "92.0 ms (88.1 ms, 106.4 ms, 92.0 ms)"],
      ["ratio Loom/floor", "0.33× (0.35×, 0.30×, 0.33×)", ""],
    ]);
    expect(t.notes?.[0]).toMatch(/median of 3 runs/);
    // A note that differs only in its numbers is kept once, each differing number as a median and every run's.
    expect(t.notes?.slice(1)).toEqual(["targets: the same in every run", "races: 1.0 (1.0, 2.0, 1.0)"]);
    expect(combineRuns([runs[0]])).toBe(runs[0]);

    const missingRow = { ...runs[1][0], rows: runs[1][0].rows.slice(0, 2) };
    expect(() => combineRuns([runs[0], [missingRow]])).toThrow(/differs in shape/);
    const relabelled = { ...runs[1][0], rows: [["etcd", "1", "1.00 ms"], ...runs[1][0].rows.slice(1)] };
    expect(() => combineRuns([runs[0], [relabelled]])).toThrow(/differs in shape/);
    expect(() => combineRuns([runs[0], []])).toThrow(/printed 0 tables/);
  });

  it("merges notes that differ only in their numbers, and lists the others run by run", () => {
    const note = (races: string, commits: string, extra = ""): Table => ({
      ...lease("1", "1.00×", "1.00 ms", ""),
      notes: [
        `lost races per 1,000 claims: SQLite 0.0, three replicas ${races}`,
        `commits per lease: SQLite ${commits} (11.7 writes each)${extra}`,
      ],
    });
    const [t] = combineRuns([[note("77.6", "0.20")], [note("84.1", "0.21")], [note("89.8", "0.20")]]);
    expect(t.notes?.slice(1)).toEqual([
      "lost races per 1,000 claims: SQLite 0.0, three replicas 84.1 (77.6, 84.1, 89.8)",
      "commits per lease: SQLite 0.20 (0.20, 0.21, 0.20) (11.7 writes each)",
    ]);
    // Thousands separators are read as one number; other text that differs keeps every run's note.
    const [u] = combineRuns([[note("1,200", "1")], [note("900", "1", "; slow")]]);
    expect(u.notes?.slice(1)).toEqual([
      "lost races per 1,000 claims: SQLite 0.0, three replicas 900 (1,200, 900)",
      "run 1: commits per lease: SQLite 1 (11.7 writes each)",
      "run 2: commits per lease: SQLite 1 (11.7 writes each); slow",
    ]);
  });

  it("combines a row whose first cell is a figure rather than a label", () => {
    const run = (rate: string, pause: string): Table => ({
      scenario: "micro",
      title: "steady writes",
      columns: ["writes/s", "rounds", "longest pause"],
      rows: [[rate, "1", pause]],
    });
    const [t] = combineRuns([[run("8,581", "7.93 ms")], [run("8,775", "7.65 ms")], [run("6,014", "12.8 ms")]]);
    expect(t.rows).toEqual([["8,581 (8,581, 8,775, 6,014)", "1", "7.93 ms (7.93 ms, 7.65 ms, 12.8 ms)"]]);
  });
});
