// Push dispatcher: Direct Runners in push mode do not claim; the Hub leases queued work
// to them and delivers it, through the same admission and lease write as a pull claim.
import { concurrencyOf } from "../admission/index.ts";
import type { Worker } from "../resources/types.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import { HubError } from "../protocol/errors.ts";
import { parsePush } from "../protocol/parse.ts";
import { directEndpoint, type PushOptions } from "../scheduler/direct-endpoint.ts";
import type { StoredObject } from "../store/store.ts";
import { ALL, type Logger, type Reconciler, type Result } from "./controller.ts";

export const isPushWorker = (w: Worker) => !!directEndpoint(w) && w.spec.direct_api_dispatch_mode === "push";

/**
 * The push controller has one key (ALL), not one per worker: push-mode workers draw from one
 * claim queue in turn, and a new queued task can make any of them eligible, so per-worker
 * keys would each scan the same queue for the same change. A pass visits only push-mode
 * workers (an index), whatever the number of pull workers.
 */
/** What the push controller uses: push-mode workers, their views, what fits them, and the push itself. */
export type PushControllerDeps = Pick<
  ControllerServices,
  "cache" | "now" | "workerView" | "pickForWorker" | "pushTask" | "confirmDirectRunners"
>;

export class PushDispatcher implements Reconciler {
  readonly name = "push";
  /** Workers that refused or could not be reached, and until when they rest. */
  private readonly resting = new Map<string, number>();
  pushes = 0;

  constructor(
    private readonly deps: PushControllerDeps,
    private readonly push: PushOptions,
    private readonly log: Logger,
    private readonly restMs = 5000,
  ) {
    deps.cache.addIndex("Worker", "pushMode", (w) => (isPushWorker(w) ? ["push"] : []));
  }

  keys(): string[] {
    return [ALL];
  }

  /** Whether any worker takes pushes: with none, a change to the queue gives a pass nothing to do. */
  get hasPushWorkers(): boolean {
    return this.deps.cache.indexSize("Worker", "pushMode", "push") > 0;
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
    const now = this.deps.now();
    const workers = this.deps.cache.byIndex<Worker & StoredObject>("Worker", "pushMode", "push");
    // An idle v1 Direct Runner does not heartbeat: the quiet ones are asked before the pass.
    await this.deps.confirmDirectRunners(
      workers.filter((w) => (this.resting.get(w.metadata.name) ?? 0) <= now),
      this.push,
    );
    for (const w of workers) {
      if (w.spec.unschedulable || !w.status?.registration) continue;
      if ((this.resting.get(w.metadata.name) ?? 0) > now) continue;
      const view = this.deps.workerView(w);
      if (!view.ready) continue;
      const c = concurrencyOf(view);
      const { picks } = this.deps.pickForWorker(w, Math.max(0, c.effective_limit - c.active_count));
      for (const p of picks) {
        if (signal?.aborted) return rested;
        try {
          await this.deps.pushTask(parsePush({ task_id: p.task.metadata.name, worker_id: w.metadata.name }), this.push);
          this.pushes++;
        } catch (e) {
          // A refusal or an unknown outcome: rest this worker a while instead of hammering it.
          if (e instanceof HubError && e.status < 500 && e.code === "task_not_queueable") continue;
          this.resting.set(w.metadata.name, this.deps.now() + this.restMs);
          this.log("warn", `push to ${w.metadata.name} failed`, { err: (e as Error).message });
          rested = true;
          break;
        }
      }
    }
    return rested;
  }
}
