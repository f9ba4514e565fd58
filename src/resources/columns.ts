// The columns of every kind, defined once: the CRDs' additionalPrinterColumns (JSONPath)
// in their order, with Loom's refinements for what admission is about (requests,
// reservations against capacity, why a task is not admitted). The Hub's server-side Table
// (what kubectl prints) and `loom get` both use these, so they show the same cells.
import { loadCrds, type PrinterColumn } from "./crds.ts";
import { evalJsonPath, humanDuration, parseJsonPath } from "./jsonpath.ts";
import { getCondition, type Condition } from "./meta.ts";
import { taskWorker, type Queue, type ResourceSpec, type Task, type Worker } from "./types.ts";

export const NONE = "<none>";

export type Column<T = any> = { name: string; priority: 0 | 1; cell(o: T, now: Date): string };

/** Age of a timestamp at `now`; `<none>` when there is no timestamp, `<invalid>` when unparsable. */
export function age(ts: unknown, now: Date): string {
  if (typeof ts !== "string" || !ts) return NONE;
  const t = Date.parse(ts);
  return Number.isNaN(t) ? "<invalid>" : humanDuration(now.getTime() - t);
}

function scalarText(v: unknown): string {
  if (typeof v === "string") return v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return JSON.stringify(v);
}

/** A column from a CRD's additionalPrinterColumns; a `date` column is shown as an age. */
export function crdColumn(c: PrinterColumn): Column {
  const steps = parseJsonPath(c.jsonPath);
  return {
    name: c.name.toUpperCase(),
    priority: (c.priority ?? 0) > 0 ? 1 : 0,
    cell: (o, now) => {
      const vs = evalJsonPath(o, steps);
      if (!vs.length) return NONE;
      if (c.type === "date") return age(vs[0], now);
      return vs.map(scalarText).join(",");
    },
  };
}

export function ratio(used: unknown, total: unknown, unit = ""): string {
  const u = typeof used === "number" ? used : undefined;
  const t = typeof total === "number" ? total : undefined;
  if (u === undefined && t === undefined) return NONE;
  return `${u ?? "?"}${unit === "m" && u !== undefined ? "m" : ""}/${t ?? "?"}${unit}`;
}

/** `cpu=750m,mem=1536Mi,disk=2048Mi,gpu=1[a100]`, zeros left out; `-` for no request at all. */
export function formatRequests(r: ResourceSpec | undefined): string {
  if (!r) return "-";
  const parts: string[] = [];
  if (r.cpu_millis) parts.push(`cpu=${r.cpu_millis}m`);
  if (r.memory_mb) parts.push(`mem=${r.memory_mb}Mi`);
  if (r.disk_mb) parts.push(`disk=${r.disk_mb}Mi`);
  if (r.gpu_count) parts.push(`gpu=${r.gpu_count}${r.gpu_types?.length ? `[${r.gpu_types.join("|")}]` : ""}`);
  return parts.length ? parts.join(",") : "-";
}

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
function compose(
  kind: string,
  opts: { replace?: Record<string, Column>; drop?: string[]; after?: Record<string, Column[]> },
): Column[] {
  const out: Column[] = [nameColumn];
  for (const [name, col] of crdColumns(kind)) {
    if (opts.drop?.includes(name)) continue;
    out.push(opts.replace?.[name] ?? col, ...(opts.after?.[name] ?? []));
  }
  return out;
}

const conditions = (o: { status?: { conditions?: Condition[] } }) => o.status?.conditions;

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

const taskWorkerColumn: Column<Task> = { name: "WORKER", priority: 0, cell: (t) => taskWorker(t.status) ?? NONE };

const taskRequests: Column<Task> = {
  name: "REQUESTS",
  priority: 0,
  cell: (t) => formatRequests(t.spec?.execution_profile?.resources),
};

export const taskColumns = once((): Column<Task>[] =>
  compose("Task", {
    replace: {
      REASON: taskReason,
      WORKER: taskWorkerColumn,
      PLACEMENT: { name: "PLACEMENT", priority: 1, cell: (t) => t.spec?.execution_profile?.placement ?? "shared" },
    },
    after: { PLACEMENT: [taskRequests] },
  }),
);

/**
 * The Task columns with POSITION after REQUESTS (priority 1, so `-o wide`): a queued task's
 * place in the claim order. It is derived from the whole queue and never stored, so whoever
 * prints the table says where each task stands.
 */
export function taskColumnsWithPosition(positionOf: (t: Task) => number | undefined): Column<Task>[] {
  const cols = taskColumns();
  const i = cols.findIndex((c) => c.name === "REQUESTS");
  const position: Column<Task> = { name: "POSITION", priority: 1, cell: (t) => String(positionOf(t) ?? NONE) };
  return [...cols.slice(0, i + 1), position, ...cols.slice(i + 1)];
}

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

const activeLimit: Column<Worker> = {
  name: "ACTIVE/LIMIT",
  priority: 0,
  cell: (w) => ratio(w.status?.active_count, w.status?.effective_limit),
};

const headroom = (
  label: string,
  field: "cpu_millis" | "memory_mb" | "disk_mb" | "gpu_count",
  unit: string,
): Column<Worker> => ({
  name: label,
  priority: 0,
  cell: (w) => ratio(w.status?.reserved?.[field], w.status?.capacity?.[field], unit),
});

export const workerColumns = once((): Column<Worker>[] =>
  compose("Worker", {
    replace: { READY: workerReady, ACTIVE: activeLimit },
    drop: ["LIMIT"],
    after: {
      ACTIVE: [
        headroom("CPU", "cpu_millis", "m"),
        headroom("MEM", "memory_mb", "Mi"),
        headroom("DISK", "disk_mb", "Mi"),
        headroom("GPU", "gpu_count", ""),
      ],
    },
  }),
);

// --- Campaign

export const campaignColumns = once((): Column[] => compose("Campaign", {}));

// --- Queue

/** USED/QUOTA of one dimension; `-` for a quota the queue does not set (not limited there). */
const queueUse = (label: string, field: "cpu_millis" | "memory_mb" | "gpu_count", unit: string): Column<Queue> => ({
  name: label,
  priority: 0,
  cell: (q) => {
    const used = q.status?.used?.[field] ?? 0;
    const quota = q.spec?.quota?.[field];
    return `${used}${unit}/${quota === undefined ? "-" : `${quota}${unit}`}`;
  },
});

export const queueColumns = once((): Column[] =>
  compose("Queue", {
    after: {
      WEIGHT: [
        queueUse("CPU", "cpu_millis", "m"),
        queueUse("MEM", "memory_mb", "Mi"),
        queueUse("GPU", "gpu_count", ""),
      ],
    },
    replace: { WEIGHT: { name: "WEIGHT", priority: 0, cell: (q: Queue) => String(q.spec?.weight ?? 1) } },
  }),
);

// --- Event (no CRD: the core Event's usual columns)

/** `task/NAME`; a watched file as `file:/path` (its name is a path, so `file//path` would read wrong). */
const objectOf = (o: { kind?: string; name?: string }) =>
  o.kind === "File" ? `file:${o.name ?? ""}` : `${(o.kind ?? "").toLowerCase()}/${o.name ?? ""}`;

type EventLike = {
  type?: string;
  reason?: string;
  message?: string;
  lastTimestamp?: string;
  involvedObject?: { kind?: string; name?: string };
  metadata?: { creationTimestamp?: string };
};

export const eventColumns: Column<EventLike>[] = [
  { name: "LAST SEEN", priority: 0, cell: (e, now) => age(e.lastTimestamp ?? e.metadata?.creationTimestamp, now) },
  { name: "TYPE", priority: 0, cell: (e) => e.type ?? NONE },
  { name: "REASON", priority: 0, cell: (e) => e.reason ?? NONE },
  { name: "OBJECT", priority: 0, cell: (e) => (e.involvedObject ? objectOf(e.involvedObject) : NONE) },
  { name: "MESSAGE", priority: 0, cell: (e) => e.message ?? NONE },
  { name: "NAME", priority: 1, cell: (e) => (e as { metadata?: { name?: string } }).metadata?.name ?? NONE },
];

/** The columns of a kind, Name first. */
export function columnsFor(kind: string): Column[] {
  switch (kind) {
    case "Task":
      return taskColumns();
    case "Worker":
      return workerColumns();
    case "Campaign":
      return campaignColumns();
    case "Queue":
      return queueColumns();
    case "Event":
      return eventColumns;
    default:
      return [nameColumn];
  }
}
