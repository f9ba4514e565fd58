// 1. Lease throughput, the headline. The same load generator (W pull Runners: claim with
// a limit, then start and complete each task, noop) drives first the floor server (bare
// fastify, in-memory FIFO) and then a real `loom hub` seeded with the same tasks. Both run
// in their own processes; their CPU time comes from /proc, so "leases per CPU-second" is
// the server's cost alone, not the load generator's.
import { JsonClient } from "../lib/http.ts";
import { startHub, stopHub, tempDir, waitConditions, waitQuiet } from "../lib/hub.ts";
import {
  cpuSeconds,
  mainThreadCpuSeconds,
  resultOf,
  spawnScript,
  stop,
  waitForLine,
  writeBytes,
  type Child,
} from "../lib/proc.ts";
import { cell, ratio, type Table } from "../lib/report.ts";
import type { RunOptions, Scenario } from "../lib/scenario.ts";
import { dispatchRange, WARM_CLAIMS } from "../lib/workload.ts";
import { queueName } from "../lib/seed.ts";
import { etcdMissing, startEtcd } from "../../test/support/etcd.ts";
import type { LoadConfig, LoadResult } from "../procs/runner-load.ts";

export type LeaseSizes = { runners: number; tasks: number; claimLimit: number };
export const leaseSizes = (quick: boolean): LeaseSizes =>
  quick ? { runners: 4, tasks: 200, claimLimit: 4 } : { runners: 32, tasks: 8000, claimLimit: 4 };

/**
 * `loom-etcd-follow`: two replicas with every Runner on the first, so the second only follows
 * the watch: its CPU per lease is what following another replica's leases costs (docs/ha.md).
 */
export type ServerKind = "floor" | "loom" | "loom-etcd" | "loom-etcd-3" | "loom-etcd-follow";

const REPLICAS: Partial<Record<ServerKind, string[]>> = {
  "loom-etcd": ["a"],
  "loom-etcd-3": ["a", "b", "c"],
  "loom-etcd-follow": ["a", "b"],
};

/**
 * The work of the queues row: `shapes` requirement shapes (task i asks for 250 + i % shapes
 * millicores) spread over `queues` Queue objects (task i in queue i % queues), each an equal
 * share of the fleet as quota and as much again to borrow, weights 1-3.
 */
export type QueuedWork = { queues: number; shapes: number };
export const queuedWork = (quick: boolean): QueuedWork =>
  quick ? { queues: 10, shapes: 200 } : { queues: 100, shapes: 10_000 };

/** Create the Queues of `w` for a fleet of `runners` bench workers (registerBody's capacity). */
async function createQueues(c: JsonClient, w: QueuedWork, runners: number): Promise<void> {
  for (let i = 0; i < w.queues; i++) {
    const share = {
      cpu_millis: Math.floor((64_000 * runners) / w.queues),
      memory_mb: Math.floor((262_144 * runners) / w.queues),
    };
    await c.post("/apis/loom.dev/v1alpha1/queues", {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Queue",
      metadata: { name: queueName(i) },
      spec: { quota: share, borrowing_limit: share, weight: 1 + (i % 3) },
    });
  }
}
/** `children`: every server process whose CPU counts (three replicas: all three); `disk`: the processes that make writes durable. */
type Server = {
  children: Child[];
  disk: number[];
  urls: string[];
  /** The Hubs the Runners are spread over (all of them unless the run says otherwise). */
  runnerUrls?: string[];
  close: () => Promise<void>;
  etcd?: number[];
};

async function startServer(kind: ServerKind, o: RunOptions): Promise<Server> {
  if (kind === "loom") {
    const h = await startHub(tempDir("lease"), o.hubArgs);
    return { children: [h], disk: [h.pid], urls: [h.url], close: () => stopHub(h) };
  }
  const replicas = REPLICAS[kind];
  if (replicas) {
    // Hub replicas on a one-member etcd on loopback (Debian's etcd-server), on etcd's default limits.
    const etcd = await startEtcd(1);
    const hubs: Awaited<ReturnType<typeof startHub>>[] = [];
    const close = async () => {
      for (const h of hubs) await stopHub(h);
      await etcd.stop();
    };
    try {
      for (const id of replicas)
        hubs.push(
          await startHub(tempDir(`lease-etcd-${id}`), [
            ...o.hubArgs,
            "--store",
            "etcd",
            "--etcd-endpoints",
            etcd.endpoints.join(","),
            "--etcd-prefix",
            "/bench",
            "--replica-id",
            id,
          ]),
        );
      const etcdPids = etcd.members.map((m) => m.proc.pid!);
      return {
        children: hubs,
        disk: [...hubs.map((h) => h.pid), ...etcdPids],
        urls: hubs.map((h) => h.url),
        runnerUrls: kind === "loom-etcd-follow" ? [hubs[0].url] : hubs.map((h) => h.url),
        close,
        etcd: etcdPids,
      };
    } catch (e) {
      await close();
      throw e;
    }
  }
  const child = spawnScript("procs/floor-server.ts");
  const m = await waitForLine(child, "stderr", /listening on (http:\/\/[^\s]+)/, 60_000);
  return { children: [child], disk: [child.pid], urls: [m[1]], close: () => stop(child) };
}

export type LeaseRun = LoadResult & {
  kind: ServerKind;
  serverCpuS: number;
  /** The server processes' main threads (event loops) alone, over the same load. */
  mainCpuS: number;
  /** Each server process's CPU and its main thread's, in `Server.children` order. */
  perProcess: { cpuS: number; mainCpuS: number }[];
  leasesPerS: number;
  leasesPerCpuS: number;
  bytesPerLease: number;
  etcdCpuS?: number;
  racesLost: number;
  /** Durable store commits over the load (etcd: Txns, SQLite: WAL flushes), the writes they carried, and writes decided again after a failed commit. */
  commits: number;
  committedWrites: number;
  failedCommits: number;
};

/** The Hubs' counters that the lease rows read, summed over the Hubs (0 for the floor, which has none). */
type Counters = { racesLost: number; commits: number; committedWrites: number; failedCommits: number };
const COUNTERS: Record<keyof Counters, string> = {
  racesLost: "loom_claim_races_lost_total",
  commits: "loom_store_commits_total",
  committedWrites: "loom_store_committed_writes_total",
  failedCommits: "loom_store_commits_failed_total",
};

async function counters(urls: string[]): Promise<Counters> {
  const n: Counters = { racesLost: 0, commits: 0, committedWrites: 0, failedCommits: 0 };
  for (const u of urls) {
    const text = await fetch(`${u}/metrics`).then(
      (r) => (r.ok ? r.text() : ""),
      () => "",
    );
    for (const k of Object.keys(COUNTERS) as (keyof Counters)[]) {
      const m = new RegExp(`^${COUNTERS[k]} (\\d+)`, "m").exec(text);
      if (m) n[k] += Number(m[1]);
    }
  }
  return n;
}

/** Until the Hub's reaction is over: every queued task's condition written, then no write for a while. */
async function settle(c: JsonClient, o: RunOptions, settled: (reason: string | undefined) => boolean): Promise<void> {
  const { owed, waitedMs } = await waitConditions(c, settled, 120_000);
  // Measuring with the backlog still owed would count the conditions pass as leasing.
  if (owed > 0) throw new Error(`${owed} tasks still had no settled Admitted condition after ${waitedMs} ms`);
  await waitQuiet(c, o.quick ? 300 : 1000, 120_000);
}

/**
 * One measured run against one server. `during` starts before the load and is stopped
 * after it (the watch-lag scenario attaches its watchers there).
 */
export async function leaseRun(
  kind: ServerKind,
  sizes: LeaseSizes,
  o: RunOptions,
  extra: {
    acksFile?: string;
    ackSample?: number;
    during?: (url: string) => Promise<() => Promise<void>>;
    queued?: QueuedWork;
    /**
     * Leases run on the same server before the measured load, not measured: its code is then
     * compiled and its heap settled, as in a server that has been up for a while. Their tasks
     * are dispatched and leased before the measured ones are dispatched, so the measured load
     * starts on as many queued tasks as it would without them.
     */
    warmLeases?: number;
  } = {},
): Promise<LeaseRun> {
  const server = await startServer(kind, o);
  const url = server.urls[0];
  const cpu = () => server.children.reduce((sum, c) => sum + cpuSeconds(c.pid), 0);
  const mainCpu = () => server.children.reduce((sum, c) => sum + mainThreadCpuSeconds(c.pid), 0);
  const written = () => server.disk.reduce((sum, pid) => sum + writeBytes(pid), 0);
  const etcdCpu = () => (server.etcd ?? []).reduce((sum, pid) => sum + cpuSeconds(pid), 0);
  try {
    const c = new JsonClient(url);
    const q = extra.queued;
    const warm = extra.warmLeases ?? 0;
    if (q) await createQueues(c, q, sizes.runners);
    const dispatch = (prefix: string, count: number) =>
      q
        ? dispatchRange(
            c,
            prefix,
            0,
            count,
            1000,
            (i) => i % q.shapes,
            (i) => queueName(i % q.queues),
          )
        : dispatchRange(c, prefix, 0, count);
    if (warm > 0) {
      // The warm-up's own tasks, leased to the last one before the measured ones are dispatched.
      if ((await dispatch("warm", warm)) !== warm) throw new Error(`${kind}: warm-up tasks not all dispatched`);
      const runners = server.runnerUrls ?? server.urls;
      const cfg: LoadConfig = { url, urls: runners, runners: sizes.runners, claimLimit: sizes.claimLimit, tasks: warm };
      const load = spawnScript("procs/runner-load.ts", { LOOM_BENCH_LOAD: JSON.stringify(cfg) });
      try {
        await waitForLine(load, "stdout", /^READY$/m, 120_000);
        load.proc.stdin!.write("GO\n");
        const r = await resultOf<LoadResult>(load, 1_800_000);
        if (r.leases !== warm) throw new Error(`${kind}: ${r.leases} warm-up leases for ${warm} tasks`);
      } finally {
        await stop(load);
      }
    }
    const created = await dispatch("lease", sizes.tasks);
    if (created !== sizes.tasks) throw new Error(`${kind}: dispatched ${created} of ${sizes.tasks} tasks`);
    // Let the Hub finish reacting to the dispatch, so the run measures leasing alone.
    if (kind !== "floor") await settle(c, o, () => true);
    c.close();
    const cfg: LoadConfig = {
      url,
      urls: server.runnerUrls ?? server.urls,
      runners: sizes.runners,
      claimLimit: sizes.claimLimit,
      tasks: sizes.tasks,
      acksFile: extra.acksFile,
      ackSample: extra.ackSample,
    };
    const load = spawnScript("procs/runner-load.ts", { LOOM_BENCH_LOAD: JSON.stringify(cfg) });
    try {
      await waitForLine(load, "stdout", /^READY$/m, 120_000);
      // The same for the Runners' registration: the Hub rewrites every queued task's Admitted
      // condition once workers can take them, a one-off reaction that is not leasing.
      if (kind !== "floor") {
        const rc = new JsonClient(url);
        await settle(rc, o, (reason) => reason !== "NoWorkers");
        rc.close();
      }
      const stopDuring = extra.during ? await extra.during(url) : undefined;
      const cpu0 = cpu();
      const each0 = server.children.map((c) => ({ cpuS: cpuSeconds(c.pid), mainCpuS: mainThreadCpuSeconds(c.pid) }));
      const main0 = mainCpu();
      const etcd0 = etcdCpu();
      const counted0 = await counters(server.urls);
      const bytes0 = written();
      load.proc.stdin!.write("GO\n");
      // Generous: on a contended machine the current Hub can take many minutes for 8,000 leases.
      const r = await resultOf<LoadResult>(load, 1_800_000);
      const serverCpuS = cpu() - cpu0;
      const perProcess = server.children.map((c, i) => ({
        cpuS: cpuSeconds(c.pid) - each0[i].cpuS,
        mainCpuS: mainThreadCpuSeconds(c.pid) - each0[i].mainCpuS,
      }));
      const mainCpuS = mainCpu() - main0;
      const bytesPerLease = (written() - bytes0) / r.leases;
      const etcdCpuS = server.etcd ? etcdCpu() - etcd0 : undefined;
      const counted = await counters(server.urls);
      await stopDuring?.();
      if (r.leases !== sizes.tasks) throw new Error(`${kind}: ${r.leases} leases for ${sizes.tasks} tasks`);
      return {
        ...r,
        kind,
        serverCpuS,
        mainCpuS,
        perProcess,
        bytesPerLease,
        etcdCpuS,
        racesLost: counted.racesLost - counted0.racesLost,
        commits: counted.commits - counted0.commits,
        committedWrites: counted.committedWrites - counted0.committedWrites,
        failedCommits: counted.failedCommits - counted0.failedCommits,
        leasesPerS: r.leases / (r.wallMs / 1000),
        leasesPerCpuS: r.leases / serverCpuS,
      };
    } finally {
      await stop(load);
    }
  } finally {
    await server.close();
  }
}

export const leaseRow = (label: string, r: LeaseRun) => [
  label,
  cell(r.leasesPerS),
  cell(r.leasesPerCpuS),
  cell((r.serverCpuS * 1000) / r.leases, "ms"),
  cell(r.bytesPerLease / 1024, "KiB"),
  cell(r.claimP50, "ms"),
  cell(r.claimP99, "ms"),
  cell(r.wallMs / 1000, "s"),
];
export const LEASE_COLUMNS = [
  "server",
  "leases/s",
  "leases per server CPU-s",
  "CPU per lease",
  "written per lease",
  "claim p50",
  "claim p99",
  "wall",
];
const commitsNote = (runs: readonly (readonly [string, LeaseRun])[]) =>
  runs
    .map(
      ([label, r]) =>
        `${label} ${(r.commits / r.leases).toFixed(2)} (${r.commits ? (r.committedWrites / r.commits).toFixed(1) : "0"} transactions each)`,
    )
    .join(", ");

const perLeaseMs = (s: number, r: LeaseRun) => ((s * 1000) / r.leases).toFixed(3);
const threadsNote = (runs: readonly (readonly [string, LeaseRun])[]) =>
  runs
    .map(
      ([label, r]) =>
        `${label} ${perLeaseMs(r.mainCpuS, r)} + ${perLeaseMs(r.serverCpuS - r.mainCpuS, r)} ms, load ${perLeaseMs(r.cpuS, r)} ms`,
    )
    .join("; ");

const ratioRow = (label: string, a: LeaseRun, b: LeaseRun) => [
  label,
  ratio(a.leasesPerS, b.leasesPerS),
  ratio(a.leasesPerCpuS, b.leasesPerCpuS),
  ratio(a.serverCpuS / a.leases, b.serverCpuS / b.leases),
  b.bytesPerLease > 0 ? ratio(a.bytesPerLease, b.bytesPerLease) : "—",
  ratio(a.claimP50, b.claimP50),
  ratio(a.claimP99, b.claimP99),
  ratio(a.wallMs, b.wallMs),
];

export const lease: Scenario = {
  name: "lease",
  summary: "lease throughput of `loom hub` against a bare fastify floor server, same load, one command",
  async run(o) {
    const sizes = leaseSizes(o.quick);
    const floor = await leaseRun("floor", sizes, o);
    const loom = await leaseRun("loom", sizes, o);
    // The same Hub with many shapes over many Queues: what fair share and the quota cost a claim.
    const work = queuedWork(o.quick);
    const queuedSizes = { ...sizes, tasks: Math.max(sizes.tasks, work.shapes) };
    const queued = await leaseRun("loom", queuedSizes, o, { queued: work });
    // The etcd variants: the same load on one Hub replica backed by a stock etcd, and on three
    // replicas with the Runners spread evenly over them, each as a ratio.
    const onEtcd = etcdMissing ? undefined : await leaseRun("loom-etcd", sizes, o);
    const onThree = etcdMissing ? undefined : await leaseRun("loom-etcd-3", sizes, o);
    // What following costs, alone: a second replica that serves no Runner (docs/ha.md's c_watch).
    const follow = etcdMissing ? undefined : await leaseRun("loom-etcd-follow", sizes, o);
    const t: Table = {
      scenario: "lease",
      title: `lease throughput, W=${sizes.runners} Runners, ${sizes.tasks.toLocaleString("en")} noop tasks, claim limit ${sizes.claimLimit}`,
      columns: LEASE_COLUMNS,
      rows: [
        leaseRow("floor (fastify, in-memory FIFO)", floor),
        leaseRow("Loom (`loom hub`, SQLite)", loom),
        ratioRow("ratio Loom/floor", loom, floor),
        leaseRow(
          `Loom, SQLite, ${work.shapes.toLocaleString("en")} shapes over ${work.queues} queues (${queuedSizes.tasks.toLocaleString("en")} tasks)`,
          queued,
        ),
        ratioRow("ratio queues/none", queued, loom),
        ["claim p99 queues/floor", "", "", "", "", "", ratio(queued.claimP99, floor.claimP99), ""],
        ...(onEtcd && onThree && follow
          ? [
              leaseRow("Loom, one replica on etcd (default limits)", onEtcd),
              ratioRow("ratio etcd/SQLite", onEtcd, loom),
              ["claim p99 etcd/floor", "", "", "", "", "", ratio(onEtcd.claimP99, floor.claimP99), ""],
              leaseRow("Loom, three replicas on one etcd, Runners spread", onThree),
              ratioRow("ratio three replicas/one", onThree, onEtcd),
              leaseRow("Loom, two replicas on one etcd, every Runner on the first", follow),
              ratioRow("ratio two replicas, one serving/one", follow, onEtcd),
            ]
          : []),
      ],
      notes: [
        "targets: SQLite leases/s ≥ 0.80 of the floor, leases per CPU-second ≥ 0.30 of the floor, claim p99 ≤ 1.5× the floor's (with or without the queues); etcd ≥ 0.35× SQLite's leases/s, claim p99 ≤ 3× the floor's; three replicas ≥ 0.9× one",
        `the queues row: task i asks for 250 + i % ${work.shapes} millicores and is in queue i % ${work.queues}; each Queue has an equal share of the fleet as quota and as much again to borrow, weights 1-3, so claims order by fair share and every lease is checked against its queue's quota, and re-checked by the store`,
        `claim p99 without each Runner's first ${WARM_CLAIMS} claims (either server's first claims run its code cold, and are among its slowest): floor ${cell(floor.claimP99Warm, "ms")}, SQLite ${cell(loom.claimP99Warm, "ms")} (${ratio(loom.claimP99Warm, floor.claimP99Warm)} the floor's)${onEtcd ? `, one etcd replica ${cell(onEtcd.claimP99Warm, "ms")} (${ratio(onEtcd.claimP99Warm, floor.claimP99Warm)})` : ""}; the targets stay on the p99 of every claim`,
        "server CPU is utime+stime of the server processes from /proc over the load (three replicas: all three); wall is first claim to last complete",
        `CPU per lease on the server's main thread (its event loop, which bounds leases/s) and on its other threads (GC, compiler, I/O pool), then the Runners' load generator on the same cores: ${threadsNote(
          [["floor", floor], ["SQLite", loom], ...(onEtcd ? ([["one etcd replica", onEtcd]] as const) : [])],
        )}`,
        "the load starts once the Hub has fallen quiet after the dispatch and again after the Runners registered (its conditions pass rewrites every queued task then): every task's Admitted condition written, then no write for a second",
        "written per lease: write_bytes from /proc/PID/io over the load, of the Hub (SQLite: its WAL and checkpoints) or of the Hubs and etcd (what etcd made durable)",
        `claim commits that lost a race and decided again, per 1,000 claims: SQLite ${((loom.racesLost * 1000) / loom.claims).toFixed(1)}${onEtcd && onThree ? `, one etcd replica ${((onEtcd.racesLost * 1000) / onEtcd.claims).toFixed(1)}, three replicas ${((onThree.racesLost * 1000) / onThree.claims).toFixed(1)}` : ""}`,
        `store writes whose commit failed its compares and were decided again, per 1,000 leases: SQLite ${((loom.failedCommits * 1000) / loom.leases).toFixed(1)}${onEtcd && onThree ? `, one etcd replica ${((onEtcd.failedCommits * 1000) / onEtcd.leases).toFixed(1)}, three replicas ${((onThree.failedCommits * 1000) / onThree.leases).toFixed(1)}` : ""}`,
        `durable store commits per lease (etcd: Txns, one round trip each; SQLite: WAL flushes, one fsync each), and the store transactions each carried (a transaction writes one object or several: a claim's leases, the Task status writes made in one turn): ${commitsNote(
          [
            ["SQLite", loom],
            ...(onEtcd && onThree && follow
              ? ([
                  ["one etcd replica", onEtcd],
                  ["three replicas", onThree],
                  ["two replicas, one serving", follow],
                ] as const)
              : []),
          ],
        )}`,
        ...(onEtcd && onThree && follow
          ? [
              `etcd's own CPU per lease: ${perLeaseMs(onEtcd.etcdCpuS!, onEtcd)} ms with one replica, ${perLeaseMs(follow.etcdCpuS!, follow)} ms with two (one serving), ${perLeaseMs(onThree.etcdCpuS!, onThree)} ms with three (docs/ha.md models throughput from these)`,
              `following alone (two replicas, every Runner on the first): CPU per lease of the serving replica ${perLeaseMs(follow.perProcess[0].cpuS, follow)} ms (main thread ${perLeaseMs(follow.perProcess[0].mainCpuS, follow)} ms), of the following one ${perLeaseMs(follow.perProcess[1].cpuS, follow)} ms (main thread ${perLeaseMs(follow.perProcess[1].mainCpuS, follow)} ms); with the Runners spread over three, each replica ${onThree.perProcess.map((p) => perLeaseMs(p.cpuS, onThree)).join(", ")} ms`,
            ]
          : []),
        etcdMissing
          ? `etcd variants skipped: ${etcdMissing}`
          : "the etcd rows' CPU is the Hubs' alone; etcd's own CPU is not counted; etcd runs with its default --max-txn-ops 128 and --max-request-bytes 1.5 MiB",
        "the Hub's timer-driven work (conditions passes, resyncs) is counted too, so a Hub starved of CPU by other load also shows more CPU per lease",
      ],
    };
    return [t];
  },
};

/**
 * The lease load on servers that have been up for a while: each first serves as many leases
 * as it is measured on, unmeasured, so its code is compiled and its heap settled. The lease
 * scenario measures from the first lease, which a short run's figures include.
 */
export const leaseWarm: Scenario = {
  name: "lease-warm",
  summary: "the lease load on a floor and a SQLite Hub that each served as many leases first (compiled, settled)",
  async run(o) {
    const sizes = leaseSizes(o.quick);
    const warmLeases = sizes.tasks;
    const floor = await leaseRun("floor", sizes, o, { warmLeases });
    const loom = await leaseRun("loom", sizes, o, { warmLeases });
    return [
      {
        scenario: "lease-warm",
        title: `lease throughput after ${warmLeases.toLocaleString("en")} leases unmeasured, W=${sizes.runners} Runners, ${sizes.tasks.toLocaleString("en")} noop tasks, claim limit ${sizes.claimLimit}`,
        columns: LEASE_COLUMNS,
        rows: [
          leaseRow("floor (fastify, in-memory FIFO)", floor),
          leaseRow("Loom (`loom hub`, SQLite)", loom),
          ratioRow("ratio Loom/floor", loom, floor),
        ],
        notes: [
          "each server first serves a load of its own tasks, dispatched, leased and completed before the measured tasks are dispatched; the measured load then starts on as many queued tasks as the lease scenario's",
          "#21's targets are read from the lease scenario, which measures from a server's first lease; this one shows what a server that has been up for a while costs",
          `CPU per lease on the server's main thread, then on its other threads (GC, compiler, I/O pool), then the load generator: ${threadsNote(
            [
              ["floor", floor],
              ["SQLite", loom],
            ],
          )}`,
          `claim p99 without each Runner's first ${WARM_CLAIMS} claims: floor ${cell(floor.claimP99Warm, "ms")}, SQLite ${cell(loom.claimP99Warm, "ms")} (${ratio(loom.claimP99Warm, floor.claimP99Warm)} the floor's)`,
        ],
      },
    ];
  },
};
