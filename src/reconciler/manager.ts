// The Hub's controllers, all of one shape (controller.ts), and which change wakes which key.
// Every controller is level-triggered, so a missed or duplicated wake-up costs a pass, never
// a wrong result; each has a periodic resync that backs up the watch.
import { isKind, isQueued, type Task } from "../resources/types.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import type { PushOptions } from "../scheduler/direct-endpoint.ts";
import { isNews, type InformerEvent } from "../store/cache.ts";
import { AdmissionConditions, type AdmissionConditionsOptions } from "./admission-conditions.ts";
import { CampaignReconciler } from "./campaign.ts";
import { ALL, Controller, type Logger, type ReconcileObserver } from "./controller.ts";
import { EventGc, type EventGcOptions } from "./event-gc.ts";
import { LeaseExpiry } from "./lease-expiry.ts";
import { PushDispatcher } from "./push.ts";
import { QueueStatusReconciler } from "./queue-status.ts";
import { ReclaimController } from "./reclaim.ts";
import { queueName } from "../admission/queues.ts";
import { WorkerReconciler } from "./worker.ts";

export type ManagerOptions = {
  /** How often every controller looks at everything again. */
  resyncMs: number;
  /** How often the lease controller looks at every active lease again (a backstop; each lease is expired at its lease_until). */
  leaseResyncMs: number;
  push: PushOptions;
  conditions?: Partial<AdmissionConditionsOptions>;
  events: Omit<EventGcOptions, "dropped">;
};

/** What the controllers are built from; the Hub (the composition root) passes it in. */
export type ManagerDeps = {
  /** What the controllers use of the scheduler; each is handed the part it names. */
  scheduler: ControllerServices;
  log: Logger;
  observe?: ReconcileObserver;
  /** Told which Events the GC dropped. */
  eventsDropped?: (names: ReadonlySet<string>) => void;
};

/**
 * A worker's status (reserved, available, active leases) follows its leases after this
 * delay: a busy worker's leases change many times a second, and its status is rewritten
 * at most about twice a second instead of on each. Admission never reads it (it derives
 * headroom from the leases themselves); worker-capacity and task-admission are live.
 */
export const WORKER_STATUS_COALESCE_MS = 500;

/** The same for a Queue's status (usage, counts, shares): a busy queue's is rewritten at most about twice a second. */
export const QUEUE_STATUS_COALESCE_MS = 500;

/** A Campaign's counts follow its tasks after this delay: one pass over its tasks for a burst of changes. */
export const CAMPAIGN_COUNTS_COALESCE_MS = 300;

export class ControllerManager {
  readonly campaigns: Controller;
  readonly workers: Controller;
  readonly admission: Controller;
  readonly push: Controller;
  private readonly pushDispatcher: PushDispatcher;
  readonly leases: Controller;
  readonly events: Controller;
  readonly queues: Controller;
  readonly reclaim: Controller;
  private readonly all: Controller[];
  private readonly minIntervalMs: number;
  private unsubscribe: () => void = () => {};
  /** What the manager itself reads: informer events, liveness changes, whether queues are in use. */
  private readonly sources: Pick<ControllerServices, "cache" | "liveness" | "queues">;
  private readonly leaseExpiry: LeaseExpiry;
  private readonly conditions: AdmissionConditions;

  constructor(deps: ManagerDeps, opts: ManagerOptions) {
    const { scheduler: s, log, observe } = deps;
    this.sources = s;
    const every = (resyncMs: number) => ({ log, observe, resyncMs });
    this.campaigns = new Controller(new CampaignReconciler(s.store, s.cache, s.recordEvent), every(opts.resyncMs));
    this.workers = new Controller(new WorkerReconciler(s), every(opts.resyncMs));
    const conditions = new AdmissionConditions(s, opts.conditions);
    this.conditions = conditions;
    this.minIntervalMs = conditions.opts.minIntervalMs;
    this.admission = new Controller(conditions, every(opts.resyncMs));
    this.pushDispatcher = new PushDispatcher(s, opts.push, log);
    this.push = new Controller(this.pushDispatcher, every(opts.resyncMs));
    this.leaseExpiry = new LeaseExpiry(s);
    this.leases = new Controller(this.leaseExpiry, every(opts.leaseResyncMs));
    // The GC requeues itself every `everyMs`; a resync would only add passes.
    this.events = new Controller(new EventGc(s.store, { ...opts.events, dropped: deps.eventsDropped }), every(0));
    this.queues = new Controller(new QueueStatusReconciler(s), every(opts.resyncMs));
    this.reclaim = new Controller(new ReclaimController(s), every(opts.resyncMs));
    this.all = [
      this.campaigns,
      this.workers,
      this.admission,
      this.push,
      this.leases,
      this.events,
      this.queues,
      this.reclaim,
    ];
  }

  /**
   * A change that can move any queued task's answer: a pass of conditions (after a short
   * coalescing delay) and of push. A push pass runs only while a worker takes pushes: the
   * Worker change that makes one does come here, and a pull fleet's every lease write would
   * otherwise run an empty pass.
   */
  private wakeQueuePasses(): void {
    this.admission.enqueue(ALL, this.minIntervalMs);
    if (this.pushDispatcher.hasPushWorkers) this.push.enqueue(ALL);
    if (this.sources.queues.active) this.reclaim.enqueue(ALL, 200);
  }

  private onChange(ev: InformerEvent): void {
    const o = ev.object;
    // A Campaign's status write (its controller's own counts) waits as task changes do:
    // looked at again at once, each pass would see the counts moved and write again.
    if (o.kind === "Campaign") this.campaigns.enqueue(o.metadata.name, isNews(ev) ? 0 : CAMPAIGN_COUNTS_COALESCE_MS);
    else if (o.kind === "Queue") {
      // A new Queue or a new spec (quota, limits, weight) can move any queued task's answer.
      // A status write (the queue controller's own) moves none, since admission reads the
      // ledger and the spec, never the status: it wakes nothing else, and the controller
      // looks again after the coalescing delay, as after task changes.
      const news = isNews(ev);
      this.queues.enqueue(o.metadata.name, news ? 0 : QUEUE_STATUS_COALESCE_MS);
      if (news) this.wakeQueuePasses();
    } else if (o.kind === "Worker") {
      // A new worker or a new spec is looked at once. A status change (the worker controller's
      // own write, a Runner's registration) waits the coalescing delay as lease changes do:
      // otherwise each status write would start the next pass at once, and a busy worker's
      // status would be rewritten back to back.
      const news = isNews(ev);
      this.workers.enqueue(o.metadata.name, news ? 0 : WORKER_STATUS_COALESCE_MS);
      this.wakeQueuePasses();
    } else if (isKind(o, "Task")) {
      const campaign = CampaignReconciler.keyOf(o) ?? (ev.old ? CampaignReconciler.keyOf(ev.old) : undefined);
      // Counting is coalesced: a burst of task changes becomes one campaign pass.
      if (campaign) this.campaigns.enqueue(campaign, ev.type === "DELETED" ? 0 : CAMPAIGN_COUNTS_COALESCE_MS);
      // A queue's figures are coalesced the same way, and only a Queue object has a status.
      if (this.sources.queues.active)
        for (const q of new Set([
          queueName(o.spec),
          ...(ev.old && isKind(ev.old, "Task") ? [queueName(ev.old.spec)] : []),
        ]))
          this.queues.enqueue(q, QUEUE_STATUS_COALESCE_MS);
      // A queued task that left the queue with a lease: its shape was admissible just now.
      if (o.status?.lease && ev.old && isKind(ev.old, "Task") && isQueued(ev.old.status?.state ?? "queued"))
        this.conditions.granted(ev.old);
      for (const t of [o, ev.old] as (Task | undefined)[]) {
        const w = t?.status?.lease?.worker;
        if (w) this.workers.enqueue(w, WORKER_STATUS_COALESCE_MS);
      }
      const due = ev.type === "DELETED" ? undefined : this.leaseExpiry.delayOf(o);
      if (due !== undefined) this.leases.enqueue(o.metadata.name, due);
      else if (ev.type === "DELETED" || (ev.old && isKind(ev.old, "Task") && ev.old.status?.lease)) {
        // The lease ended, or its task went: the wake-up at lease_until is owed nothing. A
        // renewal left behind is dropped now rather than at that time.
        const gone = ev.type === "DELETED" ? undefined : o;
        this.leases.cancel(o.metadata.name);
        if (this.leaseExpiry.leftBehind(o.metadata.name, gone)) this.leases.enqueue(o.metadata.name);
      }
      this.wakeQueuePasses();
    }
  }

  start(): void {
    this.unsubscribe = this.sources.cache.on((ev) => this.onChange(ev));
    const stopLiveness = this.sources.liveness.subscribe((w) => {
      this.workers.enqueue(w);
      this.wakeQueuePasses();
    });
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = () => {
      unsubscribe();
      stopLiveness();
    };
    for (const c of this.all) c.start();
  }

  /** Look at everything again: the backstop for anything a watch event did not say. */
  resyncAll(): void {
    for (const c of this.all) c.resync();
  }

  async stop(): Promise<void> {
    this.unsubscribe();
    await Promise.all(this.all.map((c) => c.stop()));
  }
}
