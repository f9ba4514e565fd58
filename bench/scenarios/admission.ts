// 4. task-admission over HTTP: GET /api/data/task-admission explains one task against every
// worker, so its cost grows with the fleet. Measured on a Hub holding the scale queue, its
// workers heartbeating, once every queued task's conditions have converged.
import { JsonClient } from "../lib/http.ts";
import { waitQuiet } from "../lib/hub.ts";
import { HEARTBEAT_EVERY_MS, liveScaleHub, scaleSizes } from "../lib/hubscale.ts";
import { cell, type Table } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { percentile } from "../lib/stats.ts";

/** How long the Hub must write nothing before the requests start: its conditions have converged. */
const quietMs = (quick: boolean) => (quick ? 500 : 10_000);

async function measure(o: Parameters<Scenario["run"]>[0], tasks: number, workers: number, requests: number) {
  const { hub, close } = await liveScaleHub(o, tasks, workers);
  const c = new JsonClient(hub.url);
  try {
    // The conditions pass writes a bounded batch and then rests three times as long as it
    // worked (about 2 s at 200,000 × 2,000), so a shorter silence can fall between batches.
    const quiet = await waitQuiet(c, quietMs(o.quick), o.quick ? 20_000 : 600_000);
    const lat: number[] = [];
    let bytes = 0;
    for (let i = 0; i < requests; i++) {
      // Spread over the queue and over every shape (seeded task i has shape i % 10).
      const name = `t${String(Math.floor((i * 7919) % tasks)).padStart(7, "0")}`;
      const t0 = performance.now();
      const r = await c.get<{ workers: unknown[] }>(`/api/data/task-admission?task_id=${name}`);
      lat.push(performance.now() - t0);
      if (r.workers.length !== workers)
        throw new Error(`task-admission listed ${r.workers.length} of ${workers} workers`);
      bytes += JSON.stringify(r).length;
    }
    return { lat, quiet, kb: bytes / requests / 1024 };
  } finally {
    c.close();
    await close();
  }
}

export const admissionScenario: Scenario = {
  name: "admission",
  summary: "GET /api/data/task-admission p50/p99 with 2,000 and 10,000 workers",
  async run(o) {
    // The 10,000-worker fleet sits on a smaller queue, so seeding it and letting its
    // conditions converge fit the full run's time budget; the reply size follows the fleet.
    const fleets = o.quick
      ? [
          { workers: 20, tasks: 2_000 },
          { workers: 100, tasks: 1_000 },
        ]
      : [
          { workers: 2_000, tasks: scaleSizes(false).tasks },
          { workers: 10_000, tasks: 20_000 },
        ];
    const requests = o.quick ? 20 : 200;
    const rows: string[][] = [];
    for (const { workers: w, tasks } of fleets) {
      const m = await measure(o, tasks, w, requests);
      rows.push([
        w.toLocaleString("en"),
        tasks.toLocaleString("en"),
        cell(percentile(m.lat, 50), "ms"),
        cell(percentile(m.lat, 99), "ms"),
        cell(percentile(m.lat, 100), "ms"),
        cell(m.kb, "KB"),
        m.quiet.settled ? cell(m.quiet.waitedMs / 1000, "s") : `not within ${cell(m.quiet.waitedMs / 1000, "s")}`,
      ]);
    }
    const t: Table = {
      scenario: "admission",
      title: `task-admission over HTTP, ${requests} sequential requests per fleet`,
      columns: ["workers", "queued", "p50", "p99", "max", "reply size", "conditions converged after"],
      rows,
      notes: [
        "target (2,000 workers, 200,000 queued): p50 ≤ 25 ms, p99 ≤ 100 ms",
        `measured once the Hub had written nothing for ${quietMs(o.quick) / 1000} s (every queued task's conditions converged; timed from the end of the workers' first heartbeats, the ${quietMs(o.quick) / 1000} s included), its workers heartbeating every ${HEARTBEAT_EVERY_MS / 1000} s`,
      ],
    };
    return [t];
  },
};
