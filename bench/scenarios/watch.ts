// 8. Watch lag: 500 watchers on the tasks watch while the lease load runs against a
// `loom hub`, on SQLite and (when etcd is installed) as one replica on etcd. Lag is the time
// a watcher receives a state change minus the time the Runner that caused it got its answer
// (both clocks are the same machine's wall clock, with sub-millisecond precision), matched
// by task name and state (leased, running, returned). It can be negative: an event may reach
// a watcher before the reply reaches the Runner.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { JsonClient } from "../lib/http.ts";
import { revisionOf, tempDir } from "../lib/hub.ts";
import { resultOf, spawnScript, stop, waitForLine } from "../lib/proc.ts";
import { cell, type Table } from "../lib/report.ts";
import type { RunOptions, Scenario } from "../lib/scenario.ts";
import { etcdMissing } from "../../test/support/etcd.ts";
import { LEASE_COLUMNS, leaseRow, leaseRun, type LeaseRun, type ServerKind } from "./lease.ts";

type WatchResult = {
  watchers: number;
  lines: number;
  errors: number;
  deliveries: number;
  missing: number;
  p50: number;
  p99: number;
  max: number;
};

/** One lease load on `kind` with the watchers attached; their lag, and the load's own figures. */
async function watchRun(
  kind: ServerKind,
  sizes: { runners: number; tasks: number; claimLimit: number },
  o: RunOptions,
  watchers: number,
  sample: number,
): Promise<{ r: WatchResult; run: LeaseRun }> {
  const acksDir = tempDir("acks");
  const acksFile = join(acksDir, "acks.json");
  let result: WatchResult | undefined;
  const run = await leaseRun(kind, sizes, o, {
    acksFile,
    ackSample: sample,
    during: async (url) => {
      const c = new JsonClient(url);
      const from = await revisionOf(c);
      c.close();
      const w = spawnScript("procs/watchers.ts", {
        LOOM_BENCH_URL: url,
        LOOM_BENCH_WATCHERS: String(watchers),
        LOOM_BENCH_FROM: String(from),
        LOOM_BENCH_SAMPLE: String(sample),
        LOOM_BENCH_PREFIX: "lease",
      });
      await waitForLine(w, "stdout", /^READY$/m, 120_000);
      return async () => {
        // Give the last events a moment to arrive, then hand over the acknowledgement times.
        await new Promise((r) => setTimeout(r, o.quick ? 300 : 1000));
        w.proc.stdin!.write(`${acksFile}\n`);
        result = await resultOf<WatchResult>(w, 120_000);
        await stop(w);
      };
    },
  }).finally(() => rmSync(acksDir, { recursive: true, force: true }));
  return { r: result!, run };
}

export const watchScenario: Scenario = {
  name: "watch",
  summary: "watch delivery lag p99 with 500 NDJSON watchers during the lease load",
  async run(o) {
    const sizes = o.quick ? { runners: 4, tasks: 100, claimLimit: 4 } : { runners: 32, tasks: 2_000, claimLimit: 4 };
    const watchers = o.quick ? 5 : 500;
    const sample = o.quick ? 5 : 10;
    const servers: [ServerKind, string][] = [["loom", "SQLite"]];
    if (!etcdMissing) servers.push(["loom-etcd", "one etcd replica"]);
    const rows: string[][] = [];
    const notes: string[] = [];
    for (const [kind, label] of servers) {
      const { r, run } = await watchRun(kind, sizes, o, watchers, sample);
      rows.push([
        label,
        String(r.watchers),
        r.deliveries.toLocaleString("en"),
        r.missing.toLocaleString("en"),
        cell(r.p50, "ms"),
        cell(r.p99, "ms"),
        cell(r.max, "ms"),
      ]);
      notes.push(
        `the lease load with the watchers attached, ${label}: ${LEASE_COLUMNS.slice(1)
          .map((c, i) => `${c} ${leaseRow("", run)[i + 1]}`)
          .join(", ")}`,
      );
    }
    const t: Table = {
      scenario: "watch",
      title: `watch lag, ${watchers} watchers on /apis/loom.dev/v1alpha1/tasks?watch=1 during the lease load (W=${sizes.runners}, ${sizes.tasks.toLocaleString("en")} tasks)`,
      columns: ["server", "watchers", "deliveries measured", "missing", "lag p50", "lag p99", "lag max"],
      rows,
      notes: [
        "target: lag p99 ≤ 100 ms",
        `every ${sample}th task is measured, its leased, running and returned states, at every watcher; missing = such a state a watcher never received`,
        ...notes,
      ],
    };
    return [t];
  },
};
