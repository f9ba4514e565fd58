// Push dispatcher: Direct Runners in push mode do not claim; the Hub leases queued work
// to them and delivers it, through the same admission and lease write as a pull claim.
import { concurrencyOf } from "../admission/index.ts";
import type { Worker } from "../resources/types.ts";
import { pickForWorker } from "../scheduler/claim.ts";
import type { SchedulerContext } from "../scheduler/context.ts";
import { HubError } from "../protocol/errors.ts";
import { parsePush } from "../protocol/parse.ts";
import { confirmDirectRunners } from "../scheduler/direct-liveness.ts";
import { directEndpoint, pushTask, type PushOptions } from "../scheduler/push.ts";
import type { ClaimQueue } from "../scheduler/queue.ts";
import type { StoredObject } from "../store/store.ts";
import { ALL, type Logger, type Reconciler, type Result } from "./controller.ts";

export const isPushWorker = (w: Worker) => !!directEndpoint(w) && w.spec.direct_api_dispatch_mode === "push";

/**
 * The push controller has one key (ALL), not one per worker: push-mode workers draw from one
 * claim queue in turn, and a new queued task can make any of them eligible, so per-worker
 * keys would each scan the same queue for the same change. A pass visits only push-mode
 * workers (an index), whatever the number of pull workers.
 */
export class PushDispatcher implements Reconciler {
  readonly name = "push";
  /** Workers that refused or could not be reached, and until when they rest. */
  private readonly resting = new Map<string, number>();
  pushes = 0;

  constructor(private readonly ctx: SchedulerContext, private readonly queue: ClaimQueue, private readonly push: PushOptions, private readonly log: Logger, private readonly restMs = 5000) {
    ctx.cache.addIndex("Worker", "pushMode", (w) => (isPushWorker(w) ? ["push"] : []));
  }

  keys(): string[] {
    return [ALL];
  }

  /** One pass; a worker put to rest is looked at again when its rest ends. */
  async reconcile(_key: string, signal: AbortSignal): Promise<Result> {
    const before = this.pushes;
    const rested = await this.pass(signal);
    return { writes: this.pushes - before, ...(rested ? { requeueAfterMs: this.restMs } : {}) };
  }

  /** Push what fits to every ready push-mode worker; true if a worker was put to rest. */
  async pass(signal?: AbortSignal): Promise<boolean> {
    let rested = false;
    const now = this.ctx.now();
    const workers = this.ctx.cache.byIndex<Worker & StoredObject>("Worker", "pushMode", "push");
    // An idle v1 Direct Runner does not heartbeat: the quiet ones are asked before the pass.
    await confirmDirectRunners(this.ctx, workers.filter((w) => (this.resting.get(w.metadata.name) ?? 0) <= now), this.push);
    for (const w of workers) {
      if (w.spec.unschedulable || !w.status?.registration) continue;
      if ((this.resting.get(w.metadata.name) ?? 0) > now) continue;
      const view = this.ctx.workerView(w);
      if (!view.ready) continue;
      const c = concurrencyOf(view);
      const { picks } = pickForWorker(this.queue, this.ctx, w, Math.max(0, c.effective_limit - c.active_count));
      for (const p of picks) {
        if (signal?.aborted) return rested;
        try {
          await pushTask(this.ctx, parsePush({ task_id: p.task.metadata.name, worker_id: w.metadata.name }), this.push);
          this.pushes++;
        } catch (e) {
          // A refusal or an unknown outcome: rest this worker a while instead of hammering it.
          if (e instanceof HubError && e.status < 500 && e.code === "task_not_queueable") continue;
          this.resting.set(w.metadata.name, this.ctx.now() + this.restMs);
          this.log("warn", `push to ${w.metadata.name} failed`, { err: (e as Error).message });
          rested = true;
          break;
        }
      }
    }
    return rested;
  }
}
