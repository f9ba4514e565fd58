// `npm run bench [-- scenario...] [--quick] [--no-write]`: Loom's benchmark suite. Each
// scenario is a module under bench/scenarios; with no names every scenario runs, in the
// order below. Figures are printed and written to BENCH.md (unless --no-write).
// Comparisons that matter are within one run (Loom against the floor server, 1k against
// 100k queued), because this machine is shared and absolute times drift.
import { execFileSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { join } from "node:path";
import { writeBenchMd } from "./lib/benchmd.ts";
import { ROOT } from "./lib/proc.ts";
import type { RunMeta } from "./lib/benchmd.ts";
import { combineRuns } from "./lib/combine.ts";
import { printTable, type Table } from "./lib/report.ts";
import type { RunOptions, Scenario } from "./lib/scenario.ts";
import { SCENARIO_NAMES } from "./lib/names.ts";
import { removeScaleDataDirs } from "./lib/scale.ts";
import { admissionScenario } from "./scenarios/admission.ts";
import { claimCost } from "./scenarios/claim-cost.ts";
import { coldStartScenario, rssScenario } from "./scenarios/coldstart.ts";
import { conditionsScenario } from "./scenarios/conditions.ts";
import { dispatchScenario } from "./scenarios/dispatch.ts";
import { lease, leaseWarm } from "./scenarios/lease.ts";
import { microScenario } from "./scenarios/micro.ts";
import { watchScenario } from "./scenarios/watch.ts";

const ALL: Scenario[] = [
  lease,
  leaseWarm,
  claimCost,
  dispatchScenario,
  admissionScenario,
  conditionsScenario,
  coldStartScenario,
  rssScenario,
  watchScenario,
  microScenario,
];
const SCENARIOS: Scenario[] = SCENARIO_NAMES.map((n) => {
  const s = ALL.find((x) => x.name === n);
  if (!s) throw new Error(`no scenario module named ${n}`);
  return s;
});

function usage(): string {
  return [
    "usage: npm run bench -- [scenario...] [--quick] [--no-write]",
    "",
    "scenarios (default: all, in this order):",
    ...SCENARIOS.map((s) => `  ${s.name.padEnd(12)} ${s.summary}`),
    "",
    "  --quick      every scenario at tiny sizes (checks the suite works; figures mean nothing)",
    "  --runs N     run each scenario N times in a row; each figure is the median of the N runs",
    "  --no-write   print only; leave BENCH.md alone",
  ].join("\n");
}

function parseArgs(argv: string[]): { names: string[]; quick: boolean; write: boolean; runs: number } {
  const names: string[] = [];
  let quick = false;
  let write = true;
  let runs = 1;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--quick") quick = true;
    else if (a === "--runs" || a.startsWith("--runs=")) {
      const v = a === "--runs" ? argv[++i] : a.slice("--runs=".length);
      runs = Number(v);
      if (!Number.isSafeInteger(runs) || runs < 1 || runs > 20) {
        console.error(`--runs: must be a whole number from 1 to 20, got ${JSON.stringify(v ?? "")}\n\n${usage()}`);
        process.exit(2);
      }
    } else if (a === "--no-write") write = false;
    else if (a === "--help" || a === "-h") {
      console.log(usage());
      process.exit(0);
    } else if (a.startsWith("-")) {
      console.error(`unknown option ${a}\n\n${usage()}`);
      process.exit(2);
    } else if (!SCENARIOS.some((s) => s.name === a)) {
      console.error(`unknown scenario "${a}"\n\n${usage()}`);
      process.exit(2);
    } else names.push(a);
  }
  return { names, quick, write, runs };
}

const gitCommit = () => {
  try {
    const sha = execFileSync("git", ["rev-parse", "--short=12", "HEAD"], { cwd: ROOT, encoding: "utf8" }).trim();
    const dirty =
      execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], { cwd: ROOT, encoding: "utf8" }).trim() !==
      "";
    return dirty ? `${sha}+changes` : sha;
  } catch {
    return "unknown";
  }
};

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const chosen = args.names.length ? SCENARIOS.filter((s) => args.names.includes(s.name)) : SCENARIOS;
  // hubArgs reach every `loom hub` the suite starts; the lease scenario adds the etcd
  // flags (--store etcd, --etcd-endpoints) for its rows on etcd.
  const opts: RunOptions = { quick: args.quick, hubArgs: [] };
  const meta: RunMeta = {
    commit: gitCommit(),
    date: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
    cores: cpus().length,
    cpuModel: cpus()[0]?.model.trim() ?? "unknown",
    node: process.version,
    quick: args.quick,
  };
  console.log(
    `Loom benchmarks: ${chosen.map((s) => s.name).join(", ")}${args.quick ? " (quick)" : ""}; commit ${meta.commit}, ${meta.cores} cores, node ${meta.node}`,
  );
  const fresh = new Map<string, { tables: Table[]; meta: RunMeta }>();
  try {
    for (const s of chosen) {
      const t0 = Date.now();
      const runs: Table[][] = [];
      for (let k = 1; k <= args.runs; k++) {
        if (args.runs > 1) console.log(`\n-- ${s.name}: run ${k} of ${args.runs}`);
        const tables = await s.run(opts);
        for (const t of tables) printTable(t);
        runs.push(tables);
      }
      const tables = combineRuns(runs);
      if (args.runs > 1) for (const t of tables) printTable(t);
      const load = loadavg()[0];
      console.log(`   (${s.name} took ${((Date.now() - t0) / 1000).toFixed(1)} s; load average ${load.toFixed(1)})`);
      fresh.set(s.name, { tables, meta: { ...meta, load } });
    }
  } finally {
    await removeScaleDataDirs();
  }
  if (args.write) {
    writeBenchMd(
      join(ROOT, "BENCH.md"),
      SCENARIOS.map((s) => s.name),
      fresh,
    );
    console.log(`\nwrote ${join(ROOT, "BENCH.md")}`);
  }
}

await main();
