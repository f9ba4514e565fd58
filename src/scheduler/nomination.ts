// Nomination against starvation: a queued task that fits nowhere now, and has waited past
// its threshold or outranks a lease it waits on, holds the worker where it could start
// soonest (its blocking leases end first). That worker then admits only work that cannot
// delay it (the `nomination` check in src/admission). The admission-conditions pass
// computes nominations and stores them on the task (status.nominated_worker, with the
// leases it waits on); every Hub replica reads them back from its informer through an
// index, so a claim pays one index lookup per worker for them.
import { admit, queueName, taskView, type LeaseView, type Nominee, type WorkerView } from "../admission/index.ts";
import { getCondition, isQueued, setCondition, type Task, type TaskStatus } from "../resources/types.ts";
import { clearNomination } from "./lifecycle.ts";
import type { LoomEvent } from "../resources/meta.ts";
import type { Informer } from "../store/cache.ts";
import { claimOrder, type ClaimQueue, type QueueEntry } from "./queue.ts";
import { blockingLeases, leaseTiming, type TaskReads } from "./why.ts";

/** What nominating reads: tasks, and whether queues rank the leases. */
export type NominationReads = TaskReads & { readonly queues: { readonly active: boolean } };
/** What reading a stored nomination needs: tasks, and the informer's index of them by nominee. */
export type NomineeReads = TaskReads & { readonly cache: Pick<Informer, "byIndex"> };

/** Why a task nominates: it waited past its threshold, or it outranks a lease it waits on. */
export type NominationCause =
  | { kind: "waited"; threshold_seconds: number }
  | { kind: "outranks"; priority: number; lease: string; lease_priority: number };

export type Nomination = Omit<Nominee, "now"> & { worker: string; cause: NominationCause };

/** The informer index of queued tasks by the worker they have nominated. */
export const NOMINATED_INDEX = "nominatedWorker";

export const nominatedIndexFn = (t: Task): string[] => {
  const st = t.status;
  return st?.nominated_worker && isQueued(st.state ?? "queued") ? [st.nominated_worker] : [];
};

/** The task's own threshold (its campaign's nominate_after_seconds), else the Hub's, in ms. */
export const thresholdMs = (t: Task, hubSeconds: number): number =>
  (t.spec.nominate_after_seconds ?? hubSeconds) * 1000;

const priorityOf = (ctx: TaskReads, task: string) => ctx.task(task)?.spec.priority ?? 0;

/** A long computation's time budget (reconciler/slice.ts): when due, it pauses for I/O. */
export type Slicer = { due(): boolean; pause(): Promise<void> };

/**
 * Nominations for this moment: worker -> nomination. Only the best task of each requirement
 * shape can starve for its shape (the rest wait behind it anyway), and its own threshold is
 * the shape's. Two causes nominate a task that no worker admits now:
 *  - it has waited past its threshold: it takes the worker where its blockers end first;
 *  - it has not, but on some worker the leases it waits on include one of strictly lower
 *    priority: it outranks the work that holds that worker, and nominates at once, among
 *    such workers only (again where its blockers end first).
 * Tasks are served in claim order, one per worker. Returns, too, when the next task crosses
 * its threshold (ms, Infinity if none). Weighing a starving task against thousands of
 * workers takes a while, so with a `slice` it yields to I/O whenever the slice is due.
 */
export async function nominate(
  ctx: NominationReads,
  queue: ClaimQueue,
  views: readonly WorkerView[],
  now: number,
  hubSeconds: number,
  slice?: Slicer,
): Promise<{ byWorker: Map<string, Nomination>; nextDue: number }> {
  const plain = views.map((v) => ({ ...v, nominee: undefined }));
  // With Queues, priority ranks work within a queue only: a task outranks only leases of its
  // own queue (across queues fair share decides, and a higher number elsewhere holds nothing).
  const ranked = (l: LeaseView, q: string) => !ctx.queues.active || queueName(l) === q;
  // The lowest priority leased on each worker: a task at or below it outranks nothing there.
  const lowest = new Map<string, number>();
  const lowestOf = (v: WorkerView, q: string): number => {
    const key = ctx.queues.active ? `${v.name}\u0000${q}` : v.name;
    let p = lowest.get(key);
    if (p === undefined) {
      p = Infinity;
      for (const l of v.leases) if (ranked(l, q)) p = Math.min(p, priorityOf(ctx, l.task));
      lowest.set(key, p);
    }
    return p;
  };
  const heads: { entry: QueueEntry; task: Task; waited: boolean }[] = [];
  let nextDue = Infinity;
  // A snapshot of the shapes: the queue may change while this yields.
  for (const s of [...queue.allShapes()]) {
    if (slice?.due()) await slice.pause();
    const head = s.entries.peek();
    const task = head && ctx.task(head.name);
    if (!head || !task) continue;
    const threshold = thresholdMs(task, hubSeconds);
    const due = Date.parse(head.created) + threshold;
    if (due <= now) heads.push({ entry: head, task, waited: true });
    else {
      if (due < nextDue) nextDue = due;
      if (plain.some((v) => lowestOf(v, s.queue) < head.priority)) heads.push({ entry: head, task, waited: false });
    }
  }
  heads.sort((a, b) => claimOrder(a.entry, b.entry));
  const byWorker = new Map<string, Nomination>();
  for (const h of heads) {
    const tv = taskView(h.task);
    const q = queueName(h.task.spec);
    let fitsNow = false;
    for (const v of plain) {
      if (slice?.due()) await slice.pause();
      if ((fitsNow = admit(tv, v).ok)) break;
    }
    if (fitsNow) continue; // it will be claimed as it is
    let best: Nomination | undefined;
    for (const v of plain) {
      if (slice?.due()) await slice.pause();
      if (byWorker.has(v.name)) continue;
      if (!h.waited && !(lowestOf(v, q) < h.entry.priority)) continue;
      const b = blockingLeases(ctx, tv, v);
      if (!b) continue;
      let cause: NominationCause = { kind: "waited", threshold_seconds: thresholdMs(h.task, hubSeconds) / 1000 };
      if (!h.waited) {
        const outranked = b.leases
          .filter((l) => ranked(l, q))
          .map((l) => ({ lease: l.task, p: priorityOf(ctx, l.task) }))
          .filter((l) => l.p < h.entry.priority)
          .sort((x, y) => x.p - y.p)[0];
        if (!outranked) continue;
        cause = { kind: "outranks", priority: h.entry.priority, lease: outranked.lease, lease_priority: outranked.p };
      }
      const startsAt = b.until ? Date.parse(b.until) : Infinity;
      if (!best || startsAt < best.starts_at || (startsAt === best.starts_at && b.leases.length < best.blockers.length))
        best = { worker: v.name, task: tv, blockers: b.leases.map((l) => l.task), starts_at: startsAt, cause };
    }
    if (best) byWorker.set(best.worker, best);
  }
  return { byWorker, nextDue };
}

/**
 * The nominee a worker is held for, as stored: the queued task whose status names this
 * worker (first in claim order, should two briefly do). Its start is when the leases it
 * waits on, those still active here, end. One index lookup; no scan of the queue.
 */
export function storedNominee(ctx: NomineeReads, view: WorkerView, now: number): Nominee | undefined {
  const held = ctx.cache.byIndex("Task", NOMINATED_INDEX, view.name, { sorted: false });
  if (!held.length) return undefined;
  const entry = (t: Task): QueueEntry => ({
    name: t.metadata.name,
    priority: t.spec.priority ?? 0,
    created: t.metadata.creationTimestamp ?? "",
    shape: "",
  });
  const t = held.length === 1 ? held[0] : [...held].sort((a, b) => claimOrder(entry(a), entry(b)))[0];
  const blockers = t.status?.nomination_blockers ?? [];
  let startsAt = now;
  for (const l of view.leases) {
    if (!blockers.includes(l.task)) continue;
    const ends = leaseTiming(ctx, l).ends_at;
    startsAt = Math.max(startsAt, ends ? Date.parse(ends) : Infinity);
  }
  return { task: taskView(t), blockers: [...blockers], starts_at: startsAt, now };
}

// --- The nomination as stored on the task

const sameList = (a: readonly string[] | undefined, b: readonly string[]) =>
  (a ?? []).length === b.length && b.every((x, i) => a![i] === x);

/** The Nominated condition's message: the worker, why, and the leases it waits on. */
export function nominatedMessage(n: Nomination): string {
  const why =
    n.cause.kind === "waited"
      ? `it has waited past its threshold of ${n.cause.threshold_seconds}s`
      : `its priority ${n.cause.priority} outranks ${n.cause.lease} (priority ${n.cause.lease_priority})`;
  const waits = n.blockers.length ? `waits on ${n.blockers.join(", ")}` : "waits on no lease";
  const by = n.starts_at < Infinity ? `, expected to start by ${new Date(n.starts_at).toISOString()}` : "";
  return `holds ${n.worker}: fits no worker now and ${why}; ${waits}${by}`;
}

/** Whether the stored nomination of a queued task differs from `n` (cheap: no copy). */
export function nominationChanged(st: TaskStatus | undefined, n: Nomination | undefined): boolean {
  const cond = getCondition(st?.conditions, "Nominated");
  if (!n) return st?.nominated_worker !== undefined || cond?.status === "True";
  return (
    st?.nominated_worker !== n.worker ||
    !sameList(st?.nomination_blockers, n.blockers) ||
    cond?.status !== "True" ||
    cond.message !== nominatedMessage(n)
  );
}

/**
 * Write nomination `n` (or its end, with `ended` saying why) into a status being built.
 * Returns the Event the change announces: Nominated when the task takes a worker (or moves
 * to another), NominationEnded when it lets one go; nothing when only the blockers changed.
 */
export function setNomination(
  task: Task,
  st: TaskStatus,
  n: Nomination | undefined,
  nowIso: string,
  ended: { reason: string; message: string },
): LoomEvent | undefined {
  const before = st.nominated_worker;
  const object = task;
  st.conditions ??= [];
  if (n) {
    st.nominated_worker = n.worker;
    st.nomination_blockers = [...n.blockers];
    const message = nominatedMessage(n);
    setCondition(
      st.conditions,
      {
        type: "Nominated",
        status: "True",
        reason: n.cause.kind === "waited" ? "WaitedPastThreshold" : "OutranksLease",
        message,
        observedGeneration: task.metadata.generation,
      },
      nowIso,
    );
    return before !== n.worker ? { object, type: "Normal", reason: "Nominated", message } : undefined;
  }
  clearNomination(st, ended.reason, ended.message, nowIso, task.metadata.generation);
  return before ? nominationEnded(task, before, ended.message) : undefined;
}

/** The Event of a task letting go of the worker it held (`held`): leased, finished, or no longer starving. */
export const nominationEnded = (task: Task, held: string, why: string): LoomEvent => ({
  object: task,
  type: "Normal",
  reason: "NominationEnded",
  message: `no longer holds ${held}: ${why}`,
});
