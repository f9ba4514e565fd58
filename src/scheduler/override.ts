// POST /api/admin/override-state (RUNNER_PROTOCOL 1b): an operator sets a task's state by
// hand, with a reason. It goes through the same status write as every other transition,
// so the lease rules hold: leaving the active states ends the lease and so releases its
// reservation, and an active state is only ever kept, never made up without a lease.
import { isActive, isFinal, isQueued, type TaskStatus } from "../resources/types.ts";
import { jsonClone } from "../resources/json.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import { endLease, markFinal } from "./lifecycle.ts";
import type { StateOverride } from "../protocol/parse.ts";

export async function overrideState(ctx: SchedulerContext, o: StateOverride) {
  const { task_id: taskId, state, reason, operator } = o;

  let released: string | undefined;
  const out = await ctx.updateTask<{ ok: true; task_id: string; old_state: string; new_state: string }>(taskId, (t) => {
    const old = t.status?.state ?? "queued";
    const result = { ok: true as const, task_id: taskId, old_state: old, new_state: state };
    if (old === state) return { result };
    const now = ctx.now();
    const from: TaskStatus = t.status ?? { state: "queued", attempt: 1 };
    let status: TaskStatus;
    if (isActive(state)) {
      // leased <-> running keeps the lease it has; a lease is granted only by admission.
      if (!isActive(old) || !from.lease)
        throw new HubError(409, "override_needs_lease", {
          task_id: taskId,
          state: old,
          detail: `"${state}" needs a lease, and the task holds none; lease it with a claim or push-task`,
        });
      status = { ...jsonClone(from), state };
    } else {
      released = isActive(old) ? from.lease?.worker : undefined;
      status = endLease(from, state, now, "overridden", "StateOverridden");
      if (isFinal(state)) markFinal(status, now, "StateOverridden", `set by ${operator}: ${reason}`);
      else {
        // Out of a final state: it is no longer finished.
        delete status.finished_at;
        status.conditions = (status.conditions ?? []).filter((c) => c.type !== "Succeeded" && c.type !== "Failed");
      }
      if (isQueued(state)) {
        delete status.result;
        delete status.error;
      }
    }
    return { status, result };
  });
  const t = ctx.task(taskId);
  if (t && out.old_state !== out.new_state)
    ctx.recordEvent({
      object: t,
      type: "Normal",
      reason: "StateOverridden",
      message: `${out.old_state} -> ${out.new_state} by ${operator}: ${reason}${released ? `; lease on ${released} ended, reservation released` : ""}`,
    });
  return out;
}
