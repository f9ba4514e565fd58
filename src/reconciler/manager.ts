// Wires the controllers to the informer: which change wakes which key, plus a periodic
// resync that backs up the watch. Every controller is level-triggered, so a missed or
// duplicated wake-up costs a pass, never a wrong result.
import type { Task } from "../resources/types.ts";
import type { SchedulerContext } from "../scheduler/context.ts";
import type { PushOptions } from "../scheduler/push.ts";
import type { Scheduler } from "../scheduler/scheduler.ts";
import type { StoredObject } from "../store/store.ts";
import { AdmissionConditions, type AdmissionConditionsOptions } from "./admission-conditions.ts";
import { CampaignReconciler } from "./campaign.ts";
import { Controller, type Logger } from "./controller.ts";
import { PushDispatcher } from "./push.ts";
import { WorkerReconciler } from "./worker.ts";

export type ManagerOptions = { resyncMs: number; push: PushOptions; conditions?: Partial<AdmissionConditionsOptions> };

export class ControllerManager {
  readonly campaigns: Controller;
  readonly workers: Controller;
  readonly admission: AdmissionConditions;
  readonly push: PushDispatcher;
  private resync: NodeJS.Timeout | undefined;
  private unsubscribe: () => void = () => {};
  private readonly ctx: SchedulerContext;

  constructor(scheduler: Scheduler, log: Logger, private readonly opts: ManagerOptions) {
    const ctx = (this.ctx = scheduler.ctx);
    this.campaigns = new Controller(new CampaignReconciler(ctx.store, ctx.cache, (e) => ctx.recordEvent(e)), log);
    this.workers = new Controller(new WorkerReconciler(ctx), log);
    this.admission = new AdmissionConditions(ctx, scheduler.queue, log, opts.conditions);
    this.push = new PushDispatcher(ctx, scheduler.queue, opts.push, log);
  }

  start(): void {
    const { ctx } = this;
    this.unsubscribe = ctx.cache.on((ev) => {
      const o = ev.object;
      if (o.kind === "Campaign") this.campaigns.queue.add(o.metadata.name);
      else if (o.kind === "Worker") {
        this.workers.queue.add(o.metadata.name);
        this.admission.markDirty();
        this.push.markDirty();
      } else if (o.kind === "Task") {
        const campaign = CampaignReconciler.keyOf(o) ?? (ev.old ? CampaignReconciler.keyOf(ev.old) : undefined);
        // Counting is coalesced: a burst of task changes becomes one campaign pass.
        if (campaign) this.campaigns.queue.addAfter(campaign, ev.type === "DELETED" ? 0 : 300);
        for (const t of [o, ev.old] as (Task | undefined)[]) {
          const w = t?.status?.lease?.worker;
          if (w) this.workers.queue.addAfter(w, 100);
        }
        this.admission.markDirty();
        this.push.markDirty();
      }
    });
    ctx.liveness.onChange = (w) => {
      this.workers.queue.add(w);
      this.admission.markDirty();
      this.push.markDirty();
    };
    this.campaigns.start();
    this.workers.start();
    this.resyncAll();
    this.resync = setInterval(() => this.resyncAll(), this.opts.resyncMs);
    this.resync.unref();
  }

  /** Look at everything again: the backstop for anything a watch event did not say. */
  resyncAll(): void {
    for (const c of this.ctx.cache.list<StoredObject>("Campaign")) this.campaigns.queue.add(c.metadata.name);
    for (const w of this.ctx.cache.list<StoredObject>("Worker")) this.workers.queue.add(w.metadata.name);
    this.admission.markDirty();
    this.push.markDirty();
  }

  async stop(): Promise<void> {
    clearInterval(this.resync);
    this.unsubscribe();
    this.ctx.liveness.onChange = () => {};
    await Promise.all([this.campaigns.stop(), this.workers.stop(), this.admission.stop(), this.push.stop()]);
  }
}
