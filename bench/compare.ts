// Two versions of Loom compared on a lease's work inside the Hub (lib/hub-work.ts):
// `npm run bench:compare -- A [B]`, where A and B are commits and B defaults to the working
// tree ("."). Each pair starts one run of each version at the same moment, so whatever else
// the machine is doing falls on both: on a shared machine, runs one after another differ by
// more than most changes do, and two runs started together do not. The run started second
// comes out a few percent cheaper, so which version starts first alternates from pair to
// pair. Prints each pair's CPU and event-loop time per lease, their ratios B/A, and the
// median ratios.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "./lib/proc.ts";
import { median } from "./lib/stats.ts";
import type { HubWork } from "./lib/hub-work.ts";

const SCRIPT = join("bench", "procs", "hub-work.ts");

type Options = { revs: [string, string]; pairs: number; tasks: number };

function usage(): string {
  return [
    "usage: npm run bench:compare -- A [B] [--pairs N] [--tasks N] [--quick]",
    "  A, B     commits (anything git rev-parse takes); B defaults to the working tree, written .",
    "  --pairs  pairs of runs, default 8",
    "  --tasks  noop tasks leased in each run, default 8000",
    "  --quick  one pair of 200 tasks: checks that both versions run, says nothing about speed",
  ].join("\n");
}

function parseArgs(argv: string[]): Options {
  const revs: string[] = [];
  let pairs = 8;
  let tasks = 8000;
  const count = (flag: string, v: string | undefined) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < 1)
      throw new Error(`${flag} must be a positive whole number, got ${v ?? "nothing"}`);
    return n;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--pairs") pairs = count(a, argv[++i]);
    else if (a === "--tasks") tasks = count(a, argv[++i]);
    else if (a === "--quick") [pairs, tasks] = [1, 200];
    else if (a === "-h" || a === "--help") {
      console.log(usage());
      process.exit(0);
    } else if (a.startsWith("-")) throw new Error(`unknown option ${a}`);
    else revs.push(a);
  }
  if (revs.length < 1 || revs.length > 2) throw new Error("give one or two versions to compare");
  return { revs: [revs[0], revs[1] ?? "."], pairs, tasks };
}

type Tree = { label: string; dir: string; remove: () => void };

/** A version's source tree: the working tree for ".", else a detached worktree of the commit sharing node_modules. */
function treeOf(rev: string): Tree {
  if (rev === ".") return { label: "working tree", dir: ROOT, remove: () => {} };
  const git = (...args: string[]) => execFileSync("git", ["-C", ROOT, ...args], { encoding: "utf8" }).trim();
  let sha: string;
  try {
    sha = git("rev-parse", "--verify", "--quiet", `${rev}^{commit}`);
  } catch {
    throw new Error(`${rev} names no commit of this repository`);
  }
  const dir = mkdtempSync(join(tmpdir(), `loom-compare-${sha.slice(0, 7)}-`));
  git("worktree", "add", "--detach", dir, sha);
  const remove = () => {
    git("worktree", "remove", "--force", dir);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (!existsSync(join(dir, SCRIPT)))
      throw new Error(`${rev} (${sha.slice(0, 7)}) has no ${SCRIPT}: it predates the Hub-work measurement`);
    symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"), "dir");
    return { label: `${sha.slice(0, 7)} ${git("log", "-1", "--format=%s", sha).slice(0, 60)}`, dir, remove };
  } catch (e) {
    remove();
    throw e;
  }
}

/** One run of the Hub-work measurement from `tree`, in a process of its own. */
function runOnce(tree: Tree, tasks: number): Promise<HubWork> {
  const cfg = { tasks, runners: 32, claimLimit: 4 };
  const child = spawn(process.execPath, ["--import", "tsx", join(tree.dir, SCRIPT)], {
    cwd: tree.dir,
    env: { ...process.env, LOOM_BENCH_HUB_WORK: JSON.stringify(cfg) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.setEncoding("utf8").on("data", (d: string) => (out += d));
  child.stderr.setEncoding("utf8").on("data", (d: string) => (err += d));
  return new Promise((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      const m = /^RESULT (.*)$/m.exec(out);
      if (code === 0 && m) resolve(JSON.parse(m[1]) as HubWork);
      else reject(new Error(`${tree.label}: the run exited ${code}\n${err.slice(-2000)}`));
    });
  });
}

const perLease = (r: HubWork) => ({ cpu: (r.userUs + r.systemUs) / r.leases, busy: r.loopBusyUs / r.leases });
const us = (n: number) => `${n.toFixed(0)} µs`;
const x = (n: number) => n.toFixed(3);

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const trees: Tree[] = [];
  try {
    for (const rev of o.revs) trees.push(treeOf(rev));
    const [a, b] = trees;
    console.log(`A: ${a.label}\nB: ${b.label}\n${o.pairs} pairs, ${o.tasks} tasks a run\n`);
    console.log(
      ["pair", "first", "A CPU/lease", "B CPU/lease", "B/A", "A loop/lease", "B loop/lease", "B/A"].join("  "),
    );
    const cpu: number[] = [];
    const busy: number[] = [];
    for (let i = 0; i < o.pairs; i++) {
      const [first, second] = i % 2 === 0 ? [a, b] : [b, a];
      const one = runOnce(first, o.tasks);
      await new Promise((r) => setTimeout(r, 50));
      const [r1, r2] = await Promise.all([one, runOnce(second, o.tasks)]);
      const [ra, rb] = (first === a ? [r1, r2] : [r2, r1]).map(perLease);
      cpu.push(rb.cpu / ra.cpu);
      busy.push(rb.busy / ra.busy);
      const row = [String(i + 1), first === a ? "A" : "B", us(ra.cpu), us(rb.cpu), x(rb.cpu / ra.cpu)];
      console.log([...row, us(ra.busy), us(rb.busy), x(rb.busy / ra.busy)].join("  "));
    }
    const span = (v: number[]) => `${x(Math.min(...v))}-${x(Math.max(...v))}`;
    console.log(
      `\nmedian B/A: CPU per lease ${x(median(cpu))} (${span(cpu)}), event loop per lease ${x(median(busy))} (${span(busy)})`,
    );
  } finally {
    for (const t of trees) t.remove();
  }
}

main().catch((e: Error) => {
  console.error(`bench:compare: ${e.message}\n\n${usage()}`);
  process.exit(1);
});
