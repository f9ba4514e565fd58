// What Runners and operators do to a leased task: start, renew, upload, complete, fail,
// cancel, retry, and lease expiry. Every call from a Runner is fenced: it must come from
// the worker holding the task's current lease (and, if it says, the current attempt).
import { countedAttempts } from "./reclaim.ts";
import { randomUUID } from "node:crypto";
import { mkdir, open, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { isActive, isFinal, type Task, type TaskStatus } from "../resources/types.ts";
import { inspectResultFile, issuesFromError, type ResultInspection } from "../results/zip.ts";
import { isStoreError } from "../store/errors.ts";
import { conflictOrTaken, retryOnConflict } from "../store/retry.ts";
import type { StoredObject, TxnOp } from "../store/store.ts";
import { leaseDue, renewalCheck, renewalObject } from "./renewal.ts";
import type { SchedulerContext } from "./context.ts";
import { HubError } from "../protocol/errors.ts";
import type { Failure, LeaseCall, Renewal } from "../protocol/parse.ts";
import type { LeaseReply, UploadReply } from "../protocol/types.gen.ts";
import { endLease, markFinal, requeue } from "./lifecycle.ts";
import { nominationEnded } from "./nomination.ts";
import { adjustConcurrency } from "./tuning.ts";
import { iso } from "../resources/time.ts";

/** The fence: the caller must hold the task's current, active lease. */
function fence(t: Task, workerId: string, attemptNo: number | undefined): void {
  const st = t.status;
  if (st?.state === "cancelled")
    throw new HubError(409, "task_cancelled", { task_id: t.metadata.name, state: st.state });
  if (!st?.lease || !isActive(st.state))
    throw new HubError(409, "stale_lease", {
      task_id: t.metadata.name,
      state: st?.state ?? "queued",
      detail: "the task holds no active lease",
    });
  if (st.lease.worker !== workerId)
    throw new HubError(409, "lease_worker_mismatch", {
      task_id: t.metadata.name,
      lease_worker_id: st.lease.worker,
      worker_id: workerId,
    });
  if (attemptNo !== undefined && !(Number.isSafeInteger(attemptNo) && attemptNo >= 0))
    throw new HubError(400, "invalid_attempt_no", {
      field: "attempt_no",
      detail: "must be a non-negative integer",
      received: attemptNo,
    });
  if (attemptNo !== undefined && attemptNo !== st.lease.epoch)
    throw new HubError(409, "stale_lease", {
      task_id: t.metadata.name,
      attempt_no: st.lease.epoch,
      received: attemptNo,
    });
}

/** A lease holder's call: the asking Runner is alive, whatever the answer. */
function leaseCall(ctx: SchedulerContext, call: LeaseCall): { workerId: string; taskId: string } {
  ctx.liveness.touch(call.worker_id, ctx.now());
  return { workerId: call.worker_id, taskId: call.task_id };
}

export async function start(ctx: SchedulerContext, call: LeaseCall): Promise<LeaseReply> {
  const { workerId, taskId } = leaseCall(ctx, call);
  return ctx.updateTask<LeaseReply>(taskId, (t) => {
    fence(t, workerId, call.attempt_no);
    const old = t.status!.state!;
    if (old === "running") return { result: { ok: true, task_id: taskId, old_state: old, new_state: "running" } };
    // Only the state and the lease change: the rest is the stored status's, shared, not copied.
    const st = t.status!;
    const status: TaskStatus = {
      ...st,
      state: "running",
      lease: { ...st.lease!, started_at: iso(ctx.now()) },
    };
    return { status, result: { ok: true, task_id: taskId, old_state: old, new_state: "running" } };
  });
}

/** A renew writes the task's small TaskLease record (renewal.ts), never the Task itself. */
export async function renew(ctx: SchedulerContext, call: Renewal): Promise<LeaseReply> {
  const { workerId, taskId } = leaseCall(ctx, call);
  const seconds = call.lease_seconds;
  // Another writer of the task, or of its record (created or dropped meanwhile), is a race the Hub retries.
  const raced = (e: unknown) => conflictOrTaken(e) || isStoreError(e, "NotFound");
  return retryOnConflict(
    async () => {
      const t = ctx.task(taskId);
      if (!t) throw new HubError(404, "task_not_found", { task_id: taskId });
      fence(t, workerId, call.attempt_no);
      const cur = ctx.renewal(taskId);
      const until = iso(ctx.now() + seconds * 1000);
      const op: TxnOp = cur
        ? { op: "update", object: renewalObject(t, until, cur) }
        : { op: "create", object: renewalObject(t, until) };
      // The task must still hold this lease when the renewal commits.
      await ctx.commit([{ op: "check", kind: "Task", name: taskId, resourceVersion: t.metadata.resourceVersion! }, op]);
      return { ok: true, task_id: taskId, lease_until: until };
    },
    { retryable: raced, refresh: () => ctx.caughtUp() },
  );
}

type RetryPolicy = {
  max_attempts?: number;
  retry_categories?: string[];
  categories?: string[];
  different_worker?: boolean;
};

function retryPolicyOf(t: Task): RetryPolicy {
  const fromPayload = (t.spec.payload ?? {}).retry_policy as RetryPolicy | undefined;
  return { ...(fromPayload ?? {}), ...(t.spec.retry_policy ?? {}) };
}

/** Automatic retry (v1): the issues meet the policy's categories and attempts remain. */
function autoRetry(
  ctx: SchedulerContext,
  t: Task,
  issues: string[],
): { queued: boolean; reason?: string; categories?: string[]; excludeWorker?: string } {
  const p = retryPolicyOf(t);
  const cats = p.retry_categories ?? p.categories ?? [];
  const hit = issues.filter((i) => cats.includes(i));
  if (!hit.length) return { queued: false };
  const max = p.max_attempts ?? ctx.opts.defaultMaxAttempts;
  const attempt = countedAttempts(t.status);
  if (attempt >= max) return { queued: false, reason: "max_attempts_reached", categories: hit };
  const holder = t.status?.lease?.worker;
  if (p.different_worker && holder) {
    // Needs another capable, unblocked worker seen recently, or the retry could never land.
    const cap = (t.spec.required_capability ?? "").trim();
    const excluded = new Set([...(t.status?.excluded_workers ?? []), holder]);
    const other = ctx.cache.list("Worker").some((w) => {
      const name = w.metadata.name;
      if (excluded.has(name) || w.spec.unschedulable) return false;
      const caps: string[] = w.spec.capabilities ?? w.status?.registration?.capabilities ?? [];
      const seen = ctx.liveness.get(name);
      return (!cap || caps.includes(cap) || caps.includes("*")) && !!seen && ctx.now() - seen.lastSeen <= 5 * 60_000;
    });
    if (!other) return { queued: false, reason: "automatic_retry_unavailable", categories: hit };
    return { queued: true, categories: hit, excludeWorker: holder };
  }
  return { queued: true, categories: hit };
}

/** An upload's body, already streamed to a temp file (fsynced) by the API layer. */
export type UploadedFile = { path: string; bytes: number; sha256: string };

/**
 * The checks an upload can pass before its body is read: the headers name a task, and the
 * worker holding its current lease. A refused upload costs the Hub no bytes on disk.
 */
export function uploadFence(
  ctx: SchedulerContext,
  headers: { taskId?: string; workerId?: string },
): { taskId: string; workerId: string } {
  const taskId = headers.taskId;
  if (!taskId) throw new HubError(400, "X-Task-Id required");
  // v1 waved an upload without X-Worker-Id through; Loom requires it, so the fence always applies.
  const workerId = headers.workerId;
  if (!workerId)
    throw new HubError(400, "X-Worker-Id required", { detail: "uploads must name the worker holding the lease" });
  ctx.liveness.touch(workerId, ctx.now());
  const pre = ctx.task(taskId);
  if (!pre) throw new HubError(404, "task_not_found", { task_id: taskId });
  fence(pre, workerId, undefined);
  return { taskId, workerId };
}

/** Score the streamed result, move it into place and commit the verdict; the temp file never outlives the call. */
export async function upload(
  ctx: SchedulerContext,
  headers: { taskId?: string; workerId?: string },
  file: UploadedFile,
): Promise<UploadReply> {
  let final: string | undefined;
  try {
    const { taskId, workerId } = uploadFence(ctx, headers);
    const inspection = await inspectResultFile(file.path, file.bytes);
    const resultId = `result-${randomUUID()}`;
    await mkdir(ctx.opts.resultsDir, { recursive: true });
    final = join(ctx.opts.resultsDir, `${resultId}.zip`);
    await rename(file.path, final);
    await syncDir(ctx.opts.resultsDir); // the name is durable before the state that points at it
    const out = await commitUpload(ctx, taskId, workerId, { ...file, path: final }, resultId, inspection);
    final = undefined; // committed: the file is the result's now
    return out;
  } finally {
    await rm(file.path, { force: true });
    if (final) await rm(final, { force: true });
  }
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, "r");
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

async function commitUpload(
  ctx: SchedulerContext,
  taskId: string,
  workerId: string,
  file: UploadedFile,
  resultId: string,
  inspection: ResultInspection,
): Promise<UploadReply> {
  const { path, sha256, bytes } = file;
  return ctx.readModifyWrite(async (commit) => {
    const t = ctx.task(taskId);
    if (!t) throw new HubError(404, "task_not_found", { task_id: taskId });
    fence(t, workerId, undefined);
    const now = ctx.now();
    const attempt = t.status!.attempt ?? 1;
    const verdict = inspection.verdict;
    const retry = verdict === "clean" ? { queued: false as const } : autoRetry(ctx, t, inspection.issues);
    let status: TaskStatus;
    if (retry.queued) {
      status = requeue(t.status!, now, verdict, "AutoRetry", { excludeWorker: retry.excludeWorker });
    } else {
      status = endLease(t.status!, verdict as TaskStatus["state"] & string, now, verdict, "ResultUploaded", {
        resultId,
      });
      status.result = { result_id: resultId, verdict, bytes, sha256, uploaded_at: iso(now) };
      status.issues = inspection.issues;
      markFinal(status, now, verdict === "clean" ? "Clean" : "ResultVerdict", `result ${resultId}: ${verdict}`);
    }
    const resultObj: StoredObject = {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Result",
      metadata: { name: resultId, labels: { "loom.dev/task": taskId } },
      spec: {
        task_id: taskId,
        attempt_no: attempt,
        worker_id: workerId,
        verdict,
        bytes,
        sha256,
        path,
        issues: inspection.issues,
        files: inspection.files,
        uploaded_at: iso(now),
      },
    };
    const [written] = await commit([
      { op: "updateStatus", object: { ...t, status } },
      { op: "create", object: resultObj },
    ]);
    ctx.recordEvent({
      object: written,
      type: verdict === "clean" ? "Normal" : "Warning",
      reason: retry.queued ? "Requeued" : "LeaseReleased",
      message: retry.queued
        ? `verdict ${verdict} (${retry.categories!.join(", ")}): retrying as attempt ${attempt + 1}`
        : `result ${resultId}: ${verdict}; reservation released`,
    });
    if (!retry.queued && retry.reason === "automatic_retry_unavailable")
      ctx.recordEvent({
        object: written,
        type: "Warning",
        reason: "AutomaticRetryUnavailable",
        message: "no other capable worker seen in the last 5 minutes",
      });
    await adjustConcurrency(ctx, workerId, { verdict, issues: inspection.issues, entries: inspection.entries }, commit);
    return {
      ok: true,
      result_id: resultId,
      attempt_no: attempt,
      verdict,
      // Where to fetch it, not where it lies on the Hub's disk.
      download_url: `/api/results/${resultId}`,
      auto_retry: retry.queued ? { queued: true, attempt_no: attempt + 1, categories: retry.categories } : null,
      oracle_outcome: null,
      oracle_dispatch: null,
    };
  });
}

export async function complete(ctx: SchedulerContext, call: LeaseCall): Promise<LeaseReply> {
  const { workerId, taskId } = leaseCall(ctx, call);
  let released: Task | undefined;
  const out = await ctx.updateTask<LeaseReply>(taskId, (t) => {
    const state = t.status?.state;
    released = undefined; // a retried try decides afresh
    // A task already final answers as v1 does; anything else must come from the lease holder.
    if (isFinal(state)) return { result: { ok: true, task_id: taskId, state } };
    fence(t, workerId, call.attempt_no);
    // Complete without an upload: v1 parks the task in `returned`, which holds no reservation.
    const status = endLease(t.status!, "returned", ctx.now(), "returned", "CompletedWithoutResult");
    released = t;
    return { status, result: { ok: true, task_id: taskId, old_state: state, new_state: "returned" } };
  });
  if (released)
    ctx.recordEvent({
      object: released,
      type: "Warning",
      reason: "LeaseReleased",
      message: `${workerId} completed without uploading a result; reservation released`,
    });
  return out;
}

export async function fail(ctx: SchedulerContext, call: Failure): Promise<LeaseReply> {
  const { workerId, taskId } = leaseCall(ctx, call);
  const error = call.error;
  const out = await ctx.updateTask<LeaseReply>(taskId, (t) => {
    try {
      fence(t, workerId, call.attempt_no);
    } catch {
      return { result: { ok: true, ignored_stale_failure: true, task_id: taskId, state: t.status?.state } };
    }
    const issues = issuesFromError(error);
    const now = ctx.now();
    const old = t.status!.state;
    const retry = autoRetry(ctx, t, issues);
    let status: TaskStatus;
    if (retry.queued)
      status = requeue(t.status!, now, "run_error", "AutoRetry", { excludeWorker: retry.excludeWorker });
    else {
      status = endLease(t.status!, "run_error", now, "run_error", "RunnerReportedFailure");
      status.error = error;
      status.issues = issues;
      markFinal(status, now, "RunnerReportedFailure", `runner reported: ${JSON.stringify(error).slice(0, 200)}`);
    }
    return {
      status,
      result: {
        ok: true,
        task_id: taskId,
        old_state: old,
        new_state: status.state,
        auto_retry: retry.queued ? { queued: true, attempt_no: status.attempt, categories: retry.categories } : null,
        issues,
      },
    };
  });
  if (!out.ignored_stale_failure) {
    const t = ctx.task(taskId);
    if (t)
      ctx.recordEvent({
        object: t,
        type: "Warning",
        reason: out.new_state === "retry_queued" ? "Requeued" : "LeaseReleased",
        message: `${workerId} reported a failure; ${out.new_state === "retry_queued" ? `retrying as attempt ${t.status?.attempt}` : "reservation released"}`,
      });
    await adjustConcurrency(ctx, workerId, { verdict: "run_error", issues: out.issues ?? [], entries: null });
  }
  return out;
}

export async function cancel(ctx: SchedulerContext, taskId: string): Promise<LeaseReply> {
  let held: string | undefined;
  const out = await ctx.updateTask<LeaseReply>(taskId, (t) => {
    const old = t.status?.state ?? "queued";
    held = t.status?.nominated_worker;
    if (old === "cancelled") return { result: { ok: true, task_id: taskId, old_state: old, new_state: old } };
    // Cancel ends the lease at once, releasing the reservation; the old holder is fenced off.
    const status = markFinal(
      endLease(t.status ?? { state: "queued", attempt: 1 }, "cancelled", ctx.now(), "cancelled", "Cancelled"),
      ctx.now(),
      "Cancelled",
      "cancelled by an operator",
    );
    return { status, result: { ok: true, task_id: taskId, old_state: old, new_state: "cancelled" } };
  });
  const t = ctx.task(taskId);
  if (t) ctx.recordEvent({ object: t, type: "Normal", reason: "Cancelled", message: "cancelled; any lease released" });
  if (t && held && out.new_state === "cancelled" && out.old_state !== "cancelled")
    ctx.recordEvent(nominationEnded(t, held, "cancelled"));
  return out;
}

export async function retry(ctx: SchedulerContext, taskId: string, preserveExcluded: boolean): Promise<LeaseReply> {
  const out = await ctx.updateTask<LeaseReply>(taskId, (t) => {
    const old = t.status?.state ?? "queued";
    const status = requeue(t.status ?? { state: "queued", attempt: 1 }, ctx.now(), "retried", "OperatorRetry", {
      clearExclusions: !preserveExcluded,
    });
    return {
      status,
      result: { ok: true, task_id: taskId, old_state: old, new_state: "retry_queued", attempt_no: status.attempt },
    };
  });
  const t = ctx.task(taskId);
  if (t)
    ctx.recordEvent({
      object: t,
      type: "Normal",
      reason: "Requeued",
      message: `retried by an operator as attempt ${out.attempt_no}`,
    });
  return out;
}

function maxAttemptsForExpiry(ctx: SchedulerContext, t: Task): number {
  return retryPolicyOf(t).max_attempts ?? ctx.opts.defaultMaxAttempts;
}

export type Expired = { task_id: string; old_state: string; new_state: string };

/**
 * End one task's lease if its lease_until (as stored) has passed: requeue it with attempt+1,
 * or end it lease_expired once attempts run out. Deciding from the stored lease_until means
 * a new leader never expires a lease early, and a second call changes nothing.
 */
export async function expireLease(ctx: SchedulerContext, name: string): Promise<Expired | undefined> {
  try {
    const r = await ctx.updateTask(
      name,
      (t) => {
        const lease = t.status?.lease;
        const due = leaseDue(t, ctx.renewal(name));
        if (!lease || due === undefined || due >= ctx.now()) return { result: undefined };
        const old = t.status!.state!;
        const attempt = countedAttempts(t.status);
        const status =
          attempt < maxAttemptsForExpiry(ctx, t)
            ? requeue(t.status!, ctx.now(), "lease_expired", "LeaseExpired")
            : markFinal(
                endLease(t.status!, "lease_expired", ctx.now(), "lease_expired", "LeaseExpired"),
                ctx.now(),
                "AttemptsExhausted",
                `lease on ${lease.worker} expired on attempt ${attempt} of ${maxAttemptsForExpiry(ctx, t)}`,
              );
        return {
          status,
          result: { task_id: t.metadata.name, old_state: old, new_state: status.state!, worker: lease.worker },
        };
      },
      () => [renewalCheck(name, ctx.renewal(name))],
    );
    if (!r) return undefined;
    const t = ctx.task(r.task_id);
    if (t)
      ctx.recordEvent({
        object: t,
        type: "Warning",
        reason: "LeaseExpired",
        message: `lease on ${r.worker} expired; ${r.new_state === "retry_queued" ? `requeued as attempt ${t.status?.attempt}` : "no attempts left"}`,
      });
    return { task_id: r.task_id, old_state: r.old_state, new_state: r.new_state };
  } catch (e) {
    if (e instanceof HubError && e.status === 404) return undefined;
    throw e;
  }
}

/** Expire every lease past its lease_until now (POST /api/admin/expire-leases). */
export async function expireLeases(ctx: SchedulerContext) {
  const expired: Expired[] = [];
  const now = ctx.now();
  const due = [...ctx.tasksInState("leased"), ...ctx.tasksInState("running")].filter(
    (t) => (leaseDue(t, ctx.renewal(t.metadata.name)) ?? Infinity) < now,
  );
  for (const d of due) {
    const r = await expireLease(ctx, d.metadata.name);
    if (r) expired.push(r);
  }
  return { ok: true, expired, count: expired.length };
}
