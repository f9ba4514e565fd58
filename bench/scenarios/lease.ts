// 1. Lease throughput, the headline. The same load generator (W pull Runners: claim with
// a limit, then start and complete each task, noop) drives first the floor server (bare
// fastify, in-memory FIFO) and then a real `loom hub` seeded with the same tasks. Both run
// in their own processes; their CPU time comes from /proc, so "leases per CPU-second" is
// the server's cost alone, not the load generator's.
import { JsonClient } from "../lib/http.ts";
import { startHub, stopHub, tempDir, waitQuiet } from "../lib/hub.ts";
import { cpuSeconds, resultOf, spawnScript, stop, waitForLine, type Child } from "../lib/proc.ts";
import { cell, ratio, type Table } from "../lib/report.ts";
import type { RunOptions, Scenario } from "../lib/scenario.ts";
import { dispatchRange } from "../lib/workload.ts";
import { etcdMissing, startEtcd } from "../../test/support/etcd.ts";
import type { LoadConfig, LoadResult } from "../procs/runner-load.ts";

export type LeaseSizes = { runners: number; tasks: number; claimLimit: number };
export const leaseSizes = (quick: boolean): LeaseSizes => (quick ? { runners: 4, tasks: 200, claimLimit: 4 } : { runners: 32, tasks: 8000, claimLimit: 4 });

export type ServerKind = "floor" | "loom" | "loom-etcd";
type Server = { child: Child; url: string; close: () => Promise<void> };

async function startServer(kind: ServerKind, o: RunOptions): Promise<Server> {
  if (kind === "loom") {
    const h = await startHub(tempDir("lease"), o.hubArgs);
    return { child: h, url: h.url, close: () => stopHub(h) };
  }
  if (kind === "loom-etcd") {
    // One Hub replica on a one-member etcd on loopback (Debian's etcd-server).
    const etcd = await startEtcd(1);
    try {
      const h = await startHub(tempDir("lease-etcd"), [...o.hubArgs, "--store", "etcd", "--etcd-endpoints", etcd.endpoints.join(","), "--etcd-prefix", "/bench"]);
      return { child: h, url: h.url, close: async () => { await stopHub(h); await etcd.stop(); } };
    } catch (e) {
      await etcd.stop();
      throw e;
    }
  }
  const child = spawnScript("procs/floor-server.ts");
  const m = await waitForLine(child, "stderr", /listening on (http:\/\/[^\s]+)/, 60_000);
  return { child, url: m[1], close: () => stop(child) };
}

export type LeaseRun = LoadResult & { kind: ServerKind; serverCpuS: number; leasesPerS: number; leasesPerCpuS: number };

/**
 * One measured run against one server. `during` starts before the load and is stopped
 * after it (the watch-lag scenario attaches its watchers there).
 */
export async function leaseRun(kind: ServerKind, sizes: LeaseSizes, o: RunOptions, extra: { acksFile?: string; ackSample?: number; during?: (url: string) => Promise<() => Promise<void>> } = {}): Promise<LeaseRun> {
  const server = await startServer(kind, o);
  try {
    const c = new JsonClient(server.url);
    const created = await dispatchRange(c, "lease", 0, sizes.tasks);
    if (created !== sizes.tasks) throw new Error(`${kind}: dispatched ${created} of ${sizes.tasks} tasks`);
    // Let the Hub finish reacting to the dispatch, so the run measures leasing alone.
    if (kind !== "floor") await waitQuiet(c, o.quick ? 300 : 1000, 120_000);
    c.close();
    const cfg: LoadConfig = { url: server.url, runners: sizes.runners, claimLimit: sizes.claimLimit, tasks: sizes.tasks, acksFile: extra.acksFile, ackSample: extra.ackSample };
    const load = spawnScript("procs/runner-load.ts", { LOOM_BENCH_LOAD: JSON.stringify(cfg) });
    try {
      await waitForLine(load, "stdout", /^READY$/m, 120_000);
      const stopDuring = extra.during ? await extra.during(server.url) : undefined;
      const cpu0 = cpuSeconds(server.child.pid);
      load.proc.stdin!.write("GO\n");
      // Generous: on a contended machine the current Hub can take many minutes for 8,000 leases.
      const r = await resultOf<LoadResult>(load, 1_800_000);
      const serverCpuS = cpuSeconds(server.child.pid) - cpu0;
      await stopDuring?.();
      if (r.leases !== sizes.tasks) throw new Error(`${kind}: ${r.leases} leases for ${sizes.tasks} tasks`);
      return { ...r, kind, serverCpuS, leasesPerS: r.leases / (r.wallMs / 1000), leasesPerCpuS: r.leases / serverCpuS };
    } finally {
      await stop(load);
    }
  } finally {
    await server.close();
  }
}

export const leaseRow = (label: string, r: LeaseRun) => [label, cell(r.leasesPerS), cell(r.leasesPerCpuS), cell((r.serverCpuS * 1000) / r.leases, "ms"), cell(r.claimP50, "ms"), cell(r.claimP99, "ms"), cell(r.wallMs / 1000, "s")];
export const LEASE_COLUMNS = ["server", "leases/s", "leases per server CPU-s", "CPU per lease", "claim p50", "claim p99", "wall"];

export const lease: Scenario = {
  name: "lease",
  summary: "lease throughput of `loom hub` against a bare fastify floor server, same load, one command",
  async run(o) {
    const sizes = leaseSizes(o.quick);
    const floor = await leaseRun("floor", sizes, o);
    const loom = await leaseRun("loom", sizes, o);
    // The etcd variant: the same load on one Hub replica backed by etcd, as a ratio to SQLite.
    const onEtcd = etcdMissing ? undefined : await leaseRun("loom-etcd", sizes, o);
    const t: Table = {
      scenario: "lease",
      title: `lease throughput, W=${sizes.runners} Runners, ${sizes.tasks.toLocaleString("en")} noop tasks, claim limit ${sizes.claimLimit}`,
      columns: LEASE_COLUMNS,
      rows: [
        leaseRow("floor (fastify, in-memory FIFO)", floor),
        leaseRow("Loom (`loom hub`, SQLite)", loom),
        ["ratio Loom/floor", ratio(loom.leasesPerS, floor.leasesPerS), ratio(loom.leasesPerCpuS, floor.leasesPerCpuS), ratio(loom.serverCpuS / loom.leases, floor.serverCpuS / floor.leases), ratio(loom.claimP50, floor.claimP50), ratio(loom.claimP99, floor.claimP99), ratio(loom.wallMs, floor.wallMs)],
        ...(onEtcd
          ? [
              leaseRow("Loom, one replica on etcd", onEtcd),
              ["ratio etcd/SQLite", ratio(onEtcd.leasesPerS, loom.leasesPerS), ratio(onEtcd.leasesPerCpuS, loom.leasesPerCpuS), ratio(onEtcd.serverCpuS / onEtcd.leases, loom.serverCpuS / loom.leases), ratio(onEtcd.claimP50, loom.claimP50), ratio(onEtcd.claimP99, loom.claimP99), ratio(onEtcd.wallMs, loom.wallMs)],
            ]
          : []),
      ],
      notes: [
        "targets: leases/s ≥ 0.80 of the floor, leases per CPU-second ≥ 0.50 of the floor, claim p99 ≤ 20 ms",
        "server CPU is utime+stime of the server process from /proc over the load; wall is first claim to last complete",
        etcdMissing ? `etcd variant skipped: ${etcdMissing}` : "the etcd row's CPU is the Hub's alone; etcd's own CPU is not counted",
        "the Hub's timer-driven work (conditions passes, resyncs) is counted too, so a Hub starved of CPU by other load also shows more CPU per lease",
      ],
    };
    return [t];
  },
};

