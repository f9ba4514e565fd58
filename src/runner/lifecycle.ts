// One claimed (or pushed) task from start to complete/fail (RUNNER_PROTOCOL §2 step 4),
// shared by the pull loop and the Direct Runner API.
import { readFile } from "node:fs/promises";
import { HubError, type HubClient, type UploadReply } from "./client.ts";
import { executeTask, type ClaimedTask } from "./execute.ts";

export interface TaskContext {
  client: HubClient;
  workerId: string;
  workDir: string;
  leaseSeconds: number;
  /** Env var names never passed to task processes (the token variables). */
  scrubEnv: string[];
  log: (line: string) => void;
  killGraceMs?: number;
  /** Overrides the renew interval derived from leaseSeconds (tests). */
  renewIntervalMs?: number;
  /** Delays between retries of a call that got no reply (default 1 s, 2 s, 4 s). */
  retryDelaysMs?: number[];
}

export type TaskPhase = "starting" | "running" | "uploading" | "completing" | "failing";

export interface TaskReport {
  task_id: string;
  ok: boolean;
  /** completed | auto_retry | failed | start_failed | lease_lost */
  state: string;
  exit_code?: number;
  verdict?: string;
  result_id?: string;
  zip_path?: string;
  error?: { type: string; detail: string };
}

/** §2: a renew every max(10, min(120, lease/3)) seconds. */
export function renewIntervalSeconds(leaseSeconds: number): number {
  return Math.max(10, Math.min(120, Math.floor(Math.max(30, leaseSeconds) / 3)));
}

/** The abort reason that means "the Hub says this lease is no longer ours". */
export const LEASE_LOST = "lease_lost";

const isLeaseGone = (e: unknown): e is HubError => e instanceof HubError && (e.status === 409 || e.status === 404);

/** Retries only when the Hub was not reached; an HTTP answer is final. */
export async function withNetworkRetry<T>(fn: () => Promise<T>, delaysMs: number[] = [1000, 2000, 4000]): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof HubError && e.network) || i >= delaysMs.length) throw e;
      await new Promise((r) => setTimeout(r, delaysMs[i]));
    }
  }
}

const errorOf = (e: unknown) => ({
  type: e instanceof Error ? e.name : "Error",
  detail: e instanceof Error ? e.message : String(e),
});

/**
 * start → renew while running → execute → upload → complete (unless the upload queued an
 * automatic retry). An exception in execute, upload or complete is reported with fail; a
 * failed start is not (the task is not ours). A 409/404 on renew stops the task's processes.
 * `abort` lets the caller stop the task (shutdown); that is reported as a failure.
 */
export async function runClaimedTask(
  task: ClaimedTask,
  ctx: TaskContext,
  abort: AbortController,
  onPhase: (p: TaskPhase) => void = () => {},
): Promise<TaskReport> {
  const id = task.task_id;
  const { client, workerId, log } = ctx;
  const retry = <T>(fn: () => Promise<T>) => withNetworkRetry(fn, ctx.retryDelaysMs);
  onPhase("starting");
  try {
    await retry(() => client.start(workerId, id));
  } catch (e) {
    log(`task ${id} start failed: ${errorOf(e).detail}`);
    return { task_id: id, ok: false, state: "start_failed", error: errorOf(e) };
  }
  log(`task ${id} started attempt=${task.attempt_no ?? 1}`);
  onPhase("running");

  let renewError: string | undefined;
  const renewer = setInterval(
    () => {
      client.renew(workerId, id, ctx.leaseSeconds).then(
        () => (renewError = undefined),
        (e: unknown) => {
          if (isLeaseGone(e)) {
            if (!abort.signal.aborted) {
              const why = e.code || e.status;
              log(`task ${id} lease lost (${why}); stopping it`);
              abort.abort(`${LEASE_LOST}: ${why}`);
            }
          } else {
            // The lease may still be ours; keep trying, and say so once per streak of errors.
            if (renewError === undefined) log(`task ${id} renew failed, will retry: ${errorOf(e).detail}`);
            renewError = errorOf(e).detail;
          }
        },
      );
    },
    ctx.renewIntervalMs ?? renewIntervalSeconds(ctx.leaseSeconds) * 1000,
  );

  try {
    const outcome = await executeTask(task, {
      workDir: ctx.workDir,
      workerId,
      signal: abort.signal,
      scrubEnv: ctx.scrubEnv,
      killGraceMs: ctx.killGraceMs,
    });
    const reason = abort.signal.aborted ? String(abort.signal.reason) : undefined;
    if (reason?.startsWith(LEASE_LOST)) {
      // Another attempt (or a cancel) owns the task now; an upload or fail would only be refused.
      log(`task ${id} stopped after losing its lease; result kept at ${outcome.zipPath}`);
      return {
        task_id: id,
        ok: false,
        state: "lease_lost",
        exit_code: outcome.result.exit_code,
        zip_path: outcome.zipPath,
      };
    }
    if (reason !== undefined)
      throw Object.assign(new Error(`runner stopped the task: ${reason}`), { name: "RunnerStopped" });
    log(`task ${id} ran exit_code=${outcome.result.exit_code} verdict=${outcome.result.verdict}`);
    onPhase("uploading");
    const zip = await readFile(outcome.zipPath);
    const upload: UploadReply = await retry(() => client.uploadResult(id, workerId, zip));
    log(`task ${id} uploaded result_id=${upload.result_id} verdict=${upload.verdict ?? "?"} bytes=${zip.length}`);
    const base = {
      task_id: id,
      exit_code: outcome.result.exit_code,
      verdict: upload.verdict ?? outcome.result.verdict,
      result_id: upload.result_id,
      zip_path: outcome.zipPath,
    };
    if (upload.auto_retry?.queued) {
      log(`task ${id} automatic retry queued by the Hub; not completing`);
      return { ...base, ok: true, state: "auto_retry" };
    }
    onPhase("completing");
    await retry(() => client.complete({ worker_id: workerId, task_id: id, result: outcome.result, upload }));
    log(`task ${id} completed`);
    return { ...base, ok: true, state: "completed" };
  } catch (e) {
    const error = errorOf(e);
    log(`task ${id} failed: ${error.type}: ${error.detail}`);
    onPhase("failing");
    try {
      await retry(() =>
        client.fail({
          worker_id: workerId,
          task_id: id,
          controller_concurrency: task.controller_concurrency ?? {},
          error,
        }),
      );
      log(`task ${id} failure reported`);
    } catch (fe) {
      log(`task ${id} could not report the failure: ${errorOf(fe).detail}`);
    }
    return { task_id: id, ok: false, state: "failed", error };
  } finally {
    clearInterval(renewer);
  }
}
