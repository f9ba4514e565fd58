// The default column sets of `loom get`. They start from the CRDs' additionalPrinterColumns
// (so the CLI shows what a server-side Table would), and Loom adds or refines the columns
// the admission contract is about: requests, reservations against capacity, and why a task
// is not admitted.
import { loadCrds } from "../resources/crds.ts";
import { getCondition, type Condition } from "../resources/meta.ts";
import type { Task, Worker } from "../resources/types.ts";
import { age, crdColumn, formatRequests, NONE, ratio, type Column } from "./printers.ts";

/** The CRD's columns of a kind, by upper-case name. */
function crdColumns(kind: string): Map<string, Column> {
  const crd = loadCrds().get(kind);
  return new Map((crd?.columns ?? []).map((c) => [c.name.toUpperCase(), crdColumn(c)]));
}

/** Built on first use: reading the CRDs is part of a verb's work, not of loading the CLI. */
function once<T>(make: () => T): () => T {
  let v: T | undefined;
  return () => (v ??= make());
}

const nameColumn: Column = { name: "NAME", priority: 0, cell: (o) => o.metadata?.name ?? NONE };

/**
 * The CRD's columns in their order, with Loom's refinements: `replace` swaps a CRD column
 * for a computed one, `drop` removes one, `after` inserts computed ones after a CRD column.
 */
function compose(kind: string, opts: { replace?: Record<string, Column>; drop?: string[]; after?: Record<string, Column[]> }): Column[] {
  const out: Column[] = [nameColumn];
  for (const [name, col] of crdColumns(kind)) {
    if (opts.drop?.includes(name)) continue;
    out.push(opts.replace?.[name] ?? col, ...(opts.after?.[name] ?? []));
  }
  return out;
}

const conditions = (o: { status?: { conditions?: Condition[] } }) => o.status?.conditions as Condition[] | undefined;

// --- Task

/** The Admitted condition's reason, only while the task is not admitted. */
const taskReason: Column<Task> = {
  name: "REASON",
  priority: 0,
  cell: (t) => {
    const c = getCondition(conditions(t), "Admitted");
    return c && c.status !== "True" ? (c.reason ?? NONE) : NONE;
  },
};

const taskRequests: Column<Task> = { name: "REQUESTS", priority: 0, cell: (t) => formatRequests(t.spec?.execution_profile?.resources) };

export const taskColumns = once((): Column<Task>[] => compose("Task", {
  replace: { REASON: taskReason, PLACEMENT: { name: "PLACEMENT", priority: 1, cell: (t) => t.spec?.execution_profile?.placement ?? "shared" } },
  after: { PLACEMENT: [taskRequests] },
}));

// --- Worker

/** kubectl marks a cordoned Node `Ready,SchedulingDisabled`; a Worker reads the same. */
const workerReady: Column<Worker> = {
  name: "READY",
  priority: 0,
  cell: (w) => {
    const ready = getCondition(conditions(w), "Ready")?.status ?? NONE;
    return w.spec?.unschedulable ? `${ready},SchedulingDisabled` : ready;
  },
};

const activeLimit: Column<Worker> = { name: "ACTIVE/LIMIT", priority: 0, cell: (w) => ratio(w.status?.active_count, w.status?.effective_limit) };

const headroom = (label: string, field: "cpu_millis" | "memory_mb" | "disk_mb" | "gpu_count", unit: string): Column<Worker> => ({
  name: label,
  priority: 0,
  cell: (w) => ratio(w.status?.reserved?.[field], w.status?.capacity?.[field], unit),
});

export const workerColumns = once((): Column<Worker>[] => compose("Worker", {
  replace: { READY: workerReady, ACTIVE: activeLimit },
  drop: ["LIMIT"],
  after: {
    ACTIVE: [headroom("CPU", "cpu_millis", "m"), headroom("MEM", "memory_mb", "Mi"), headroom("DISK", "disk_mb", "Mi"), headroom("GPU", "gpu_count", "")],
  },
}));

// --- Campaign

export const campaignColumns = once((): Column[] => compose("Campaign", {}));

// --- Event (no CRD: the core Event's usual columns)

type EventLike = { type?: string; reason?: string; message?: string; lastTimestamp?: string; involvedObject?: { kind?: string; name?: string }; metadata?: { creationTimestamp?: string } };

export const eventColumns: Column<EventLike>[] = [
  { name: "LAST SEEN", priority: 0, cell: (e, now) => age(e.lastTimestamp ?? e.metadata?.creationTimestamp, now) },
  { name: "TYPE", priority: 0, cell: (e) => e.type ?? NONE },
  { name: "REASON", priority: 0, cell: (e) => e.reason ?? NONE },
  { name: "OBJECT", priority: 0, cell: (e) => (e.involvedObject ? `${(e.involvedObject.kind ?? "").toLowerCase()}/${e.involvedObject.name ?? ""}` : NONE) },
  { name: "MESSAGE", priority: 0, cell: (e) => e.message ?? NONE },
  { name: "NAME", priority: 1, cell: (e) => (e as { metadata?: { name?: string } }).metadata?.name ?? NONE },
];
