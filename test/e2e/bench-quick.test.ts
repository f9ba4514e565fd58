// The benchmark suite works end to end: `npm run bench -- --quick --no-write` runs every
// scenario at tiny sizes (real Hub child processes, the floor server, load generator,
// watchers, probe) and prints each scenario's table. Figures are not asserted: speed is
// what the suite measures, not what a test checks.
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { SCENARIO_NAMES } from "../../bench/lib/names.ts";

const ROOT = join(import.meta.dirname, "..", "..");

/** One of bench/'s scripts, run to the end with `args`. */
const benchScript = (script: string, args: string[], timeout: number) =>
  spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "bench", script), ...args], {
    cwd: ROOT,
    encoding: "utf8",
    timeout,
  });

/** Tables printed under "== name: title", as lists of rows (cells split on 2+ spaces). */
function tablesOf(out: string): Map<string, string[][][]> {
  const tables = new Map<string, string[][][]>();
  const lines = out.split("\n");
  for (let i = 0; i < lines.length; i++) {
    const m = /^== (\S+): /.exec(lines[i]);
    if (!m) continue;
    const rows: string[][] = [];
    for (let j = i + 2; j < lines.length && lines[j] && !lines[j].startsWith(" ") && !lines[j].startsWith("=="); j++)
      rows.push(lines[j].split(/\s{2,}/));
    tables.set(m[1], [...(tables.get(m[1]) ?? []), rows]);
  }
  return tables;
}

describe("npm run bench -- --quick", () => {
  it("runs every scenario and prints its rows", () => {
    const r = spawnSync(process.execPath, ["--import", "tsx", join(ROOT, "bench", "run.ts"), "--quick", "--no-write"], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 420_000,
    });
    expect(r.stderr, r.stdout).not.toMatch(/Error/);
    expect(r.status, r.stderr).toBe(0);
    const tables = tablesOf(r.stdout);
    expect([...tables.keys()].sort()).toEqual([...SCENARIO_NAMES].sort());
    for (const [name, ts] of tables) {
      for (const rows of ts) {
        expect(rows.length, `${name} printed a table with no rows`).toBeGreaterThan(0);
        for (const row of rows) expect(row.join(" "), `${name}: a figure is missing`).not.toMatch(/\bNaN\b|undefined/);
      }
    }
    expect(r.stdout).not.toMatch(/wrote .*BENCH\.md/);
  }, 480_000);

  it("--runs 2 runs a scenario twice and prints each figure's median beside both runs' figures", () => {
    const run = (...args: string[]) => benchScript("run.ts", args, 120_000);
    const r = run("micro", "--quick", "--runs", "2", "--no-write");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout.match(/^-- micro: run \d of 2$/gm)).toEqual(["-- micro: run 1 of 2", "-- micro: run 2 of 2"]);
    // Each run's tables, then the combined ones: the last third.
    const all = tablesOf(r.stdout).get("micro")!;
    const third = all.length / 3;
    /** A cell of table `t` in run 1, run 2 and the combined tables, found by its row's label. */
    const cells = (t: number, label: (row: string[]) => boolean, col: number) =>
      [0, 1, 2].map((k) => all[k * third + t].find(label)?.[col]);
    const figure = /^[\d.,]+ µs$/;
    const combinedFigure = /^[\d.,]+ µs \([\d.,]+ µs, [\d.,]+ µs\)$/;
    // A figure two runs measured alike stays as it is (combineCell); otherwise its median and both runs'.
    const combinedFrom = ([a, b, combined]: (string | undefined)[]) => {
      expect(a).toMatch(figure);
      expect(b).toMatch(figure);
      if (a === b) expect(combined).toBe(a);
      else expect(combined).toMatch(combinedFigure);
      if (a !== b) expect(combined).toContain(`(${a}, ${b})`);
    };
    combinedFrom(cells(0, (row) => row[0].startsWith("admit()"), 1));
    // The Hub's work per lease without HTTP: its one quick run's row, combined the same way.
    combinedFrom(cells(2, (row) => row[0] === "run 1", 2));
    expect(r.stdout).toMatch(/in-process, median of 2 runs/);

    const bad = run("micro", "--runs", "0", "--no-write");
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--runs: must be a whole number from 1 to 20, got "0"/);
  }, 150_000);

  it("bench:compare --quick runs a commit and the working tree side by side, prints their ratios and removes its worktree", () => {
    const compare = (...args: string[]) => benchScript("compare.ts", args, 180_000);
    const r = compare("HEAD", "--quick");
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^A: [0-9a-f]{7} \S/m);
    expect(r.stdout).toMatch(/^B: working tree$/m);
    // The format, not the figures: a quick pair on a busy machine can differ tenfold.
    expect(r.stdout).toMatch(/^1 {2}A {2}\d+ µs {2}\d+ µs {2}\d+\.\d{3} {2}\d+ µs {2}\d+ µs {2}\d+\.\d{3}$/m);
    expect(r.stdout).toMatch(/^median B\/A: CPU per lease \d+\.\d{3} \(/m);
    const worktrees = spawnSync("git", ["-C", ROOT, "worktree", "list"], { encoding: "utf8" }).stdout;
    expect(worktrees).not.toMatch(/loom-compare-/);

    const bad = compare("HEAD", "--pairs", "0");
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/--pairs must be a positive whole number, got 0/);
    expect(compare().stderr).toMatch(/give one or two versions to compare/);
    expect(compare("no-such-commit").stderr).toMatch(/no-such-commit names no commit of this repository/);
  }, 200_000);
});
