// Task conditions that explain admission. Queued tasks with the same requirement shape
// get the same answer, so each pass asks admission once per shape and worker, then writes
// only the tasks whose condition changed. A change of status or reason is written at once,
// with one exception: while leases come and go, a queued task's answer swings between
// "a worker has room now" and "waiting for a lease to end" many times a second, and
// rewriting every queued task on each swing would cost far more than the leases. Such a
// swing is written once the new answer has held for `settleMs`; a lease granted to a task of
// the shape shows it was admissible then, so "waiting" has held only since the shape's last
// grant (passes sample the answer, and a room taken within milliseconds is never seen by
// one). A message that only moved its numbers is refreshed at most every `refreshMs`.
import { admit, explainTask, summarize, taskView, type Decision } from "../admission/index.ts";
import { getCondition, isQueued, type Task, type TaskStatus, type Worker } from "../resources/types.ts";
import type { LoomEvent } from "../resources/meta.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import { admissionUnsettled, settleAdmission, writeAdmission, type AdmissionAnswer } from "../scheduler/lifecycle.ts";
import { nominationChanged, setNomination, type Nomination } from "../scheduler/nomination.ts";
import { shapeKey, type Shape } from "../scheduler/queue.ts";
import { without } from "../scheduler/why.ts";
import { isStoreError } from "../store/errors.ts";
import type { StoredObject, TxnOp } from "../store/store.ts";
import { ALL, type Reconciler, type Result } from "./controller.ts";
import { ChunkSize, TimeSlice } from "./slice.ts";
import { jsonClone } from "../resources/json.ts";

export type AdmissionConditionsOptions = {
  /** How long a change waits before it wakes a pass (a burst of changes becomes one pass), and the pause before writes left for later. */
  minIntervalMs: number;
  /** A message that only moved its numbers is rewritten at most this often. */
  refreshMs: number;
  /** How long a swing between admissible and waiting-on-leases must hold before it is written. */
  settleMs: number;
  maxWritesPerPass: number;
};

const UNSETTLED_INDEX = "admission-unsettled";

/**
 * After a pass that kept the Hub busy for T ms, the next starts no sooner than T ×
 * PASS_SPACING ms later, so the passes take at most a quarter of the Hub's time, however
 * many shapes and workers they weigh, and requests stay ahead of them. T is the event loop's
 * busy time during the pass (the pass's own work and whatever ran between its slices), not
 * the time it waited for its writes to reach the disk. A pass of a few milliseconds waits a
 * few more; one over 10,000 shapes and their workers, rerun by every lease change, no longer
 * crowds out the leases themselves.
 */
const PASS_SPACING = 3;

/**
 * The pass's slices of work between two yields to I/O, in ms. A claim that arrives during a
 * pass waits behind one slice for its turn, and again for the answer once its write is on
 * disk, so a slice stays well under what a claim may take.
 */
const SLICE_MS = 4;

export const DEFAULT_CONDITIONS: AdmissionConditionsOptions = {
  minIntervalMs: 500,
  refreshMs: 60_000,
  settleMs: 2_000,
  maxWritesPerPass: 2000,
};

/**
 * Where a shape stands: some worker admits it now; none does, but one would once its
 * current leases end (admit() on the worker emptied of them); or something other than
 * leases is in the way (no capability, too small, cordoned, not ready).
 */
type Standing = "admissible" | "waiting" | "blocked";

type Wanted = AdmissionAnswer & {
  standing: Standing;
  /** Since when (ms) this shape's answer has been what it is now. */
  since: number;
};

/** What the conditions controller uses: the queue's shapes, the workers' views, nominations, and the store it writes in batches. */
export type ConditionsControllerDeps = Pick<
  ControllerServices,
  "store" | "cache" | "known" | "now" | "recordEvent" | "task" | "workerView" | "nominate"
> & {
  readonly queue: Pick<ControllerServices["queue"], "allShapes" | "namesOf" | "has" | "size" | "shapeCount">;
};

type View = ReturnType<ControllerServices["workerView"]>;

/** The writes one pass owes, in order: ops[i] with the Events it announces and the standing its Admitted condition says. */
type Owed = {
  ops: TxnOp[];
  /** news[i]: the Events ops[i] announces once it is written (a changed reason or shortfall, a nomination taken or ended). */
  news: LoomEvent[][];
  /** standings[i]: what ops[i]'s Admitted condition says, or undefined when it only rewrites the nomination. */
  standings: (Standing | undefined)[];
  /** More were owed than maxWritesPerPass: the rest wait for the next pass. */
  deferred: boolean;
};

const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k);

/** A message with its numbers blanked out: what it says, not how much. */
const skeleton = (m: string | undefined) => (m ?? "").replace(/\d+/g, "#");

/** The most common failure that no worker can outgrow (capability, exclusion, capacity). */
function dominantUnresolvable(decisions: Decision[]): string {
  const counts = new Map<string, number>();
  for (const d of decisions)
    for (const f of d.failures) if (!f.resolvable) counts.set(f.code, (counts.get(f.code) ?? 0) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "exceeds_worker_capacity";
}

/**
 * The Events a condition write announces: a task that cannot be admitted, when its primary
 * reason changed (not when only the message moved: which other workers are busy, or by how
 * much, is not news); one that became admissible; one found unsatisfiable.
 */
function pendingNews(t: Task, w: Wanted): LoomEvent[] {
  const cur = getCondition(t.status?.conditions, "Admitted");
  const news: LoomEvent[] = [];
  if (w.admitted.status === "True") {
    if (cur?.status === "False")
      news.push({ object: t, type: "Normal", reason: "Admissible", message: w.admitted.message });
  } else if (!cur || cur.status !== "False" || cur.reason !== w.admitted.reason)
    news.push({
      object: t,
      type: "Warning",
      reason: "NotAdmitted",
      message: `${w.admitted.reason}: ${w.admitted.message}`,
    });
  if (w.unsatisfiable && getCondition(t.status?.conditions, "Unsatisfiable")?.status !== "True")
    news.push({ object: t, type: "Warning", reason: "Unsatisfiable", message: w.unsatisfiable.message });
  return news;
}

/**
 * The conditions controller has one key (ALL): its reconcile is the pass over every queued
 * shape. Events do not name the tasks whose answer moved (a lease ending on one worker can
 * change the answer of every shape), so the whole pass is the unit of work; the queue
 * coalesces a burst of events into one pass, and `minIntervalMs` is the delay an event
 * waits before it wakes the key (see ControllerManager).
 */
export class AdmissionConditions implements Reconciler {
  readonly name = "admission-conditions";
  /** When each task's Admitted condition was last written (ms), and the standing it said. */
  private readonly lastWrite = new Map<string, { at: number; standing: Standing }>();
  /** Each shape's answer (standing, reason, message skeleton) and since when it has held. */
  private readonly answers = new Map<string, { answer: string; since: number }>();
  /** When a task of each shape was last granted a lease (ms): the shape was admissible then. */
  private readonly lastGrant = new Map<string, number>();
  /** The earliest time a deferred message refresh falls due. */
  private nextDue = Infinity;
  /** performance.now() before which no pass starts: the last pass's busy time, PASS_SPACING times over. */
  private nextPassAt = 0;
  writes = 0;
  /** Writes per transaction: each about one slice long. */
  private readonly chunks = new ChunkSize(SLICE_MS, 8, 50);
  /** Passes run (a reconcile deferred by PASS_SPACING runs none). */
  passesRun = 0;

  readonly opts: AdmissionConditionsOptions;

  private readonly queue: ConditionsControllerDeps["queue"];

  constructor(
    private readonly deps: ConditionsControllerDeps,
    opts: Partial<AdmissionConditionsOptions> = {},
  ) {
    this.opts = { ...DEFAULT_CONDITIONS, ...opts };
    this.queue = deps.queue;
    // Tasks out of the queue whose admission conditions contradict their state; every write
    // path settles them already, so this holds only what was stored some other way.
    deps.cache.addIndex("Task", UNSETTLED_INDEX, (t) => (admissionUnsettled(t.status) ? ["1"] : []));
  }

  keys(): string[] {
    return [ALL];
  }

  /** A queued task was granted a lease (the informer saw it leave the queue with one). */
  granted(task: Task): void {
    this.lastGrant.set(shapeKey(task), this.deps.now());
  }

  /** The pass; it asks to run again when writes were left for later or a deferred write falls due. */
  async reconcile(): Promise<Result> {
    // A pass asked for too soon after a long one waits (see PASS_SPACING).
    const early = this.nextPassAt - performance.now();
    if (early > 0) return { writes: 0, requeueAfterMs: Math.ceil(early) };
    const started = performance.eventLoopUtilization();
    const writesBefore = this.writes;
    this.passesRun++;
    const deferred = await this.pass();
    this.nextPassAt = performance.now() + performance.eventLoopUtilization(started).active * PASS_SPACING;
    const due = this.nextDue;
    this.nextDue = Infinity;
    const after = Math.min(
      deferred ? this.opts.minIntervalMs : Infinity,
      due === Infinity ? Infinity : Math.max(0, due - this.deps.now()),
    );
    return { writes: this.writes - writesBefore, ...(after < Infinity ? { requeueAfterMs: after } : {}) };
  }

  /**
   * One pass over every queued task, in time slices (it yields to I/O between them, so a
   * pass over 200k tasks and thousands of workers never stalls a request); returns when its
   * writes are committed. Tasks and workers that change during the pass are seen as they
   * are when reached; whatever changed behind it queues the next pass. Returns whether
   * writes were left for the next pass (more than maxWritesPerPass were owed).
   */
  async pass(): Promise<boolean> {
    const now = this.deps.now();
    const slice = new TimeSlice(SLICE_MS);
    const { views, nominees } = await this.viewsWithNominations(slice, now);
    /** Each worker as it would be with its leases ended, built on first use. */
    const emptied: (View | undefined)[] = [];
    const emptiedAt = (i: number) => (emptied[i] ??= without(views[i], new Set(views[i].leases.map((l) => l.task))));
    const owed: Owed = { ops: [], news: [], standings: [], deferred: false };
    // A snapshot of the shapes: the queue may change while the pass yields.
    for (const shape of [...this.queue.allShapes()]) {
      const wanted = await this.answer(shape, views, emptiedAt, slice, now);
      await this.oweQueued(owed, shape, wanted, nominees, slice, now);
    }
    this.oweSettling(owed, now);
    const written = await this.commit(owed.ops);
    this.remember(owed, written, now);
    return owed.deferred;
  }

  /** Every worker's view, with the nominations this pass takes (first, so its answers see them; claims see them once stored). */
  private async viewsWithNominations(
    slice: TimeSlice,
    now: number,
  ): Promise<{ views: View[]; nominees: Map<string, Nomination> }> {
    const views: View[] = [];
    for (const w of this.deps.cache.list<Worker & StoredObject>("Worker")) {
      views.push(this.deps.workerView(w));
      if (slice.due()) await slice.pause();
    }
    const nom = await this.deps.nominate(views, now, slice);
    const nominees = new Map<string, Nomination>([...nom.byWorker.values()].map((n) => [n.task.name, n]));
    if (nom.nextDue < Infinity) this.nextDue = Math.min(this.nextDue, nom.nextDue);
    for (const [i, v] of views.entries()) {
      const n = nom.byWorker.get(v.name);
      views[i] = n
        ? { ...v, nominee: { task: n.task, blockers: n.blockers, starts_at: n.starts_at, now } }
        : { ...v, nominee: undefined };
    }
    return { views, nominees };
  }

  /** What every task of one shape should say: admit() once per worker (and on the worker emptied, to tell waiting from blocked). */
  private async answer(
    shape: Shape,
    views: readonly View[],
    emptiedAt: (i: number) => View,
    slice: TimeSlice,
    now: number,
  ): Promise<Wanted> {
    const decisions: Decision[] = [];
    const tv = taskView(shape.sample);
    let waiting = false;
    for (const [i, v] of views.entries()) {
      const d = admit(tv, v);
      decisions.push(d);
      if (!d.ok && !d.unresolvable && !waiting) waiting = admit(tv, emptiedAt(i)).ok;
      if (slice.due()) await slice.pause();
    }
    const s = summarize(decisions);
    const message = decisions.length ? explainTask(decisions) : "no workers are declared or registered";
    // A task that can never fit is explained by what can never change, not by what might.
    const reason = s.unsatisfiable ? dominantUnresolvable(decisions) : (s.dominant ?? "NoWorkers");
    const standing: Standing = s.admittable.length ? "admissible" : waiting ? "waiting" : "blocked";
    const answer = `${standing} ${reason} ${standing === "admissible" ? "" : skeleton(message)}`;
    const held = this.answers.get(shape.key);
    if (held?.answer !== answer) this.answers.set(shape.key, { answer, since: now });
    const since = held?.answer === answer ? held.since : now;
    return {
      admitted: s.admittable.length
        ? { status: "True", reason: "WorkerAvailable", message }
        : { status: "False", reason, message },
      ...(s.unsatisfiable
        ? { unsatisfiable: { reason, message: "no worker could ever admit this task, even empty" } }
        : {}),
      standing,
      // Waiting on leases is interrupted by every grant to the shape, seen by a pass or not.
      since: standing === "waiting" ? Math.max(since, this.lastGrant.get(shape.key) ?? 0) : since,
    };
  }

  /** The writes owed to the queued tasks of one shape: their conditions, when due, and their nominations. */
  private async oweQueued(
    owed: Owed,
    shape: Shape,
    wanted: Wanted,
    nominees: ReadonlyMap<string, Nomination>,
    slice: TimeSlice,
    now: number,
  ): Promise<void> {
    for (const name of this.queue.namesOf(shape)) {
      if (slice.due()) await slice.pause();
      if (owed.ops.length >= this.opts.maxWritesPerPass) {
        owed.deferred = true;
        return;
      }
      const t = this.deps.task(name);
      if (!t || !isQueued(t.status?.state ?? "queued")) continue;
      let next = this.apply(t, wanted, now);
      const admittedWritten = next !== undefined;
      const events: (LoomEvent | undefined)[] = next ? pendingNews(t, wanted) : [];
      // A nomination taken, moved or ended is written at once: other replicas' claims read it.
      const n = nominees.get(name);
      if (nominationChanged(t.status, n)) {
        next ??= jsonClone(t.status ?? {});
        const ended =
          wanted.admitted.status === "True"
            ? { reason: "WorkerAvailable", message: "a worker admits it now" }
            : { reason: "NotNominated", message: "no worker is held for it now" };
        events.push(setNomination(t, next, n, new Date(now).toISOString(), ended));
      }
      if (next) {
        owed.ops.push({ op: "updateStatus", object: { ...t, status: next } });
        owed.news.push(events.filter((e) => e !== undefined));
        owed.standings.push(admittedWritten ? wanted.standing : undefined);
      }
    }
  }

  /** The one other writer of these conditions, for tasks out of the queue: what their state says. */
  private oweSettling(owed: Owed, now: number): void {
    for (const t of this.deps.cache.byIndex<Task & StoredObject>("Task", UNSETTLED_INDEX, "1", { sorted: false })) {
      if (owed.ops.length >= this.opts.maxWritesPerPass) {
        owed.deferred = true;
        break;
      }
      owed.ops.push({
        op: "updateStatus",
        object: { ...t, status: settleAdmission(jsonClone(t.status ?? {}), new Date(now).toISOString()) },
      });
      owed.news.push([]);
      owed.standings.push(undefined);
    }
  }

  /** Write the ops in chunks of one transaction each; returns the indexes of those that landed. */
  private async commit(ops: readonly TxnOp[]): Promise<number[]> {
    const written: number[] = [];
    for (let i = 0; i < ops.length;) {
      const end = Math.min(i + this.chunks.next(this.deps.store.maxWritesPerTxn), ops.length);
      // The pass yielded since it read these tasks: a task claimed, cancelled or rewritten
      // meanwhile is left to the next pass, which sees it as it is now. Checked against the
      // informer right before the commit (nothing in between yields), so this process's own
      // writes never make the chunk conflict.
      const chunk = range(i, end).filter((j) => this.unchanged(ops[j]));
      i = end;
      if (chunk.length === 0) continue;
      try {
        await this.write(chunk.map((j) => ops[j]));
        written.push(...chunk);
      } catch (e) {
        // Another replica changed a task under us: write the rest one by one; the next pass redoes the loser.
        if (!isStoreError(e, "Conflict")) throw e;
        for (const j of chunk)
          await this.write([ops[j]]).then(
            () => written.push(j),
            (err) => {
              if (!isStoreError(err, "Conflict")) throw err;
            },
          );
      }
    }
    return written;
  }

  /**
   * One transaction, resolved once durable. The store decides on the informer's copy of each
   * task (the one the op was built from, checked just before) instead of reading and decoding
   * it again; the ops were built for this write alone and nothing reads the results, so
   * neither is copied.
   */
  private async write(ops: TxnOp[]): Promise<void> {
    const applied = await this.chunks.timed(ops.length, () =>
      this.deps.store.apply(ops, { known: this.deps.known, ownedInput: true, readOnlyResults: true }),
    );
    await applied.durable;
  }

  /** After the writes: their Events (only for a write that landed, so a lost write never repeats one), when each was written, and memory kept bounded. */
  private remember(owed: Owed, written: readonly number[], now: number): void {
    for (const j of written) {
      for (const e of owed.news[j]) this.deps.recordEvent(e);
      const standing = owed.standings[j];
      const op = owed.ops[j];
      if (standing && op.op === "updateStatus") this.lastWrite.set(op.object.metadata.name, { at: now, standing });
    }
    this.writes += written.length;
    if (this.lastWrite.size > this.queue.size * 2 + 1000)
      for (const k of this.lastWrite.keys()) if (!this.queue.has(k)) this.lastWrite.delete(k);
    if (this.answers.size > 2 * this.queue.shapeCount + 1000) {
      const live = new Set([...this.queue.allShapes()].map((sh) => sh.key));
      for (const k of this.answers.keys()) if (!live.has(k)) this.answers.delete(k);
      for (const k of this.lastGrant.keys()) if (!live.has(k)) this.lastGrant.delete(k);
    }
  }

  /** Whether the task an op writes is still as the pass read it (and still queued, or still out of the queue). */
  private unchanged(op: TxnOp): boolean {
    if (op.op !== "updateStatus") return true;
    const t = this.deps.task(op.object.metadata.name);
    const queued = (s: TaskStatus | undefined) => isQueued(s?.state ?? "queued");
    return (
      t !== undefined &&
      t.metadata.resourceVersion === op.object.metadata.resourceVersion &&
      queued(t.status) === queued(op.object.status as TaskStatus)
    );
  }

  /** The new status if the conditions must be written now, else undefined. */
  private apply(t: Task, w: Wanted, now: number): TaskStatus | undefined {
    const st = t.status ?? {};
    const cur = getCondition(st.conditions, "Admitted");
    const curUnsat = getCondition(st.conditions, "Unsatisfiable");
    // For a task that cannot be admitted, a new reason in the message (a worker became ready,
    // a capability went missing) is news; the same reasons with other numbers are not, and
    // wait for the refresh. For one that can, which workers happen to be busy is not news:
    // rewriting every admissible task on each lease would cost more than the leases.
    const flips =
      !cur ||
      cur.status !== w.admitted.status ||
      cur.reason !== w.admitted.reason ||
      (curUnsat?.status === "True") !== !!w.unsatisfiable ||
      (w.admitted.status === "False" && skeleton(cur.message) !== skeleton(w.admitted.message));
    const messageOnly =
      !flips &&
      (cur.message !== w.admitted.message || (w.unsatisfiable && curUnsat?.message !== w.unsatisfiable.message));
    if (!flips && !messageOnly) return undefined;
    const last = this.lastWrite.get(t.metadata.name);
    // A swing between admissible and waiting on leases is churn until it has held a while.
    // Any other change (a reason that appeared or went away while waiting, a blocked task) is news.
    const swing =
      flips &&
      last !== undefined &&
      last.standing !== w.standing &&
      last.standing !== "blocked" &&
      w.standing !== "blocked";
    if (swing && now - w.since < this.opts.settleMs) {
      this.nextDue = Math.min(this.nextDue, w.since + this.opts.settleMs);
      return undefined;
    }
    if (!flips && now - (last?.at ?? 0) < this.opts.refreshMs) {
      this.nextDue = Math.min(this.nextDue, (last?.at ?? 0) + this.opts.refreshMs); // owed, but not yet
      return undefined;
    }
    return writeAdmission(jsonClone(st), new Date(now).toISOString(), { answer: w, generation: t.metadata.generation });
  }
}
