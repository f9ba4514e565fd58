// The Hub's Prometheus metrics. Counts that already live in the informer (tasks by state,
// queued tasks by Admitted reason, reserved and capacity per worker) are read at scrape
// time, never kept twice; what happens between scrapes (leases, claims, commits, passes,
// rejections) is counted as it happens.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from "prom-client";
import type { CommitStats } from "../store/store.ts";
import type { InformerEvent } from "../store/cache.ts";
import { StoreError } from "../store/errors.ts";
import { isActive, isKind, type Task } from "../resources/types.ts";
import type { SchedulerObserver } from "../scheduler/options.ts";
import { queuedReason } from "./history.ts";

export const DIMENSIONS = ["cpu_millis", "memory_mb", "disk_mb", "gpu_count"] as const;

/** A worker's reserved and capacity vectors, in the contract's whole units. */
export type Dimensions = { [D in (typeof DIMENSIONS)[number]]: number };
export type WorkerUsage = { worker: string; capacity: Dimensions; reserved: Dimensions };

/** What the Hub exposes for scrape-time gauges; the metrics never reach into its parts. */
export type MetricSources = {
  /** How many tasks have each value of an informer index over Task ("state", QUEUED_REASON_INDEX). */
  taskCounts(index: string): ReadonlyMap<string, number>;
  workers(): Iterable<WorkerUsage>;
  watchers(): number;
  rejectedFiles(): number;
  /** Every queue's figures (usage summed from leases); absent or empty while no Queue exists. */
  queues?(): Iterable<QueueUsage>;
  /** The store's durable commits and the writes they carried (Store.commitStats). */
  commits?(): CommitStats;
};

/** One queue at scrape time; dimensions include `gpu_types.<type>`. */
export type QueueUsage = {
  queue: string;
  used: Record<string, number>;
  quota: Record<string, number>;
  pending: number;
  admitted: number;
  share: number;
};

/** The informer index over Task that loom_queued_tasks counts: a queued task's Admitted reason. */
export const QUEUED_REASON_INDEX = "queuedReason";
export const queuedReasonIndex = (t: Task): string[] => {
  const r = queuedReason(t);
  return r === undefined ? [] : [r];
};

/** prom-client's default gauges whose names end in `_total`. */
export const TOTAL_GAUGES = [
  "nodejs_active_handles_total",
  "nodejs_active_requests_total",
  "nodejs_active_resources_total",
];

const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

export class HubMetrics implements SchedulerObserver {
  readonly registry = new Registry();
  private readonly granted: Counter<"mode">;
  private readonly released: Counter<"reason">;
  private readonly claimSeconds: Histogram;
  private readonly claimGranted: Histogram;
  private readonly claimRaces: Counter;
  private readonly commitSeconds: Histogram<"result">;
  private readonly commitOps: Histogram;
  private readonly passSeconds: Histogram<"controller">;
  private readonly passWrites: Counter<"controller">;
  private readonly passErrors: Counter<"controller">;
  private readonly fileRejections: Counter;
  private readonly eventsDropped: Counter<"reason">;
  private readonly queueWait: Histogram<"queue">;

  constructor(sources: MetricSources) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: 20 });
    // prom-client names three gauges with a counter's `_total` suffix, which `promtool check
    // metrics` refuses; the same counts stay served by type (nodejs_active_handles, ...), whose sum is the total.
    for (const name of TOTAL_GAUGES) this.registry.removeSingleMetric(name);
    this.granted = new Counter({
      name: "loom_leases_granted_total",
      help: "Leases granted, by how the task reached its worker (pull claim or push).",
      labelNames: ["mode"],
      registers,
    });
    this.released = new Counter({
      name: "loom_leases_released_total",
      help: "Leases ended, by the reason recorded on the attempt (completed, failed, lease_expired, cancelled, ...).",
      labelNames: ["reason"],
      registers,
    });
    this.claimSeconds = new Histogram({
      name: "loom_claim_duration_seconds",
      help: "Time to decide and durably write one claim's leases, long-poll waiting excluded.",
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.claimRaces = new Counter({
      name: "loom_claim_races_lost_total",
      help: "Claim commits that lost a race (another replica's write, or one the informer had not shown yet), after which the claim decided again.",
      registers,
    });
    this.claimGranted = new Histogram({
      name: "loom_claim_granted_tasks",
      help: "Tasks leased by one claim decision.",
      buckets: [0, 1, 2, 4, 8, 16, 64],
      registers,
    });
    this.commitSeconds = new Histogram({
      name: "loom_store_commit_duration_seconds",
      help: "Scheduler store transactions: time from submit to durable commit and informer catch-up.",
      labelNames: ["result"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.commitOps = new Histogram({
      name: "loom_store_commit_batch_ops",
      help: "Writes carried by one scheduler store transaction.",
      buckets: [1, 2, 4, 8, 16, 32, 64, 128, 256],
      registers,
    });
    this.passSeconds = new Histogram({
      name: "loom_reconcile_pass_duration_seconds",
      help: "Duration of one reconcile of one key, by controller (its count is the number of reconciles).",
      labelNames: ["controller"],
      buckets: [0.001, 0.005, 0.025, 0.1, 0.5, 1, 5, 15, 60],
      registers,
    });
    this.passWrites = new Counter({
      name: "loom_reconcile_writes_total",
      help: "Objects written by reconciles, by controller.",
      labelNames: ["controller"],
      registers,
    });
    this.passErrors = new Counter({
      name: "loom_reconcile_errors_total",
      help: "Reconciles that failed (and were retried with backoff), by controller.",
      labelNames: ["controller"],
      registers,
    });
    this.eventsDropped = new Counter({
      name: "loom_events_dropped_total",
      help: "Events not recorded because their reason was over its budget (status and attempts still record what happened), by reason.",
      labelNames: ["reason"],
      registers,
    });
    this.fileRejections = new Counter({
      name: "loom_gitops_file_rejections_total",
      help: "Times a watched file was rejected (it did not parse or validate; nothing changed).",
      registers,
    });

    /** A gauge counting tasks by one label, read from an informer index at each scrape (no walk over the tasks). */
    const taskCount = (name: string, help: string, label: string, index: string) =>
      new Gauge({
        name,
        help,
        labelNames: [label],
        registers,
        collect() {
          this.reset();
          for (const [k, n] of sources.taskCounts(index)) this.set({ [label]: k }, n);
        },
      });
    const committed = (name: string, help: string, pick: (c: CommitStats) => number) =>
      new Counter({
        name,
        help,
        registers,
        collect() {
          const c = sources.commits?.();
          if (!c) return;
          this.reset();
          this.inc(pick(c));
        },
      });
    committed(
      "loom_store_commits_total",
      "Durable commits of the store: etcd Txns sent (one round trip each) or SQLite WAL flushes (one fsync each); writes decided meanwhile share one.",
      (c) => c.commits,
    );
    committed(
      "loom_store_committed_writes_total",
      "Store transactions the durable commits carried (one may write several objects).",
      (c) => c.writes,
    );
    committed(
      "loom_store_commits_failed_total",
      "Writes whose commit failed its compares and were decided again on fresh reads (etcd: a key they read had moved since; SQLite writes never race).",
      (c) => c.failed,
    );
    taskCount("loom_tasks", "Tasks by state.", "state", "state");
    taskCount(
      "loom_queued_tasks",
      "Queued tasks by the reason of their Admitted condition (WorkerAvailable when some worker could take them now).",
      "reason",
      QUEUED_REASON_INDEX,
    );
    const usage = (name: string, help: string, pick: (u: WorkerUsage) => Dimensions) =>
      new Gauge({
        name,
        help,
        labelNames: ["worker", "dimension"],
        registers,
        collect() {
          this.reset();
          for (const u of sources.workers())
            for (const d of DIMENSIONS) this.set({ worker: u.worker, dimension: d }, pick(u)[d]);
        },
      });
    usage(
      "loom_worker_reserved",
      "Resources reserved by active leases, per worker and dimension (cpu_millis, memory_mb, disk_mb, gpu_count).",
      (u) => u.reserved,
    );
    usage(
      "loom_worker_capacity",
      "Effective capacity per worker and dimension (cpu_millis, memory_mb, disk_mb, gpu_count).",
      (u) => u.capacity,
    );
    const perQueue = (name: string, help: string, pick: (q: QueueUsage) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ["queue"],
        registers,
        collect() {
          this.reset();
          for (const q of sources.queues?.() ?? []) this.set({ queue: q.queue }, pick(q));
        },
      });
    const perQueueDim = (name: string, help: string, pick: (q: QueueUsage) => Record<string, number>) =>
      new Gauge({
        name,
        help,
        labelNames: ["queue", "dimension"],
        registers,
        collect() {
          this.reset();
          for (const q of sources.queues?.() ?? [])
            for (const [d, n] of Object.entries(pick(q))) this.set({ queue: q.queue, dimension: d }, n);
        },
      });
    perQueueDim(
      "loom_queue_used",
      "What each queue's active leases hold, per dimension (summed from the leases).",
      (q) => q.used,
    );
    perQueueDim("loom_queue_quota", "Each queue's nominal quota, per dimension it limits.", (q) => q.quota);
    perQueue("loom_queue_pending", "Queued tasks per queue.", (q) => q.pending);
    perQueue("loom_queue_admitted", "Tasks holding an active lease, per queue.", (q) => q.admitted);
    perQueue(
      "loom_queue_share",
      "Each queue's weighted dominant share as claims order by it (decayed when a half-life is set).",
      (q) => q.share,
    );
    this.queueWait = new Histogram({
      name: "loom_queue_wait_seconds",
      help: "Time from a task's creation to its first lease, per queue (default for a task that names none).",
      labelNames: ["queue"],
      buckets: [0.1, 1, 5, 15, 60, 300, 900, 3600, 14400, 86400],
      registers,
    });
    new Gauge({
      name: "loom_watchers",
      help: "Watch streams open on the resource API.",
      registers,
      collect() {
        this.set(sources.watchers());
      },
    });
    new Gauge({
      name: "loom_gitops_files_rejected",
      help: "Watched files whose last version was rejected; their previous state stays applied.",
      registers,
      collect() {
        this.set(sources.rejectedFiles());
      },
    });
  }

  commit(seconds: number, ops: number, error?: unknown): void {
    // A refusal (conflict, invalid) is the store working; anything else is a failed commit.
    this.commitSeconds.observe(
      { result: error === undefined ? "ok" : error instanceof StoreError ? "refused" : "error" },
      seconds,
    );
    this.commitOps.observe(ops);
  }

  claim(seconds: number, granted: number): void {
    this.claimSeconds.observe(seconds);
    this.claimGranted.observe(granted);
  }

  claimRaceLost(): void {
    this.claimRaces.inc();
  }

  /** One reconcile of one key by a controller; `error` is what it threw, when it failed. */
  reconciled(controller: string, seconds: number, writes: number, error?: unknown): void {
    this.passSeconds.observe({ controller }, seconds);
    if (writes) this.passWrites.inc({ controller }, writes);
    if (error !== undefined) this.passErrors.inc({ controller });
  }

  fileRejected(): void {
    this.fileRejections.inc();
  }

  eventDropped(reason: string): void {
    this.eventsDropped.inc({ reason });
  }

  /**
   * Leases follow from task changes, so every path that grants or ends one (claim, push,
   * expiry, cancel, admin, a deleted task) is counted the same way.
   */
  onTaskChange(ev: InformerEvent): void {
    if (!isKind(ev.object, "Task") || ev.synthetic) return;
    const old = isKind(ev.old, "Task") ? ev.old : undefined;
    const cur = ev.type === "DELETED" ? undefined : ev.object;
    const oldLease = old && isActive(old.status?.state) ? old.status?.lease : undefined;
    const curLease = cur && isActive(cur.status?.state) ? cur.status?.lease : undefined;
    if (oldLease && (!curLease || curLease.epoch !== oldLease.epoch || curLease.worker !== oldLease.worker)) {
      const ended = cur?.status?.attempts?.findLast(
        (a) => a.attempt === oldLease.epoch && a.worker === oldLease.worker,
      );
      this.released.inc({ reason: ended?.reason ?? (cur ? (cur.status?.state ?? "unknown") : "task_deleted") });
    }
    if (curLease && (!oldLease || curLease.epoch !== oldLease.epoch || curLease.worker !== oldLease.worker)) {
      this.granted.inc({ mode: curLease.mode ?? "pull" });
      const created = Date.parse(cur!.metadata.creationTimestamp ?? "");
      const leased = Date.parse(curLease.leased_at ?? "");
      if ((cur!.status?.attempt ?? 1) === 1 && !Number.isNaN(created) && !Number.isNaN(leased))
        this.queueWait.observe({ queue: cur!.spec.queue ?? "default" }, Math.max(0, leased - created) / 1000);
    }
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
