// 2. Claim cost, in-process: how long one claim takes as the queue deepens (1k vs 100k
// queued), as requirement shapes multiply (20 vs 10,000), and when those 10,000 shapes are
// spread over 100 Queue objects (quota checked on each lease, fair share across queues).
// The cost should follow none of them. "pick" is choosing the tasks (admission only, nothing written); "claim" is the
// whole Scheduler.claim (pick, durable lease write, informer update).
import { pickForWorker } from "../../src/scheduler/claim.ts";
import { cell, ratio } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { seeded, timeReps, workerName } from "../lib/seed.ts";
import { percentile } from "../lib/stats.ts";
import { parseClaim } from "../../src/protocol/parse.ts";

const LIMIT = 8;
const WORKERS = 10;

type Point = {
  label: string;
  tasks: number;
  shapes: number;
  queues: number;
  queueShapes: number;
  pick: number[];
  claim: number[];
};

/** Each point stops early (after at least 5 samples) once it has spent this long, so a slow claim cannot stretch the run for ever. */
const BUDGET_MS = 30_000;

async function measure(label: string, tasks: number, shapes: number, claims: number, queues = 0): Promise<Point> {
  const h = await seeded({ tasks, workers: WORKERS, shapes, queues });
  try {
    const w = h.cache.get("Worker", workerName(1))!;
    const pickOnce = () => void pickForWorker(h.scheduler.queue, h.scheduler.ctx, w, LIMIT);
    for (let i = 0; i < 3; i++) pickOnce(); // warm-up: the first calls pay for compilation
    const pick: number[] = [];
    const pickStart = performance.now();
    while (pick.length < Math.min(claims, 31) && (pick.length < 5 || performance.now() - pickStart < BUDGET_MS))
      pick.push(timeReps(pickOnce, 1)[0] / 1000);
    const claim: number[] = [];
    const claimStart = performance.now();
    for (let i = 0; i < claims && (i < 5 || performance.now() - claimStart < BUDGET_MS); i++) {
      // Workers 1-9 take turns (w0 is the GPU one), so no worker fills up.
      const t0 = process.hrtime.bigint();
      const r = await h.scheduler.claim(
        parseClaim({ worker_id: workerName(1 + (i % (WORKERS - 1))), limit: LIMIT, lease_seconds: 600 }),
      );
      claim.push(Number(process.hrtime.bigint() - t0) / 1e6);
      if (r.tasks.length !== LIMIT) throw new Error(`claim ${i} leased ${r.tasks.length} of ${LIMIT} tasks`);
    }
    if (queues && !h.scheduler.ctx.queues.active) throw new Error("the Queue objects were not seen by the scheduler");
    return { label, tasks, shapes, queues, queueShapes: h.scheduler.queue.shapeCount, pick, claim };
  } finally {
    await h.close();
  }
}

const row = (p: Point) => [
  p.label,
  p.tasks.toLocaleString("en"),
  String(p.queues || "-"),
  p.queueShapes.toLocaleString("en"),
  cell(percentile(p.pick, 50), "ms"),
  cell(percentile(p.pick, 99), "ms"),
  cell(percentile(p.claim, 50), "ms"),
  cell(percentile(p.claim, 99), "ms"),
  `${p.pick.length} / ${p.claim.length}`,
];
const ratioRow = (label: string, a: Point, b: Point) => [
  label,
  "",
  "",
  "",
  ratio(percentile(b.pick, 50), percentile(a.pick, 50)),
  ratio(percentile(b.pick, 99), percentile(a.pick, 99)),
  ratio(percentile(b.claim, 50), percentile(a.claim, 50)),
  ratio(percentile(b.claim, 99), percentile(a.claim, 99)),
  "",
];

export const claimCost: Scenario = {
  name: "claim",
  summary:
    "claim cost (pick and full claim of 8) at 1k vs 100k queued, 20 vs 10,000 requirement shapes, and 10,000 shapes over 100 queues",
  async run(o) {
    const q = o.quick;
    const claims = q ? 10 : 41;
    const [shallow, deep] = q ? [200, 2_000] : [1_000, 100_000];
    const [few, many] = q ? [5, 200] : [20, 10_000];
    const shapeDepth = q ? 1_000 : 20_000;
    const d1 = await measure(`${shallow.toLocaleString("en")} queued`, shallow, 10, claims);
    const d2 = await measure(`${deep.toLocaleString("en")} queued`, deep, 10, claims);
    const s1 = await measure(`${few} shapes`, shapeDepth, few, claims);
    const s2 = await measure(`${many.toLocaleString("en")} shapes`, shapeDepth, many, claims);
    const queues = 100;
    const s3 = await measure(`${many.toLocaleString("en")} shapes, ${queues} queues`, shapeDepth, many, claims, queues);
    return [
      {
        scenario: "claim",
        title: `claim cost, ${LIMIT} tasks per claim, ${WORKERS} workers, in-process (SQLite store)`,
        columns: [
          "queue",
          "queued",
          "queues",
          "shapes",
          "pick p50",
          "pick p99",
          "claim p50",
          "claim p99",
          "samples (pick / claim)",
        ],
        rows: [
          row(d1),
          row(d2),
          ratioRow(`ratio ${deep.toLocaleString("en")}/${shallow.toLocaleString("en")} queued`, d1, d2),
          row(s1),
          row(s2),
          ratioRow(`ratio ${many.toLocaleString("en")}/${few} shapes`, s1, s2),
          row(s3),
          ratioRow(`ratio ${queues} queues/none, ${many.toLocaleString("en")} shapes`, s2, s3),
        ],
        notes: [
          "target: claim p99 ≤ 10 ms with 10,000 shapes queued, with or without 100 queues; ratios near 1.0 mean cost independent of depth, shapes and queues",
          `the queues row: task i in queue i % ${queues} (so each queue holds ${many / queues} of the shapes), each Queue an equal share of the fleet as quota and as much again to borrow, weights 1-3; claims order by fair share, admission checks the quota and the store re-checks it on every lease`,
          `up to ${claims} claims and ${Math.min(claims, 31)} picks per row, fewer when a row passes ${BUDGET_MS / 1000} s (p99 of so few is close to the maximum); picks are on one worker after a warm-up, nothing written`,
        ],
      },
    ];
  },
};
