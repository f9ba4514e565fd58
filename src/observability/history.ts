// The fleet's recent past, derived at request time from what the store already keeps: each
// task's attempts and current lease (when leased, started and ended, on which worker, with
// what reservation) and the NotAdmitted Events (when a queued task's reason changed). Nothing
// is sampled or stored twice, so a restarted Hub shows the same hour it showed before.
//
// Limits that follow from the sources: a task keeps its last 50 attempts, and Events live an
// hour (or until 5,000 newer ones push them out). A queued stretch with no NotAdmitted Event
// counts under the task's current reason when it is the stretch still going on, and as
// WorkerAvailable when it ended in a lease (nothing refused it; it waited for a claim).
import { isActive, isQueued, type Task } from "../resources/types.ts";
import { grantedAdmission } from "../admission/snapshot.ts";
import type { TaskSpecExecutionProfileResources as Vec } from "../resources/types.gen.ts";

/** One lease on a worker's timeline: open-ended (`ended_at` absent) while it is active. */
export type LeaseBar = {
  task: string;
  attempt: number;
  leased_at: string;
  started_at?: string;
  ended_at?: string;
  /** leased or running while active; the attempt's outcome (clean, run_error, lease_expired, ...) once ended. */
  state: string;
  placement: string;
  reservation: Vec;
};

export type FleetHistory = {
  from: string;
  to: string;
  step_seconds: number;
  /** The end of each step; queue_depth and leases_granted are about the step that ends there. */
  times: string[];
  /** Queued tasks by reason, on average over each step (two tasks queued for half of it count 1); a reason absent from the window is absent here. */
  queue_depth: { reason: string; counts: number[] }[];
  /** Queued tasks by reason at `to`. */
  queued_now: Record<string, number>;
  leases_granted: number[];
  /** Per worker, the leases that overlap the window, oldest first (at most MAX_BARS, the latest kept). */
  workers: { worker: string; leases: LeaseBar[]; truncated: number }[];
};

export type NotAdmittedEvent = {
  involvedObject: { kind: string; name: string };
  reason: string;
  message: string;
  firstTimestamp?: string;
};

/** Per worker: an hour drawn across a page has room for about this many bars. */
export const MAX_BARS = 150;
export const STEPS = 60;
/** What a queued task that some worker could take now counts under (the Admitted condition's reason then). */
export const AVAILABLE = "WorkerAvailable";

const ms = (s: string | undefined) => (s ? Date.parse(s) : NaN);

/** The reason a NotAdmitted Event names: its message starts with the reason code. */
const eventReason = (e: NotAdmittedEvent) => e.message.split(":", 1)[0].trim() || "Unknown";

/** The task's queued stretches [start, end) in ms; end is Infinity for the one still going on. */
export function queuedSpans(t: Task): [number, number][] {
  const st = t.status ?? {};
  const starts: number[] = [ms(t.metadata.creationTimestamp)];
  const ends: number[] = [];
  for (const a of st.attempts ?? []) {
    ends.push(ms(a.leased_at));
    starts.push(ms(a.ended_at));
  }
  if (st.lease) ends.push(ms(st.lease.leased_at));
  else if (isQueued(st.state ?? "queued")) ends.push(Infinity);
  else ends.push(ms(st.finished_at)); // a final task: after its last attempt it waited only if it ended unleased (cancelled while queued)
  const out: [number, number][] = [];
  // With 50 attempts kept, the oldest may be gone: pair from the end, where the record is whole.
  for (let i = 1; i <= Math.min(starts.length, ends.length); i++) {
    const s = starts[starts.length - i],
      e = ends[ends.length - i];
    if (Number.isFinite(s) && e > s) out.unshift([s, e]);
  }
  return out;
}

/** The leases of a task: its finished attempts and its active lease. */
export function leaseBars(t: Task): (LeaseBar & { worker: string })[] {
  const st = t.status ?? {};
  const out: (LeaseBar & { worker: string })[] = [];
  const placement = t.spec.execution_profile?.placement ?? "shared";
  for (const a of st.attempts ?? []) {
    if (!a.worker || !a.leased_at) continue;
    // The one reading of an attempt's admission: an earlier Loom kept placement and requests only there.
    const adm = grantedAdmission(a);
    out.push({
      worker: a.worker,
      task: t.metadata.name,
      attempt: a.attempt ?? 0,
      leased_at: a.leased_at,
      ...(a.started_at ? { started_at: a.started_at } : {}),
      ...(a.ended_at ? { ended_at: a.ended_at } : {}),
      state: a.outcome ?? "ended",
      placement: adm?.placement ?? placement,
      reservation: stripTypes(adm?.requested ?? a.reservation),
    });
  }
  const l = st.lease;
  if (l && isActive(st.state))
    out.push({
      worker: l.worker,
      task: t.metadata.name,
      attempt: l.epoch,
      leased_at: l.leased_at,
      ...(l.started_at ? { started_at: l.started_at } : {}),
      state: st.state!,
      placement: l.placement ?? placement,
      reservation: stripTypes(l.reservation),
    });
  return out;
}

const stripTypes = (v: Vec | undefined): Vec => {
  const { cpu_millis = 0, memory_mb = 0, disk_mb = 0, gpu_count = 0, gpu_types } = v ?? {};
  return { cpu_millis, memory_mb, disk_mb, gpu_count, ...(gpu_types?.length ? { gpu_types } : {}) };
};

/** The reason a queued task counts under now: its Admitted condition's reason; undefined when it is not queued. */
export function queuedReason(t: Task): string | undefined {
  if (!isQueued(t.status?.state ?? "queued")) return undefined;
  return t.status?.conditions?.find((c) => c.type === "Admitted")?.reason ?? "Unknown";
}

/** One stretch of a task's life: queued for one reason, leased (not yet started) or running, [start, end) in ms. */
export type Segment =
  | { kind: "queued"; reason: string; start: number; end: number }
  | { kind: "leased" | "running"; worker: string; attempt: number; start: number; end: number; outcome: string };

/** The reason-change points of one queued stretch: [time, reason], oldest first. */
function reasonChanges(t: Task, span: [number, number], events: NotAdmittedEvent[]): [number, string][] {
  const out: [number, string][] = [];
  for (const e of events) {
    const at = ms(e.firstTimestamp);
    if (at >= span[0] && at < span[1]) out.push([at, eventReason(e)]);
  }
  const current = span[1] === Infinity ? queuedReason(t) : undefined;
  if (current !== undefined) {
    // The condition's reason holds at least since it last flipped; before that, the Events say.
    const since = ms(t.status?.conditions?.find((c) => c.type === "Admitted")?.lastTransitionTime);
    const at = Number.isFinite(since) ? Math.max(since, span[0]) : span[0];
    if (!out.some(([x]) => x > at)) out.push([at, current]);
  }
  out.sort((a, b) => a[0] - b[0]);
  if (!out.length) out.push([span[0], AVAILABLE]);
  // Before the first change the task waited for the first conditions pass, moments after it queued: the first reason covers it.
  out[0] = [span[0], out[0][1]];
  return out.filter(([at, r], i) => i === 0 || r !== out[i - 1][1] || at !== out[i - 1][0]);
}

/**
 * Where a task's time went, oldest first: its queued stretches split by reason, then for each
 * lease the time leased before the Runner started it and the time running. An open stretch
 * ends at `now`. `events` are the task's NotAdmitted Events.
 */
export function taskSegments(t: Task, events: NotAdmittedEvent[], now: number): Segment[] {
  const out: Segment[] = [];
  for (const span of queuedSpans(t)) {
    const changes = reasonChanges(t, span, events);
    const end = Math.min(span[1], now);
    changes.forEach(([at, reason], i) => {
      const next = i + 1 < changes.length ? changes[i + 1][0] : end;
      if (next > at) out.push({ kind: "queued", reason, start: at, end: next });
    });
  }
  for (const b of leaseBars(t)) {
    const start = ms(b.leased_at),
      end = b.ended_at ? ms(b.ended_at) : now;
    const started = b.started_at ? Math.min(ms(b.started_at), end) : end;
    const base = { worker: b.worker, attempt: b.attempt, outcome: b.state };
    if (started > start) out.push({ kind: "leased", ...base, start, end: started });
    if (end > started) out.push({ kind: "running", ...base, start: started, end });
  }
  return out.sort((a, b) => a.start - b.start);
}

/**
 * Builds the history one task at a time, so a caller over many tasks can yield to I/O
 * between slices (fleetHistory is the one-go form).
 */
export class HistoryBuilder {
  private readonly step: number;
  private readonly from: number;
  private readonly byTask = new Map<string, NotAdmittedEvent[]>();
  private readonly depth = new Map<string, number[]>();
  private readonly granted = new Array<number>(STEPS).fill(0);
  private readonly queuedNow = new Map<string, number>();
  private readonly perWorker = new Map<string, LeaseBar[]>();

  constructor(
    events: Iterable<NotAdmittedEvent>,
    private readonly o: { now: number; minutes: number },
  ) {
    this.step = (o.minutes * 60_000) / STEPS;
    this.from = o.now - o.minutes * 60_000;
    for (const e of events) {
      if (e.reason !== "NotAdmitted" || e.involvedObject.kind !== "Task") continue;
      const l = this.byTask.get(e.involvedObject.name);
      if (l) l.push(e);
      else this.byTask.set(e.involvedObject.name, [e]);
    }
  }

  add(t: Task): void {
    const { from, step } = this;
    const st = t.status;
    // Most of a long-lived fleet finished before the window: nothing of it shows.
    if (st?.finished_at && !st.lease && ms(st.finished_at) < from) return;
    for (const seg of taskSegments(t, this.byTask.get(t.metadata.name) ?? [], this.o.now)) {
      if (seg.kind !== "queued" || seg.end <= from) continue;
      let row = this.depth.get(seg.reason);
      if (!row) this.depth.set(seg.reason, (row = new Array<number>(STEPS).fill(0)));
      // Time-weighted: a task queued for half of a step adds 0.5, so a wait of seconds still shows.
      for (let i = Math.max(0, Math.floor((seg.start - from) / step)); i < STEPS && from + i * step < seg.end; i++) {
        const overlap = Math.min(seg.end, from + (i + 1) * step) - Math.max(seg.start, from + i * step);
        if (overlap > 0) row[i] += overlap / step;
      }
    }
    const now = queuedReason(t);
    if (now !== undefined) this.queuedNow.set(now, (this.queuedNow.get(now) ?? 0) + 1);
    for (const b of leaseBars(t)) {
      const start = ms(b.leased_at);
      if (start > from && start <= this.o.now) this.granted[Math.min(STEPS - 1, Math.floor((start - from) / step))]++;
      if ((b.ended_at ? ms(b.ended_at) : Infinity) < from || start > this.o.now) continue;
      const { worker, ...bar } = b;
      const l = this.perWorker.get(worker);
      if (l) l.push(bar);
      else this.perWorker.set(worker, [bar]);
    }
  }

  result(): FleetHistory {
    const { from, step } = this;
    const workers = [...this.perWorker]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([worker, leases]) => {
        leases.sort((a, b) => a.leased_at.localeCompare(b.leased_at) || a.task.localeCompare(b.task));
        const truncated = Math.max(0, leases.length - MAX_BARS);
        return { worker, leases: truncated ? leases.slice(truncated) : leases, truncated };
      });
    const iso = (x: number) => new Date(x).toISOString();
    return {
      from: iso(from),
      to: iso(this.o.now),
      step_seconds: step / 1000,
      times: Array.from({ length: STEPS }, (_, i) => iso(from + (i + 1) * step)),
      queue_depth: [...this.depth]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([reason, counts]) => ({ reason, counts: counts.map((n) => Math.round(n * 100) / 100) })),
      queued_now: Object.fromEntries([...this.queuedNow].sort(([a], [b]) => a.localeCompare(b))),
      leases_granted: this.granted,
      workers,
    };
  }
}

export function fleetHistory(
  tasks: Iterable<Task>,
  events: Iterable<NotAdmittedEvent>,
  o: { now: number; minutes: number },
): FleetHistory {
  const b = new HistoryBuilder(events, o);
  for (const t of tasks) b.add(t);
  return b.result();
}
