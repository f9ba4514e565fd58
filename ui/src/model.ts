// What the page shows, taken from the watched objects: no DOM, so the tests run it under
// Node. A worker's reserved vector, active count and concurrency limit are the Hub's own
// figures, which the worker controller writes to its status from the same computation as
// /api/data/worker-capacity; the queue is in the scheduler's claim order.
import { getCondition } from "../../src/resources/meta.ts";
import {
  isActive,
  isFinal,
  isQueued,
  RESOURCE_FIELDS,
  taskWorker,
  type ResourceField,
} from "../../src/resources/types.ts";
import type {
  Campaign,
  Queue,
  Task,
  TaskSpecExecutionProfileResources as Vec,
  Worker,
} from "../../src/resources/types.gen.ts";
import { queueName } from "../../src/admission/queues.ts";
import { claimOrder } from "../../src/scheduler/queue.ts";

export type { Campaign, Queue, Task, Vec, Worker };

export const DIMENSIONS: readonly { field: ResourceField; label: string; unit: string }[] = [
  { field: "cpu_millis", label: "CPU", unit: "m" },
  { field: "memory_mb", label: "Memory", unit: "Mi" },
  { field: "disk_mb", label: "Disk", unit: "Mi" },
  { field: "gpu_count", label: "GPU", unit: "" },
];

// ---- the slices of each object the lists keep (100,000 whole tasks would not fit nicely)

export type TaskRow = {
  name: string;
  labels: Record<string, string>;
  campaign: string;
  /** Its Queue's name (`default` when it names none), as admission counts it. */
  queue: string;
  state: string;
  /** The Admitted condition's reason ("admitted" when it is True), or "" when there is none yet. */
  reason: string;
  message: string;
  requests: Vec;
  placement: string;
  priority: number;
  created: string;
  /** The lease's worker, or the worker of the last attempt once final. */
  worker: string;
  /** Set only while a lease is active: what it holds on `worker`. */
  reservation: Vec | undefined;
  resourceVersion: string;
};

export function taskRow(t: Task): TaskRow {
  const st = t.status ?? {};
  const admitted = getCondition(st.conditions, "Admitted");
  const state = st.state ?? "queued";
  const lease = isActive(state) ? st.lease : undefined;
  return {
    name: t.metadata.name,
    labels: t.metadata.labels ?? {},
    campaign: t.spec.campaign_id ?? "",
    queue: queueName(t.spec),
    state,
    reason: admitted ? (admitted.status === "True" ? "admitted" : (admitted.reason ?? "")) : "",
    message: admitted?.message ?? "",
    requests: t.spec.execution_profile?.resources ?? {},
    placement: t.spec.execution_profile?.placement ?? "shared",
    priority: t.spec.priority ?? 0,
    created: t.metadata.creationTimestamp ?? "",
    worker: taskWorker(st) ?? "",
    reservation: lease ? (lease.reservation ?? {}) : undefined,
    resourceVersion: t.metadata.resourceVersion ?? "",
  };
}

export type WorkerObj = {
  name: string;
  labels: Record<string, string>;
  capacity: Vec;
  /** The Hub's effective limit; undefined until the worker controller has written one. */
  limit: number | undefined;
  reserved: Required<Omit<Vec, "gpu_types">>;
  /** The tasks holding an active lease here, and the Hub's active count (which also counts runs a heartbeat reports). */
  active: string[];
  activeCount: number;
  exclusive: boolean;
  ready: boolean;
  registered: boolean;
  cordoned: boolean;
  resourceVersion: string;
};

export function workerObj(w: Worker): WorkerObj {
  const st = w.status ?? {};
  const conds = st.conditions;
  const active = st.active_task_ids ?? [];
  return {
    name: w.metadata.name,
    labels: w.metadata.labels ?? {},
    capacity: st.capacity ?? w.spec.resource_capacity ?? {},
    limit: st.effective_limit,
    reserved: Object.fromEntries(RESOURCE_FIELDS.map((f) => [f, st.reserved?.[f] ?? 0])) as WorkerObj["reserved"],
    active,
    activeCount: st.active_count ?? active.length,
    exclusive: Boolean(st.exclusive_holder),
    ready: getCondition(conds, "Ready")?.status === "True",
    registered: Boolean(st.registration),
    cordoned: Boolean(w.spec.unschedulable) || getCondition(conds, "Cordoned")?.status === "True",
    resourceVersion: w.metadata.resourceVersion ?? "",
  };
}

export type WorkerRow = WorkerObj & { state: "cordoned" | "exclusive" | "ready" | "not ready" | "unregistered" };

export function workerRows(workers: Iterable<WorkerObj>): WorkerRow[] {
  const out: WorkerRow[] = [];
  for (const w of workers)
    out.push({
      ...w,
      state: w.cordoned
        ? "cordoned"
        : w.exclusive
          ? "exclusive"
          : !w.registered
            ? "unregistered"
            : w.ready
              ? "ready"
              : "not ready",
    });
  return out;
}

// ---- label selectors (the Kubernetes equality and set-less forms: a=b, a!=b, a, !a)

export type Selector = (labels: Record<string, string>) => boolean;

/** A selector, or an error naming the term that does not parse. */
export function parseSelector(text: string): { ok: true; match: Selector } | { ok: false; error: string } {
  const terms: Selector[] = [];
  for (const raw of text.split(",")) {
    const term = raw.trim();
    if (!term) continue;
    const m = /^(!?)([A-Za-z0-9][-A-Za-z0-9_./]*)\s*(?:(!=|==|=)\s*([-A-Za-z0-9_.]*))?$/.exec(term);
    if (!m || (m[1] && m[3]))
      return { ok: false, error: `label selector term "${term}" is not key, !key, key=value or key!=value` };
    const [, not, key, op, value] = m;
    if (not) terms.push((l) => !(key in l));
    else if (!op) terms.push((l) => key in l);
    else if (op === "!=") terms.push((l) => l[key] !== value);
    else terms.push((l) => l[key] === value);
  }
  return { ok: true, match: (l) => terms.every((t) => t(l)) };
}

// ---- workers: filter and sort

export type WorkerSort = { key: "name" | `label:${string}` | `use:${ResourceField}` | "active"; desc: boolean };

/** Share of capacity reserved, 0 when the worker has none of the dimension. */
export const usage = (w: WorkerRow, f: ResourceField) =>
  (w.capacity[f] ?? 0) > 0 ? w.reserved[f] / (w.capacity[f] ?? 1) : 0;

export function sortWorkers(rows: WorkerRow[], s: WorkerSort): WorkerRow[] {
  const key = s.key;
  const cmp: (a: WorkerRow, b: WorkerRow) => number =
    key === "name"
      ? (a, b) => a.name.localeCompare(b.name)
      : key === "active"
        ? (a, b) => a.activeCount - b.activeCount
        : key.startsWith("use:")
          ? (a, b) => usage(a, key.slice(4) as ResourceField) - usage(b, key.slice(4) as ResourceField)
          : (a, b) => (a.labels[key.slice(6)] ?? "\uffff").localeCompare(b.labels[key.slice(6)] ?? "\uffff");
  const dir = s.desc ? -1 : 1;
  return rows.sort((a, b) => dir * cmp(a, b) || a.name.localeCompare(b.name));
}

export const labelKeys = (rows: Iterable<{ labels: Record<string, string> }>) => {
  const keys = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r.labels)) keys.add(k);
  return [...keys].sort();
};

// ---- the queue

export type TaskFilter = {
  campaign: string;
  state: string;
  reason: string;
  worker: string;
  selector: Selector;
  text: string;
  queue?: string;
};

/** "pending" and "active" group several states; any other value is one state. */
export function stateMatches(filter: string, state: string): boolean {
  if (!filter) return true;
  if (filter === "pending") return isQueued(state);
  if (filter === "active") return isActive(state);
  if (filter === "final") return isFinal(state);
  return filter === state;
}

export function filterTasks(rows: Iterable<TaskRow>, f: TaskFilter): TaskRow[] {
  const out: TaskRow[] = [];
  const text = f.text.toLowerCase();
  for (const t of rows) {
    if (f.campaign && t.campaign !== f.campaign) continue;
    if (f.queue && t.queue !== f.queue) continue;
    if (!stateMatches(f.state, t.state)) continue;
    if (f.reason && t.reason !== f.reason) continue;
    if (f.worker && t.worker !== f.worker) continue;
    if (text && !t.name.toLowerCase().includes(text)) continue;
    if (!f.selector(t.labels)) continue;
    out.push(t);
  }
  // The scheduler's claim order (RESOURCE_ADMISSION's queue order), by its own function.
  return out.sort(claimOrder);
}

/** Count per value of one field, for the filter menus and the state summary. */
export function countBy<T>(rows: Iterable<T>, key: (r: T) => string): Map<string, number> {
  const m = new Map<string, number>();
  for (const r of rows) {
    const k = key(r);
    m.set(k, (m.get(k) ?? 0) + 1);
  }
  return m;
}

// ---- campaigns: progress by state, derived from the tasks they own

export type CampaignRow = {
  name: string;
  campaignId: string;
  total: number;
  byState: Map<string, number>;
  pending: number;
  active: number;
  final: number;
  declared: boolean;
};

export function campaignRows(
  campaigns: Iterable<{ name: string; campaignId: string }>,
  tasks: Iterable<TaskRow>,
): CampaignRow[] {
  const rows = new Map<string, CampaignRow>();
  const row = (campaignId: string, name: string, declared: boolean) => {
    let r = rows.get(campaignId);
    if (!r)
      rows.set(
        campaignId,
        (r = { name, campaignId, total: 0, byState: new Map(), pending: 0, active: 0, final: 0, declared }),
      );
    return r;
  };
  for (const c of campaigns) row(c.campaignId, c.name, true);
  for (const t of tasks) {
    if (!t.campaign) continue;
    const r = row(t.campaign, t.campaign, false);
    r.total++;
    r.byState.set(t.state, (r.byState.get(t.state) ?? 0) + 1);
    if (isQueued(t.state)) r.pending++;
    else if (isActive(t.state)) r.active++;
    else if (isFinal(t.state)) r.final++;
  }
  return [...rows.values()].sort((a, b) => a.name.localeCompare(b.name));
}

// ---- display

/** `750m`, `1536Mi`, `2`: a number with its unit, as the CLI prints them. */
export const withUnit = (n: number | undefined, unit: string) => (n === undefined ? "?" : `${n}${unit}`);

/** `cpu 750m · mem 1536Mi`, zeros left out; "none" for no request at all. */
export function requestText(r: Vec | undefined): string {
  const parts = DIMENSIONS.filter((d) => r?.[d.field]).map(
    (d) => `${d.label.toLowerCase()} ${withUnit(r![d.field], d.unit)}`,
  );
  if (r?.gpu_types?.length) parts.push(`gpu types ${r.gpu_types.join("|")}`);
  return parts.length ? parts.join(" · ") : "none";
}
