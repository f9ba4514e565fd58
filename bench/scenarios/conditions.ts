// 5. The conditions pass and event-loop stalls.
// (a) In-process: one AdmissionConditions pass over the queue and the fleet, first (it
//     writes every task's conditions) and in steady state (it should write nothing), with
//     the longest event-loop delay during each (perf_hooks.monitorEventLoopDelay): a pass
//     that never yields shows up as one delay as long as itself.
// (b) A Hub child on the scale data dir: its workers go live at once (and heartbeat every
//     30 s), and the conditions converge over every queued task. A probe process pings /api/healthz every 5 ms the
//     whole time; the longest gap between two answers is the longest stall a client saw.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { AdmissionConditions } from "../../src/reconciler/admission-conditions.ts";
import { JsonClient } from "../lib/http.ts";
import { startHub, stopHub, waitQuiet } from "../lib/hub.ts";
import { HEARTBEAT_EVERY_MS, scaleSizes } from "../lib/hubscale.ts";
import { resultOf, rssMb, spawnScript, stop } from "../lib/proc.ts";
import { cell } from "../lib/report.ts";
import { heartbeatAll, keepHeartbeating, scaleDataDir } from "../lib/scale.ts";
import type { Scenario } from "../lib/scenario.ts";
import { seeded, workerName } from "../lib/seed.ts";
import { median } from "../lib/stats.ts";

async function inProcessPass(tasks: number, workers: number): Promise<string[][]> {
  const h = await seeded({ tasks, workers, shapes: 10 });
  try {
    const ac = new AdmissionConditions(h.scheduler.controllers, {
      minIntervalMs: 0,
      refreshMs: 3_600_000,
      maxWritesPerPass: tasks,
    });
    const loop = monitorEventLoopDelay({ resolution: 1 });
    loop.enable();
    let t0 = performance.now();
    await ac.pass();
    const first = performance.now() - t0;
    const firstStall = loop.max / 1e6;
    const firstWrites = ac.writes;
    await h.cache.waitForRevision(await h.store.revision());
    const xs: number[] = [];
    loop.reset();
    for (let i = 0; i < 5; i++) {
      t0 = performance.now();
      await ac.pass();
      xs.push(performance.now() - t0);
    }
    const steadyStall = loop.max / 1e6;
    loop.disable();
    const label = `${tasks.toLocaleString("en")} queued × ${workers.toLocaleString("en")} workers`;
    return [
      [`pass, ${label}, first`, cell(first, "ms"), firstWrites.toLocaleString("en"), cell(firstStall, "ms")],
      [
        `pass, ${label}, steady state (median of 5)`,
        cell(median(xs), "ms"),
        (ac.writes - firstWrites).toLocaleString("en"),
        cell(steadyStall, "ms"),
      ],
    ];
  } finally {
    await h.close();
  }
}

async function stalls(o: Parameters<Scenario["run"]>[0], tasks: number, workers: number) {
  const dir = await scaleDataDir(tasks, workers);
  const hub = await startHub(dir, o.hubArgs, 600_000);
  // The claiming worker's heartbeat comes first, so it claims from the start of the convergence.
  await heartbeatAll(hub.url, 1);
  const probe = spawnScript("procs/probe.ts", {
    LOOM_BENCH_URL: hub.url,
    LOOM_BENCH_PROBE_MS: "5",
    LOOM_BENCH_PROBE_WORKER: workerName(0),
    LOOM_BENCH_CLAIM_MS: "20",
    LOOM_BENCH_CLAIM_FOR_MS: String(claimForS(o.quick) * 1000),
  });
  let beats: ReturnType<typeof keepHeartbeating> | undefined;
  try {
    const t0 = Date.now();
    await heartbeatAll(hub.url, workers);
    beats = keepHeartbeating(hub.url, workers, HEARTBEAT_EVERY_MS);
    const c = new JsonClient(hub.url);
    // A pass writes a bounded batch, then rests three times as long as it worked (about 2 s
    // here), so a shorter silence can fall between two batches of one backlog.
    const quietMs = o.quick ? 500 : 10_000;
    const quiet = await waitQuiet(c, quietMs, o.quick ? 30_000 : 600_000);
    c.close();
    const convergedS = (Date.now() - t0 - quietMs) / 1000;
    const rss = rssMb(hub.pid);
    probe.proc.stdin!.write("stop\n");
    const r = await resultOf<{
      probes: number;
      failures: number;
      longestGapMs: number;
      p50: number;
      p99: number;
      max: number;
      claims: number;
      claimFailures: number;
      claimP50: number;
      claimP99: number;
    }>(probe, 30_000);
    return { ...r, quiet, convergedS, rss };
  } finally {
    await beats?.stop();
    await stop(probe);
    await stopHub(hub, { keepData: true });
  }
}

/** How long the probe claims, from the first heartbeat (then the Hub may fall quiet). */
const claimForS = (quick: boolean) => (quick ? 5 : 60);

export const conditionsScenario: Scenario = {
  name: "conditions",
  summary: "the admission-conditions pass in-process, and the longest Hub stall while 200k × 2k conditions converge",
  async run(o) {
    const pass = o.quick ? await inProcessPass(500, 10) : await inProcessPass(100_000, 1_000);
    const { tasks, workers } = scaleSizes(o.quick);
    const s = await stalls(o, tasks, workers);
    return [
      {
        scenario: "conditions",
        title: "admission-conditions pass, in-process (SQLite store)",
        columns: ["pass", "time", "writes", "longest event-loop delay"],
        rows: pass,
      },
      {
        scenario: "conditions",
        title: `stalls while conditions converge, ${tasks.toLocaleString("en")} queued × ${workers.toLocaleString("en")} workers going live, \`loom hub\` child`,
        columns: ["measure", "value"],
        rows: [
          ["longest gap between healthz answers (probe every 5 ms)", cell(s.longestGapMs, "ms")],
          ["healthz p50 / p99", `${cell(s.p50, "ms")} / ${cell(s.p99, "ms")}`],
          [
            `claims by one worker (limit 1, every 20 ms, the first ${claimForS(o.quick)} s), p50 / p99`,
            `${cell(s.claimP50, "ms")} / ${cell(s.claimP99, "ms")} (${s.claims.toLocaleString("en")} claims, ${s.claimFailures} failed)`,
          ],
          ["probes (failed)", `${s.probes.toLocaleString("en")} (${s.failures})`],
          [
            "first heartbeat → last write of the convergence",
            s.quiet.settled ? cell(s.convergedS, "s") : `not quiet within ${cell(s.quiet.waitedMs / 1000, "s")}`,
          ],
          ["Hub RSS once quiet", cell(s.rss, "MB")],
        ],
        notes: [
          "targets: longest stall ≤ 50 ms (measured from outside: a gap includes one healthz round trip); claim p99 ≤ 30 ms while the conditions converge",
        ],
      },
    ];
  },
};
