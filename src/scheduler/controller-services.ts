// What the controllers (reconciler/) and the Hub's metrics use of the scheduler: the store,
// the informer, the clock, the reads they decide on, and the few scheduler steps they run,
// each bound here to the scheduler's context, which stays inside scheduler/. Each controller
// names, in its own file, the part of this it uses.
import type { WorkerView } from "../admission/index.ts";
import type { LoomEvent } from "../resources/meta.ts";
import type { Task, Worker } from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import type { Known, Store } from "../store/store.ts";
import { pickForWorker, type Pick } from "./claim.ts";
import type { SchedulerContext } from "./context.ts";
import type { PushOptions } from "./direct-endpoint.ts";
import { confirmDirectRunners } from "./direct-liveness.ts";
import type { Liveness } from "./liveness.ts";
import { nominate, type Nomination, type Slicer } from "./nomination.ts";
import { pushTask } from "./push.ts";
import { queuesReport } from "./queue-explain.ts";
import type { QueueLedger } from "./queue-ledger.ts";
import type { ClaimQueue } from "./queue.ts";
import { planReclaim, reclaimLease, type ReclaimPlan, type Victim } from "./reclaim.ts";
import type { TaskLease } from "./renewal.ts";
import { expireLease, type Expired } from "./transitions.ts";
import { capacityEntry } from "./workers.ts";
/** What capacityEntry derives for one worker (every field present, unlike the reply type). */
type CapacityEntry = ReturnType<typeof capacityEntry>;
import type { PushOrder } from "../protocol/parse.ts";

export interface ControllerServices {
  readonly store: Store;
  readonly cache: Informer;
  /** The informer's copy of an object (ApplyOptions.known): what a write may decide on instead of reading it. */
  readonly known: Known;
  /** The claim queue: its shapes, in claim order. */
  readonly queue: ClaimQueue;
  /** Queues' limits, usage and shares. */
  readonly queues: QueueLedger;
  /** Each worker's last call, and who listens for changes of it. */
  readonly liveness: Liveness;
  /** A worker whose last call is older than this is not Ready. */
  readonly heartbeatGraceSeconds: number;
  /** A queued task that fits nowhere this long nominates a worker. */
  readonly nominateAfterSeconds: number;
  /** The clock (ms since the epoch). */
  now(): number;
  recordEvent(e: LoomEvent): void;
  task(name: string): Task | undefined;
  worker(name: string): Worker | undefined;
  tasksInState(state: string): Task[];
  renewal(task: string): TaskLease | undefined;
  /** The admission view of a worker now (its leases, decisions in flight, liveness, nominee, queues). */
  workerView(w: Worker): WorkerView;
  capacityEntry(w: Worker): CapacityEntry;
  /** What the worker would lease now, up to `limit`, in claim order. */
  pickForWorker(w: Worker, limit: number): { picks: Pick[] };
  /** Lease a queued task to a Direct Runner and deliver it. */
  pushTask(order: PushOrder, o: PushOptions): Promise<unknown>;
  /** Ask the quiet Direct Runners among `workers` whether they are alive. */
  confirmDirectRunners(workers: Worker[], o: PushOptions): Promise<void>;
  /** Which borrowed leases to end now for preempting queues; writes nothing. */
  planReclaim(): ReclaimPlan[];
  reclaimLease(plan: ReclaimPlan, victim: Victim): Promise<Task | undefined>;
  /** End a task's lease if its stored lease_until has passed. */
  expireLease(task: string): Promise<Expired | undefined>;
  /** Every queue's figures and rank (also what the Hub's metrics show). */
  queuesReport(): ReturnType<typeof queuesReport>;
  /** The nominations of the queued tasks that fit nowhere, over these views. */
  nominate(
    views: readonly WorkerView[],
    now: number,
    slice?: Slicer,
  ): Promise<{ byWorker: Map<string, Nomination>; nextDue: number }>;
}

export function controllerServices(ctx: SchedulerContext, queue: ClaimQueue): ControllerServices {
  return {
    store: ctx.store,
    cache: ctx.cache,
    known: ctx.known,
    queue,
    queues: ctx.queues,
    liveness: ctx.liveness,
    heartbeatGraceSeconds: ctx.opts.heartbeatGraceSeconds,
    nominateAfterSeconds: ctx.opts.nominateAfterSeconds ?? 60,
    now: () => ctx.now(),
    recordEvent: (e) => ctx.recordEvent(e),
    task: (name) => ctx.task(name),
    worker: (name) => ctx.worker(name),
    tasksInState: (state) => ctx.tasksInState(state),
    renewal: (task) => ctx.renewal(task),
    workerView: (w) => ctx.workerView(w),
    capacityEntry: (w) => capacityEntry(ctx, w),
    pickForWorker: (w, limit) => pickForWorker(queue, ctx, w, limit),
    pushTask: (req, o) => pushTask(ctx, req, o),
    confirmDirectRunners: (workers, o) => confirmDirectRunners(ctx, workers, o),
    planReclaim: () => planReclaim(ctx, queue),
    reclaimLease: (plan, victim) => reclaimLease(ctx, plan, victim),
    expireLease: (task) => expireLease(ctx, task),
    queuesReport: () => queuesReport(ctx),
    nominate: (views, now, slice) => nominate(ctx, queue, views, now, ctx.opts.nominateAfterSeconds ?? 60, slice),
  };
}
