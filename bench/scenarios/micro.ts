// Microbenchmarks of the pieces under every request: one admission decision, and one
// durable store create and one read.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { admit, taskView, workerView } from "../../src/admission/index.ts";
import type { Task, Worker } from "../../src/resources/types.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { tempDir } from "../lib/hub.ts";
import { cell } from "../lib/report.ts";
import type { Scenario } from "../lib/scenario.ts";
import { seedTask, seedWorker, timeReps } from "../lib/seed.ts";
import { median, percentile } from "../lib/stats.ts";

export const microScenario: Scenario = {
  name: "micro",
  summary: "one admission decision; one durable store create and one read",
  async run(o) {
    const reps = o.quick ? 5 : 31;
    const lease = { cpu_millis: 500, memory_mb: 1024, disk_mb: 0, gpu_count: 0, gpu_types: [] };
    const w = workerView(
      seedWorker(1) as unknown as Worker,
      Array.from({ length: 16 }, (_, i) => ({ task: `l${i}`, placement: "shared" as const, reservation: lease })),
      { ready: true, reported_active: 3 },
    );
    const t = taskView(seedTask(3, 10) as unknown as Task);
    const admitUs = median(timeReps(() => void admit(t, w), reps, 2000));

    const dir = tempDir("micro");
    const store = openSqliteStore(join(dir, "loom.db"));
    const creates: number[] = [];
    try {
      for (let i = 0; i < (o.quick ? 20 : 200); i++) {
        const t0 = process.hrtime.bigint();
        await store.create(seedTask(i, 10));
        creates.push(Number(process.hrtime.bigint() - t0) / 1e3);
      }
      const getUs = median(timeReps(() => void store.get("Task", "t0000010"), reps, 200));
      return [
        {
          scenario: "micro",
          title: "microbenchmarks, in-process",
          columns: ["operation", "median", "p99"],
          rows: [
            ["admit(): one task × one worker holding 16 leases", cell(admitUs, "µs"), ""],
            [
              "store: create one Task (validated, durable commit)",
              cell(median(creates), "µs"),
              cell(percentile(creates, 99), "µs"),
            ],
            ["store: get one Task", cell(getUs, "µs"), ""],
          ],
        },
      ];
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
