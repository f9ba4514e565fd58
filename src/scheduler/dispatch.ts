// POST /api/tasks/dispatch (v1 dispatch schema) and dispatch-repo-run: raw task requests
// become Task resources in one transaction. An identical resend is idempotent; any
// conflicting id or invalid field rejects the whole batch and stores nothing.
import { randomUUID } from "node:crypto";
import { API_VERSION } from "../resources/crds.ts";
import { slug } from "../resources/ids.ts";
import { CAMPAIGN_LABEL } from "../resources/manifest.ts";
import { mergeProfiles, profileShapeErrors, truncateResources, type Truncation } from "../resources/profile.ts";
import { sameTaskRequest } from "../resources/request-identity.ts";
import { initialStatus, type Task } from "../resources/types.ts";
import { validateObject, type FieldError } from "../resources/validate.ts";
import type { TxnOp } from "../store/store.ts";
import { createAllOrNothing } from "../store/chunked.ts";
import { isStoreError } from "../store/errors.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { DispatchedTask, DispatchReply, DispatchRequest } from "../protocol/types.gen.ts";

const isObj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : typeof v === "number" ? String(v) : undefined);

const TASK_KEYS = [
  "task_id",
  "task_kind",
  "case_id",
  "run_id",
  "setting_id",
  "case_version",
  "scenario_id",
  "package_id",
  "campaign_id",
  "queue",
  "priority",
  "required_capability",
  "execution_profile",
  "retry_policy",
  "payload",
  "expected",
];

/** One requested task -> a Task resource (not yet stored), or field errors under `at`. */
function toTask(
  raw: unknown,
  defaults: DispatchRequest,
  at: string,
): { task?: Task; errors: FieldError[]; truncated?: Truncation[] } {
  if (!isObj(raw)) return { errors: [{ field: at, message: "must be an object", reason: "FieldValueTypeInvalid" }] };
  const errors: FieldError[] = [];
  for (const k of Object.keys(raw))
    if (!TASK_KEYS.includes(k)) errors.push({ field: `${at}.${k}`, message: "unknown field", reason: "FieldUnknown" });
  // An id of the wrong type must not quietly become a random one.
  if (raw.task_id !== undefined && typeof raw.task_id !== "string")
    errors.push({ field: `${at}.task_id`, message: "must be a string", reason: "FieldValueTypeInvalid" });
  for (const k of [
    "case_id",
    "run_id",
    "setting_id",
    "campaign_id",
    "task_kind",
    "case_version",
    "scenario_id",
    "package_id",
  ])
    if (raw[k] !== undefined && raw[k] !== null && typeof raw[k] !== "string" && !Number.isSafeInteger(raw[k]))
      errors.push({ field: `${at}.${k}`, message: "must be a string", reason: "FieldValueTypeInvalid" });
  if (raw.payload !== undefined && !isObj(raw.payload))
    errors.push({ field: `${at}.payload`, message: "must be an object", reason: "FieldValueTypeInvalid" });
  // A profile that is not an object must not quietly mean "shared, nothing requested".
  errors.push(...profileShapeErrors(raw.execution_profile, `${at}.execution_profile`));
  if (isObj(raw.payload))
    errors.push(...profileShapeErrors(raw.payload.execution_profile, `${at}.payload.execution_profile`));
  if (isObj(defaults.payload))
    errors.push(...profileShapeErrors(defaults.payload.execution_profile, "payload.execution_profile"));
  if (errors.length) return { errors };
  const payload: Record<string, unknown> = {
    ...(isObj(defaults.payload) ? defaults.payload : {}),
    ...((raw.payload as Record<string, unknown>) ?? {}),
  };
  const normalized = isObj(payload.normalized) ? payload.normalized : {};
  const id = str(raw.task_id) ? slug(raw.task_id) : `task-${randomUUID()}`;
  // The task's own profile replaces the payload's whole, as v1 has it (RUNNER_PROTOCOL §5).
  const given = raw.execution_profile !== undefined && raw.execution_profile !== null;
  const { profile, truncated } = truncateResources(
    mergeProfiles(given ? raw.execution_profile : payload.execution_profile),
    given ? `${at}.execution_profile` : `${at}.payload.execution_profile`,
  );
  const campaign = str(raw.campaign_id) ?? str(normalized.campaign_id);
  const retry = raw.retry_policy ?? payload.retry_policy;
  const spec: Record<string, unknown> = {
    task_kind: str(raw.task_kind) ?? "execution",
    ...(campaign ? { campaign_id: campaign } : {}),
    ...(str(raw.case_id ?? normalized.case_id) ? { case_id: str(raw.case_id ?? normalized.case_id) } : {}),
    ...(str(raw.run_id ?? normalized.run_id) ? { run_id: str(raw.run_id ?? normalized.run_id) } : {}),
    ...(str(raw.setting_id ?? normalized.setting_id)
      ? { setting_id: str(raw.setting_id ?? normalized.setting_id) }
      : {}),
    case_version: str(raw.case_version) ?? "v1",
    ...(str(raw.scenario_id ?? raw.setting_id) ? { scenario_id: str(raw.scenario_id ?? raw.setting_id) } : {}),
    package_id: str(raw.package_id) ?? str(defaults.package_id) ?? `pkg-${id}`,
    priority: raw.priority ?? defaults.priority ?? 0,
    ...((raw.queue ?? defaults.queue) !== undefined ? { queue: raw.queue ?? defaults.queue } : {}),
    required_capability: raw.required_capability ?? defaults.required_capability ?? "linux",
    execution_profile: profile,
    ...(retry !== undefined ? { retry_policy: retry } : {}),
    payload: { ...payload, execution_profile: profile },
    ...(raw.expected !== undefined ? { expected: raw.expected } : {}),
  };
  // Request fields are unchecked input until the Task schema checks the whole object just
  // below; a task with any error is never returned.
  const task = {
    apiVersion: API_VERSION,
    kind: "Task",
    metadata: { name: id, labels: campaign ? { [CAMPAIGN_LABEL]: slug(campaign) } : {} },
    spec,
    status: initialStatus(),
  } as unknown as Task;
  for (const e of validateObject(task)) {
    const field = e.field.startsWith("spec.")
      ? `${at}.${e.field.slice(5)}`
      : e.field === "metadata.name"
        ? `${at}.task_id`
        : `${at}.${e.field}`;
    errors.push({ ...e, field });
  }
  return { task: errors.length ? undefined : task, errors, truncated };
}

const sameRequest = (a: Task, b: Task) => sameTaskRequest(a.spec, b.spec);

/** A dispatch document whose frame protocol/parse.ts has checked; each task request is checked here. */
export async function dispatch(
  ctx: SchedulerContext,
  body: DispatchRequest,
): Promise<{ status: 200 | 201; body: DispatchReply }> {
  const requested: unknown[] =
    Array.isArray(body.tasks) && body.tasks.length
      ? body.tasks
      : Array.isArray(body.case_ids) && body.case_ids.length
        ? body.case_ids.map((c) => ({ case_id: c }))
        : [{ payload: { runner: "noop" } }];
  const errors: FieldError[] = [];
  const tasks: Task[] = [];
  const truncations = new Map<string, Truncation[]>();
  requested.forEach((r, i) => {
    const out = toTask(r, body, `tasks[${i}]`);
    errors.push(...out.errors);
    if (out.task) tasks.push(out.task);
    if (out.task && out.truncated?.length) truncations.set(out.task.metadata.name, out.truncated);
  });
  if (errors.length) {
    const code = errors.every((e) => e.field.includes(".execution_profile"))
      ? "invalid_execution_profile"
      : "invalid_task_extensions";
    throw new HubError(400, code, {
      detail: errors.map((e) => `${e.field}: ${e.message}`).join("; "),
      errors: errors.map(({ field, message }) => ({ field, message })),
    });
  }
  const seen = new Map<string, number>();
  const dupes = tasks
    .filter((t) => {
      const n = (seen.get(t.metadata.name) ?? 0) + 1;
      seen.set(t.metadata.name, n);
      return n === 2;
    })
    .map((t) => t.metadata.name);
  if (dupes.length)
    throw new HubError(409, "task_id_conflict", {
      ids: dupes,
      detail: "the same task_id appears twice in one dispatch",
    });

  // No lock: creating tasks changes no lease, and the store refuses a name taken meanwhile.
  for (let attempt = 0; ; attempt++) {
    const ops: TxnOp<Task>[] = [];
    const created: Task[] = [];
    const existing: Task[] = [];
    const conflicts: string[] = [];
    for (const t of tasks) {
      const cur = ctx.task(t.metadata.name);
      if (!cur) {
        ops.push({ op: "create", object: t });
        created.push(t);
      } else if (sameRequest(cur, t)) {
        ops.push({ op: "check", kind: "Task", name: t.metadata.name, resourceVersion: cur.metadata.resourceVersion! });
        existing.push(cur);
      } else conflicts.push(t.metadata.name);
    }
    if (conflicts.length)
      throw new HubError(409, "task_id_conflict", {
        ids: conflicts,
        detail: "a task with this id exists with a different request",
      });
    try {
      // All or none, also past one transaction of the store (etcd): see createAllOrNothing.
      const written = created.length ? await createAllOrNothing(ctx.store, ops, (chunk) => ctx.commit(chunk)) : [];
      const byName = new Map(written.map((o) => [o.metadata.name, o]));
      const row = (t: Task): DispatchedTask => ({
        task_id: t.metadata.name,
        task_kind: t.spec.task_kind,
        case_id: t.spec.case_id ?? null,
        run_id: t.spec.run_id ?? null,
        setting_id: t.spec.setting_id ?? null,
        state: t.status?.state ?? "queued",
      });
      for (const t of created)
        ctx.recordEvent({
          object: byName.get(t.metadata.name) ?? t,
          type: "Normal",
          reason: "Dispatched",
          message: `dispatched${str(body.operator) ? ` by ${body.operator}` : ""}`,
        });
      for (const t of created) {
        const cut = truncations.get(t.metadata.name);
        if (cut)
          ctx.recordEvent({
            object: byName.get(t.metadata.name) ?? t,
            type: "Warning",
            reason: "ResourceTruncated",
            message: `whole units only: ${cut.map((c) => `${c.field} ${c.from} -> ${c.to}`).join(", ")}`,
          });
      }
      return {
        status: created.length ? 201 : 200,
        body: { created: created.map((t) => row(byName.get(t.metadata.name) ?? t)), existing: existing.map(row) },
      };
    } catch (e) {
      // Someone created or changed one of these ids in between: catch up, look again, once or twice.
      if (attempt < 2 && (isStoreError(e, "Conflict") || isStoreError(e, "AlreadyExists"))) {
        await ctx.caughtUp();
        continue;
      }
      throw e;
    }
  }
}
