// `loom describe KIND NAME`: kubectl-describe layout, one describer per kind and a generic
// fallback. Identity first, then spec, status, conditions, what the kind is about (a task's
// lease, attempts and per-worker admission; a worker's headroom and leases), Events last.
import { Command } from "commander";
import type { Condition } from "../resources/meta.ts";
import type { Campaign, Queue, Task, Worker } from "../resources/types.ts";
import { grantedAdmission, type AdmissionObject } from "../admission/snapshot.ts";
import { ApiError, type Client, RESOURCE_PREFIX } from "./client.ts";
import { clientOf, out, withController } from "./common.ts";
import { type KindInfo, resolveKind } from "./kinds.ts";
import type {
  CapacityEntry,
  NominationsReply,
  QueuesReport,
  TaskAdmission,
  WorkerCapacityReply,
} from "../protocol/types.gen.ts";
import {
  age,
  DIMENSIONS,
  formatRequests,
  formatShortfalls,
  formatVector,
  humanDuration,
  NONE,
  PrefixWriter,
  when,
  writeNested,
} from "./printers.ts";

type Obj = {
  kind: string;
  metadata: {
    name: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    creationTimestamp?: string;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
};
type EventObj = {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  firstTimestamp?: string;
  lastTimestamp?: string;
  source?: { component?: string };
  metadata?: { creationTimestamp?: string };
};

function identity(w: PrefixWriter, o: Obj, now: Date): void {
  w.kv(0, "Name", o.metadata.name);
  map(w, "Labels", o.metadata.labels);
  map(w, "Annotations", o.metadata.annotations);
  w.kv(0, "Created", when(o.metadata.creationTimestamp, now));
}

/** `Key:  a=b`, further entries on their own lines under the first. */
function map(w: PrefixWriter, key: string, m: Record<string, string> | undefined): void {
  const entries = Object.entries(m ?? {}).sort(([a], [b]) => a.localeCompare(b));
  if (!entries.length) return w.kv(0, key, NONE);
  entries.forEach(([k, v], i) => w.write(0, `${i ? "" : `${key}:`}\t${k}=${v.split("\n")[0]}`));
}

function conditions(w: PrefixWriter, list: Condition[] | undefined): void {
  w.section(
    0,
    "Conditions",
    ["TYPE", "STATUS", "REASON", "MESSAGE"],
    (list ?? []).map((c) => [c.type, c.status, c.reason ?? NONE, c.message ?? NONE]),
  );
}

async function events(w: PrefixWriter, client: Client, o: Obj, now: Date): Promise<void> {
  let items: EventObj[];
  try {
    const l = await client.get<{ items: EventObj[] }>(`${RESOURCE_PREFIX}/events`, {
      fieldSelector: `involvedObject.kind=${o.kind},involvedObject.name=${o.metadata.name}`,
    });
    items = l.items ?? [];
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return w.kv(0, "Events", `<unavailable: ${e.reason}: ${e.message}>`);
  }
  const at = (e: EventObj) => e.lastTimestamp ?? e.firstTimestamp ?? e.metadata?.creationTimestamp ?? "";
  items.sort((a, b) => at(a).localeCompare(at(b)));
  w.section(
    0,
    "Events",
    ["TYPE", "REASON", "AGE", "FROM", "MESSAGE"],
    items.map((e) => [
      e.type ?? NONE,
      e.reason ?? NONE,
      `${age(at(e), now)}${(e.count ?? 1) > 1 ? ` (x${e.count})` : ""}`,
      e.source?.component ?? NONE,
      e.message ?? NONE,
    ]),
  );
}

// --- Task

type PendingAdmission = Promise<{ a: TaskAdmission } | { e: unknown }>;

async function describeTask(client: Client, t: Task & Obj, now: Date): Promise<string> {
  // Asked at once, used below: the admission table, and the lease's end with renewals counted.
  const admission: PendingAdmission = client
    .get<TaskAdmission>("/api/data/task-admission", { task_id: t.metadata.name })
    .then(
      (a) => ({ a }),
      (e: unknown) => ({ e }),
    );
  const w = new PrefixWriter();
  identity(w, t, now);
  taskSpec(w, t);
  await taskStatus(w, client, t, now);
  await taskLease(w, t, admission, now);
  taskAttempts(w, t, now);
  await taskAdmission(w, admission, now);
  await events(w, client, t, now);
  return w.toString();
}

function taskSpec(w: PrefixWriter, t: Task): void {
  const s = t.spec ?? {};
  w.write(0, "Spec:");
  w.kv(1, "Task Kind", s.task_kind);
  w.kv(1, "Campaign", s.campaign_id);
  w.kv(1, "Case", s.case_id);
  w.kv(1, "Setting", s.setting_id);
  w.kv(1, "Run", s.run_id);
  w.kv(1, "Required Capability", s.required_capability || "<any>");
  w.kv(1, "Priority", s.priority ?? 0);
  if (s.queue) w.kv(1, "Queue", s.queue);
  if (s.nominate_after_seconds !== undefined) w.kv(1, "Nominate After", `${s.nominate_after_seconds}s`);
  w.kv(1, "Placement", s.execution_profile?.placement ?? "shared");
  w.kv(1, "Requests", formatRequests(s.execution_profile?.resources));
  if (s.retry_policy)
    w.kv(
      1,
      "Retry Policy",
      Object.entries(s.retry_policy)
        .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join("|") : v}`)
        .join(", "),
    );
  w.kv(1, "Runner", (s.payload as { runner?: string } | undefined)?.runner);
}

/** The state, the result, and for a result that is not clean why it failed, read from the result itself. */
async function taskStatus(w: PrefixWriter, client: Client, t: Task, now: Date): Promise<void> {
  const st = t.status ?? {};
  w.write(0, "Status:");
  w.kv(1, "State", st.state);
  w.kv(1, "Attempt", st.attempt);
  w.kv(1, "Excluded Workers", st.excluded_workers?.join(", "));
  // Held for this task: only work that cannot delay it is admitted there (the Nominated condition says why).
  w.kv(
    1,
    "Nominated Worker",
    st.nominated_worker
      ? `${st.nominated_worker}${st.nomination_blockers?.length ? ` (waits on ${st.nomination_blockers.join(", ")})` : ""}`
      : NONE,
  );
  if (st.result)
    w.kv(
      1,
      "Result",
      Object.entries(st.result)
        .map(([k, v]) => `${k}=${v}`)
        .join(", "),
    );
  if (st.error) w.kv(1, "Error", JSON.stringify(st.error));
  if (st.result?.result_id && st.result.verdict !== "clean") {
    // Why it failed, from the result itself: the classifier's issues and the exit code.
    const { attemptOutput, download, resultsOf } = await import("./results.ts");
    const r = (await resultsOf(client, t.metadata.name)).find((x) => x.result_id === st.result!.result_id);
    if (r?.issues.length) w.kv(1, "Failure Reason", r.issues.join(", "));
    const exit = await download(client, st.result.result_id).then(attemptOutput, () => undefined);
    if (exit?.exitCode !== undefined) w.kv(1, "Exit Code", exit.exitCode);
    const lastLine = exit?.stderr.trim().split("\n").at(-1);
    if (lastLine) w.kv(1, "Last Stderr Line", lastLine.slice(0, 200));
    w.kv(1, "Logs", `loom logs ${t.metadata.name} --attempt ${r?.attempt_no ?? st.attempt ?? 1}`);
  }
  if (st.finished_at) w.kv(1, "Finished", when(st.finished_at, now));
  conditions(w, st.conditions);
}

/** The lease, its end as the Hub counts renewals, and what the worker held before it. */
async function taskLease(w: PrefixWriter, t: Task, admission: PendingAdmission, now: Date): Promise<void> {
  const st = t.status ?? {};
  const l = st.lease;
  if (!l) w.kv(0, "Lease", NONE);
  else {
    w.write(0, "Lease:");
    w.kv(1, "Worker", l.worker);
    w.kv(1, "Epoch", l.epoch);
    w.kv(1, "Mode", l.mode);
    w.kv(1, "Leased At", when(l.leased_at, now));
    const adm = await admission;
    w.kv(1, "Until", when(("a" in adm && adm.a.lease_until) || l.lease_until, now));
    w.kv(1, "Placement", l.placement);
    w.kv(1, "Reservation", formatVector(l.reservation));
    const a = grantedAdmission(l);
    if (a) {
      w.kv(1, "Reserved Before", formatVector(a.reserved_before));
      w.kv(1, "Available Before", formatVector(a.available_before));
    }
  }
}

function taskAttempts(w: PrefixWriter, t: Task, now: Date): void {
  const st = t.status ?? {};
  w.section(
    0,
    "Attempts",
    ["ATTEMPT", "WORKER", "OUTCOME", "REASON", "ENDED", "REQUESTED", "RESERVED BEFORE", "AVAILABLE BEFORE"],
    (st.attempts ?? []).map((x) => {
      const a: Partial<AdmissionObject> = grantedAdmission(x) ?? {};
      return [
        String(x.attempt ?? NONE),
        x.worker ?? NONE,
        x.outcome ?? NONE,
        x.reason ?? NONE,
        x.ended_at ? `${age(x.ended_at, now)} ago` : NONE,
        formatVector(a.requested),
        formatVector(a.reserved_before),
        formatVector(a.available_before),
      ];
    }),
  );
}

/** Admission's answer for each worker, where the task stands in the queue, and what it waits on. */
async function taskAdmission(w: PrefixWriter, admission: PendingAdmission, now: Date): Promise<void> {
  try {
    const got = await admission;
    if ("e" in got) throw got.e;
    const adm = got.a;
    w.write(0, "Admission:");
    w.kv(1, "Summary", adm.summary);
    whyPending(w, adm);
    queueLines(w, adm);
    w.table(
      1,
      ["WORKER", "OK", "REASON", "SHORTFALLS"],
      adm.workers.map((x) => [
        x.worker_id,
        String(x.ok),
        x.reasons?.length ? x.reasons.join(",") : (x.reason ?? NONE),
        formatShortfalls(x.shortfalls),
      ]),
    );
    waitingOn(w, adm, now);
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    w.kv(0, "Admission", `<unavailable: ${e.reason}: ${e.message}>`);
  }
}

/** Where the task stands in the queue and which queued tasks outrank it. */
function whyPending(w: PrefixWriter, adm: TaskAdmission): void {
  if (adm.queue_position == null) return;
  const ahead = adm.higher_priority_ahead ?? [];
  const more = (adm.higher_priority_ahead_count ?? 0) - ahead.length;
  w.kv(1, "Queue Position", `${adm.queue_position} (${adm.queue_position - 1} queued ahead for the same workers)`);
  w.kv(1, "Higher Priority Ahead", ahead.length ? `${ahead.join(", ")}${more > 0 ? `, +${more} more` : ""}` : NONE);
}

const amounts = (a: Record<string, number>) => {
  const parts = Object.entries(a)
    .filter(([, v]) => v)
    .map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(", ") : "-";
};

/** The task's queue: where it stands in it, its usage against quota, its fair share against the others. */
function queueLines(w: PrefixWriter, adm: TaskAdmission): void {
  const q = adm.queue;
  if (!q) return;
  w.kv(
    1,
    "Queue",
    `${q.name}${q.limited ? "" : " (no Queue object: not limited)"}${q.position != null ? `, position ${q.position} in it` : ""}`,
  );
  for (const l of q.quota)
    w.kv(
      2,
      l.dimension,
      `${l.used} used + ${l.requested} requested of ${l.nominal} nominal + ${l.borrowable} borrowable (borrowing limit ${l.borrowing_limit})`,
    );
  w.kv(1, "Fair Share", q.standing);
  const waits = q.waits_on_borrowed ?? [];
  if (waits.length) {
    w.write(1, `Reclaim (${q.reclaim ?? "wait"}): waits on borrowed leases:`);
    for (const x of waits)
      w.write(
        2,
        `on ${x.worker}: ${x.leases.map((l) => `${l.task} (${l.queue})`).join(", ")}, ${eta(x.until, new Date())}`,
      );
  }
}

/** "fits on w1 when T17 and T21 end, ~2m", then the verified changes that would let it fit. */
function waitingOn(w: PrefixWriter, adm: TaskAdmission, now: Date): void {
  const lines = adm.workers
    .filter((x) => x.blocking_leases?.length)
    .sort((a, b) => msOf(a.blocking_until) - msOf(b.blocking_until))
    .map(
      (x) =>
        `fits on ${x.worker_id} when ${andList(x.blocking_leases!.map((l) => l.task))} end${x.blocking_leases!.length === 1 ? "s" : ""}, ${eta(x.blocking_until, now)}`,
    );
  if (lines.length) {
    w.write(1, "Waiting On:");
    for (const l of lines) w.write(2, l);
  }
  const sug = adm.suggestions ?? [];
  if (sug.length) {
    w.write(1, "Suggestions (each checked by admission):");
    for (const s of sug)
      w.write(2, s.kind === "empty_worker" && s.until ? `${s.change}, ${eta(s.until, now)}` : s.change);
  }
}

const andList = (xs: string[]) =>
  xs.length <= 1 ? xs.join("") : `${xs.slice(0, -1).join(", ")} and ${xs[xs.length - 1]}`;
/** An estimate from declared run times; without one, say so rather than guess. */
const eta = (until: string | undefined, now: Date) =>
  until === undefined ? "no run time declared" : `~${humanDuration(Math.max(0, msOf(until) - now.getTime()))}`;
const msOf = (iso: string | undefined) => (iso ? Date.parse(iso) : Infinity);

// --- Worker

async function describeWorker(client: Client, wk: Worker & Obj, now: Date): Promise<string> {
  const w = new PrefixWriter();
  identity(w, wk, now);
  if (Object.keys(wk.spec ?? {}).length) {
    w.write(0, "Spec:");
    writeNested(w, 1, wk.spec);
  } else w.kv(0, "Spec", NONE);

  const st = wk.status ?? {};
  const reg = st.registration;
  w.write(0, "Status:");
  w.kv(1, "Registered", reg ? `${when(reg.registered_at, now)} from ${reg.hostname ?? "unknown host"}` : NONE);
  w.kv(1, "Capabilities", (reg?.capabilities ?? wk.spec?.capabilities)?.join(", "));
  w.kv(1, "Last Heartbeat", when(st.last_heartbeat_at, now));
  w.kv(1, "Schedulable", wk.spec?.unschedulable ? "false (cordoned)" : "true");
  w.kv(1, "Desired Concurrency", st.desired_concurrency);
  w.kv(1, "Exclusive Holder", st.exclusive_holder);
  const nom = await unlessRefused(
    client
      .get<NominationsReply>("/api/data/nominations")
      .then((r) => r.nominations.find((n) => n.worker_id === wk.metadata.name)),
  );
  // Held for a starving task: only work that cannot delay it is admitted here.
  w.kv(
    1,
    "Nominated For",
    nom
      ? `${nom.task_id} (waits on ${nom.blocking_leases.join(", ") || NONE}${nom.starts_by ? `, starts by ${when(nom.starts_by, now)}` : ""})`
      : NONE,
  );
  conditions(w, st.conditions);

  // The data API derives headroom from the leases at read time; the status may lag a pass behind.
  const cap = await unlessRefused(
    client
      .get<WorkerCapacityReply>("/api/data/worker-capacity")
      .then((r) => r.workers.find((x) => x.worker_id === wk.metadata.name)),
  );
  const h: CapacityEntry = cap ?? {
    worker_id: wk.metadata.name,
    capacity: st.capacity,
    reserved: st.reserved,
    available: st.available,
    active_count: st.active_count,
    effective_limit: st.effective_limit,
  };
  w.write(0, "Headroom:");
  w.kv(1, "Active/Limit", `${h.active_count ?? "?"}/${h.effective_limit ?? "?"}`);
  w.table(
    1,
    ["RESOURCE", "CAPACITY", "RESERVED", "AVAILABLE"],
    [
      ...DIMENSIONS.map((d) => [
        d.field,
        num(h.capacity?.[d.field]),
        num(h.reserved?.[d.field]),
        num(h.available?.[d.field]),
      ]),
      ...(h.capacity?.gpu_types?.length || h.reserved?.gpu_types?.length
        ? [["gpu_types", types(h.capacity?.gpu_types), types(h.reserved?.gpu_types), "-"]]
        : []),
    ],
  );

  const leased = await client.get<{ items: Task[] }>(`${RESOURCE_PREFIX}/tasks`, {
    fieldSelector: `status.lease.worker=${wk.metadata.name}`,
  });
  const active = leased.items.filter((t) => t.status?.state === "leased" || t.status?.state === "running");
  w.section(
    0,
    "Active Leases",
    ["TASK", "STATE", "PLACEMENT", "EPOCH", "UNTIL", "RESERVATION"],
    active.map((t) => {
      const l = t.status!.lease!;
      return [
        t.metadata.name,
        t.status?.state ?? NONE,
        l.placement ?? "shared",
        String(l.epoch),
        when(l.lease_until, now),
        formatRequests(l.reservation),
      ];
    }),
  );
  await events(w, client, wk, now);
  return w.toString();
}

const num = (v: unknown) => (typeof v === "number" ? String(v) : NONE);
const types = (v: string[] | undefined) => (v?.length ? v.join(",") : "-");

// --- Campaign and the generic fallback

async function describeCampaign(client: Client, c: Campaign & Obj, now: Date): Promise<string> {
  const w = new PrefixWriter();
  identity(w, c, now);
  w.write(0, "Spec:");
  w.kv(1, "Campaign ID", c.spec?.campaign_id);
  w.kv(1, "Schema Version", c.spec?.schema_version);
  w.kv(1, "Cases", Array.isArray(c.spec?.cases) ? c.spec.cases.length : NONE);
  if (c.spec?.defaults && Object.keys(c.spec.defaults).length) {
    w.write(1, "Defaults:");
    writeNested(w, 2, c.spec.defaults);
  }
  const st = c.status ?? {};
  w.write(0, "Status:");
  w.kv(1, "Tasks", st.task_count);
  w.kv(1, "Pending", st.pending);
  w.kv(1, "Active", st.active);
  w.kv(1, "Final", st.final);
  w.kv(
    1,
    "By State",
    Object.entries(st.by_state ?? {})
      .map(([k, v]) => `${k}=${v}`)
      .join(", "),
  );
  conditions(w, st.conditions);
  await events(w, client, c, now);
  return w.toString();
}

async function describeGeneric(client: Client, o: Obj, now: Date): Promise<string> {
  const w = new PrefixWriter();
  identity(w, o, now);
  const { apiVersion: _a, kind: _k, metadata: _m, status, ...rest } = o as Obj & { apiVersion?: string };
  writeNested(w, 0, rest);
  if (status) {
    const { conditions: cs, ...st } = status as { conditions?: Condition[] };
    w.write(0, "Status:");
    writeNested(w, 1, st);
    if (cs) conditions(w, cs);
  }
  if (o.kind !== "Event") await events(w, client, o, now);
  return w.toString();
}

// --- Queue

async function describeQueue(client: Client, q: Queue & Obj, now: Date): Promise<string> {
  const w = new PrefixWriter();
  identity(w, q, now);
  const report = await unlessRefused(client.get<QueuesReport>("/api/data/queues"));
  const live = report?.queues.find((x) => x.name === q.metadata.name);
  w.write(0, "Spec:");
  w.kv(1, "Weight", q.spec?.weight ?? 1);
  w.kv(1, "Reclaim", q.spec?.reclaim ?? "wait");
  const st = q.status ?? {};
  if (live) {
    const dims = Object.keys(live.quota);
    w.table(
      1,
      ["DIMENSION", "USED", "NOMINAL", "BORROWING LIMIT", "LENDING LIMIT"],
      dims.map((d) => [
        d,
        String(live.used[d] ?? 0),
        String(live.quota[d]),
        String(live.borrowing_limit[d] ?? 0),
        String(live.lending_limit[d] ?? live.quota[d]),
      ]),
    );
    w.write(0, "Status:");
    w.kv(1, "Used", amounts(live.used));
    w.kv(1, "Borrowed", amounts(live.borrowed));
    w.kv(1, "Lent", amounts(live.lent));
    w.kv(1, "Pending", live.pending);
    w.kv(1, "Admitted", live.admitted);
    w.kv(
      1,
      "Share",
      `${live.share.toFixed(2)} now, ${live.decayed_share.toFixed(2)} decayed${report!.half_life_seconds ? ` (half-life ${report!.half_life_seconds}s; claims order by this one)` : " (no half-life set: claims order by the share now)"}`,
    );
    w.kv(1, "Fair Share", report!.standing);
  } else {
    writeNested(w, 1, {
      quota: q.spec?.quota ?? {},
      borrowing_limit: q.spec?.borrowing_limit ?? {},
      lending_limit: q.spec?.lending_limit ?? {},
    });
    w.write(0, "Status:");
    const { conditions: _c, ...rest } = st as { conditions?: unknown };
    writeNested(w, 1, rest);
  }
  conditions(w, st.conditions);
  await events(w, client, q, now);
  return w.toString();
}

const DESCRIBERS: Record<string, (c: Client, o: any, now: Date) => Promise<string>> = {
  Task: describeTask,
  Worker: describeWorker,
  Campaign: describeCampaign,
  Queue: describeQueue,
};

export async function describe(client: Client, k: KindInfo, name: string): Promise<string> {
  const o = await client.get<Obj>(`${k.path}/${encodeURIComponent(name)}`);
  return (DESCRIBERS[k.kind] ?? describeGeneric)(client, o, new Date());
}

export function describeCommand(): Command {
  return withController(new Command("describe"))
    .description("show one worker, task or campaign in detail: spec, status, conditions, admission, events")
    .argument("<type>", "worker, task or campaign (plural and short names lw, lt, lc too)")
    .argument("<name...>", "object names")
    .action(async (type: string, names: string[], _o: unknown, cmd: Command) => {
      const k = resolveKind(type);
      const client = clientOf(cmd);
      const texts: string[] = [];
      for (const n of names) texts.push(await describe(client, k, n));
      out(texts.join("\n"));
    });
}

/** A supplementary read: a Hub that refuses it (an older Hub, a narrower token) leaves that part out; other errors still fail. */
async function unlessRefused<T>(p: Promise<T>): Promise<T | undefined> {
  try {
    return await p;
  } catch (e) {
    if (e instanceof ApiError) return undefined;
    throw e;
  }
}
