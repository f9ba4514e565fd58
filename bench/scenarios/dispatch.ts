// 3. Dispatch at depth: tasks created per second through POST /api/tasks/dispatch, from an
// empty Hub up to N queued, reported per depth bucket. A flat column is the goal: the
// thousandth batch should cost what the first did.
import { JsonClient } from "../lib/http.ts";
import { startHub, stopHub, tempDir } from "../lib/hub.ts";
import { rssMb } from "../lib/proc.ts";
import { cell, ratio, type Table } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { dispatchRange } from "../lib/workload.ts";

export const dispatchScenario: Scenario = {
  name: "dispatch",
  summary: "dispatch rate over HTTP from an empty Hub to 200,000 queued, per depth bucket",
  async run(o) {
    const total = o.quick ? 2_000 : 200_000;
    const buckets = o.quick ? 4 : 10;
    const batch = o.quick ? 250 : 1_000;
    const per = total / buckets;
    const hub = await startHub(tempDir("dispatch"), o.hubArgs);
    const c = new JsonClient(hub.url);
    const rows: string[][] = [];
    const rates: number[] = [];
    try {
      for (let b = 0; b < buckets; b++) {
        const t0 = performance.now();
        const created = await dispatchRange(c, "d", b * per, per, batch);
        const s = (performance.now() - t0) / 1000;
        if (created !== per) throw new Error(`bucket ${b}: created ${created} of ${per}`);
        rates.push(per / s);
        rows.push([
          `${(b * per).toLocaleString("en")} → ${((b + 1) * per).toLocaleString("en")}`,
          cell(per / s),
          cell(s, "s"),
          cell(rssMb(hub.pid), "MB"),
        ]);
      }
    } finally {
      c.close();
      await stopHub(hub);
    }
    rows.push(["ratio last/first bucket", ratio(rates[rates.length - 1], rates[0]), "", ""]);
    const t: Table = {
      scenario: "dispatch",
      title: `dispatch rate at depth, batches of ${batch.toLocaleString("en")}, one client, empty Hub to ${total.toLocaleString("en")} queued`,
      columns: ["queued before → after", "tasks/s", "bucket time", "Hub RSS after"],
      rows,
      notes: ["target: ≥ 10,000 tasks/s in every bucket, flat (ratio last/first near 1.0)"],
    };
    return [t];
  },
};
