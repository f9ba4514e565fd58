// BENCH.md rewriting: a run replaces the blocks of the scenarios it ran, keeps the other
// blocks and everything hand-written after the generated section.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { GENERATED_END, parseBlocks, writeBenchMd, type RunMeta } from "../../bench/lib/benchmd.ts";
import type { Table } from "../../bench/lib/report.ts";

const meta = (commit: string): RunMeta => ({
  commit,
  date: "2026-01-01T00:00:00Z",
  cores: 2,
  cpuModel: "cpu",
  node: "v20",
  quick: false,
});
const table = (scenario: string, figure: string): Table => ({
  scenario,
  title: `${scenario} table`,
  columns: ["what", "value"],
  rows: [["x", figure]],
});
const order = ["lease", "claim", "rss"];

describe("BENCH.md writer", () => {
  it("replaces only the scenarios run, in suite order, and keeps the hand-written section", () => {
    const path = join(mkdtempSync(join(tmpdir(), "benchmd-")), "BENCH.md");
    writeBenchMd(
      path,
      order,
      new Map([
        ["rss", { tables: [table("rss", "100 MB")], meta: meta("aaa") }],
        ["lease", { tables: [table("lease", "500")], meta: meta("aaa") }],
      ]),
    );
    const first = readFileSync(path, "utf8");
    expect(first).toMatch(/## What each change bought/);
    // An operator writes a before/after line by hand.
    writeFileSync(path, `${first}\n- group commit: leases/s 0.42 → 0.81 of the floor\n`);

    writeBenchMd(
      path,
      order,
      new Map([
        ["lease", { tables: [table("lease", "900")], meta: meta("bbb") }],
        ["claim", { tables: [table("claim", "3 ms")], meta: { ...meta("bbb"), load: 7.25 } }],
      ]),
    );
    const text = readFileSync(path, "utf8");
    const blocks = parseBlocks(text);
    expect([...blocks.keys()]).toEqual(["lease", "claim", "rss"]);
    expect(blocks.get("lease")).toMatch(/\| x \| 900 \|/);
    expect(blocks.get("lease")).toMatch(/Commit `bbb`/);
    expect(blocks.get("lease")).not.toMatch(/\| 500 \|/);
    expect(blocks.get("rss")).toMatch(/Commit `aaa`[\s\S]*\| x \| 100 MB \|/);
    expect(blocks.get("claim")).toMatch(/load average 7\.3 at the end/);
    expect(text.slice(text.indexOf(GENERATED_END))).toMatch(/group commit: leases\/s 0\.42 → 0\.81 of the floor/);
    expect(text.split("## What each change bought").length).toBe(2);
  });

  it("escapes pipes inside cells", () => {
    const path = join(mkdtempSync(join(tmpdir(), "benchmd-")), "BENCH.md");
    writeBenchMd(path, order, new Map([["claim", { tables: [table("claim", "a|b")], meta: meta("ccc") }]]));
    expect(readFileSync(path, "utf8")).toMatch(/\| x \| a\\\|b \|/);
  });
});
