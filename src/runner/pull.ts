// The pull loop (RUNNER_PROTOCOL §2): register once, then heartbeat, claim what the free
// slots allow, and run each task through start/renew/upload/complete. Unlike v1 it claims
// again as soon as a slot frees up instead of waiting for the whole batch, and it backs off
// on errors instead of crashing.
import { HubError, type ClaimRequest, type RegisterReply, type RegisterRequest } from "./client.ts";
import type { ClaimedTask, HeartbeatRequest } from "../protocol/types.gen.ts";
import { hostSnapshot, resolveCapacity, type HostSnapshot, type ResourceCapacity } from "./host.ts";
import { runClaimedTask, type TaskContext, type TaskPhase, type TaskReport } from "./lifecycle.ts";

export type ConcurrencyPolicy = "fixed" | "adaptive";

/** Who the Runner is, on top of what running one task needs (TaskContext). */
export interface WorkerIdentity extends TaskContext {
  capabilities: string[];
  maxConcurrency: number;
  initialConcurrency: number;
  concurrencyPolicy: ConcurrencyPolicy;
  /** Partial resource_capacity overrides, merged over the host defaults at registration. */
  capacityOverrides?: unknown;
}

export interface PullOptions extends WorkerIdentity {
  /** Long-poll wait sent with claims; 0 sends none. */
  claimWaitSeconds: number;
  pollSeconds: number;
  /** Exit after an idle round with nothing running. */
  once: boolean;
  /** Exit after this many tasks were claimed and finished; 0 = no limit. */
  maxTasks: number;
  /** After a stop request, how long running tasks may finish before they are stopped. */
  graceSeconds: number;
  /** Register before looping (the Direct Runner has registered already). */
  register?: boolean;
  /** Largest back-off between retries when the Hub is unreachable (default 30 s). */
  maxBackoffMs?: number;
}

/** The source cache is not implemented by this Runner; v1 Hubs still expect the object. */
const SOURCE_CACHE = { enabled: false, entry_count: 0, bytes: 0, max_bytes: 0, keys: [], keys_truncated: false };

export async function registrationBody(
  w: WorkerIdentity,
  snap?: HostSnapshot,
): Promise<{ body: RegisterRequest; capacity: ResourceCapacity }> {
  const s = snap ?? (await hostSnapshot(w.workDir));
  const capacity = resolveCapacity(s.resources, w.capacityOverrides);
  return {
    capacity,
    body: {
      worker_id: w.workerId,
      capabilities: w.capabilities,
      max_concurrency: w.maxConcurrency,
      initial_concurrency: w.initialConcurrency,
      concurrency_policy: w.concurrencyPolicy,
      resource_capacity: { ...capacity },
      runner_api_version: 1,
      health: { hostname: s.hostname, platform: s.platform, resources: s.resources, source_cache: SOURCE_CACHE },
    },
  };
}

export async function heartbeatBody(
  w: WorkerIdentity,
  currentRuns: { task_id: string; package_id?: string | null; phase: string }[],
  phase: string,
): Promise<HeartbeatRequest> {
  const s = await hostSnapshot(w.workDir);
  return {
    worker_id: w.workerId,
    current_runs: currentRuns,
    health: {
      phase,
      hostname: s.hostname,
      platform: s.platform,
      resources: s.resources,
      source_cache: SOURCE_CACHE,
      time: new Date().toISOString().replace("Z", "+00:00"),
    },
  };
}

/** Errors no retry can fix: a refused token, or a registration the Hub rejects as invalid. */
export function isFatal(e: unknown, during: "register" | "loop"): boolean {
  if (!(e instanceof HubError) || e.network) return false;
  if (e.status === 401) return true;
  return during === "register" && e.status >= 400 && e.status < 500;
}

/** The Hub no longer knows this worker as registered (pruned and declared again, or its store was reset). */
export function notRegistered(e: unknown): boolean {
  if (!(e instanceof HubError) || e.status !== 403) return false;
  const detail = e.detail.detail;
  return typeof detail === "string" && detail.includes("not registered");
}

export class Backoff {
  private n = 0;
  constructor(
    private baseMs = 1000,
    private maxMs = 30_000,
  ) {}
  next(): number {
    const ms = Math.min(this.maxMs, this.baseMs * 2 ** this.n++);
    return Math.round(ms * (0.75 + Math.random() * 0.5)); // jitter: many Runners must not retry in step
  }
  reset(): void {
    this.n = 0;
  }
}

/** Registers, retrying while the Hub is unreachable; throws on a definite refusal or when stopped. */
export async function registerWithRetry(
  w: WorkerIdentity,
  stop: AbortSignal,
  maxBackoffMs = 30_000,
): Promise<RegisterReply> {
  const backoff = new Backoff(1000, maxBackoffMs);
  for (;;) {
    try {
      const { body } = await registrationBody(w);
      const reply = await w.client.register(body);
      w.log(
        `registered with ${w.client.baseUrl} max_concurrency=${w.maxConcurrency} initial=${w.initialConcurrency} policy=${w.concurrencyPolicy} capacity=${JSON.stringify(body.resource_capacity)}`,
      );
      return reply;
    } catch (e) {
      if (isFatal(e, "register") || !(e instanceof HubError)) throw e;
      const wait = backoff.next();
      w.log(`register failed (${e.message}); retrying in ${(wait / 1000).toFixed(1)}s`);
      if (await sleep(wait, stop)) throw new Error("stopped before registration", { cause: e });
    }
  }
}

/** Resolves true if `signal` aborted first. */
function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(true);
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(false);
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      resolve(true);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

interface Running {
  task: ClaimedTask;
  phase: TaskPhase;
  abort: AbortController;
  done: Promise<TaskReport>;
}

export interface PullSummary {
  claimed: number;
  completed: number;
  reports: TaskReport[];
  stopped: boolean;
}

export class PullLoop {
  private readonly running = new Map<string, Running>();
  private readonly stopCtl = new AbortController();
  private changed = false;
  private wake: () => void = () => (this.changed = true);
  private readonly reports: TaskReport[] = [];
  private claimed = 0;
  private desired: number;

  constructor(private readonly o: PullOptions) {
    this.desired = o.initialConcurrency;
  }

  get stopping(): boolean {
    return this.stopCtl.signal.aborted;
  }

  get activeTaskIds(): string[] {
    return [...this.running.keys()];
  }

  /** Stop claiming (an outstanding long-poll claim is cut); running tasks get the grace period. */
  requestStop(reason = "stop requested"): void {
    if (this.stopping) return;
    this.o.log(`stopping: ${reason}; no new claims`);
    this.stopCtl.abort(reason);
    this.wake();
  }

  /** Stop running tasks now (their process trees are killed and the failure reported). */
  abortRunning(reason = "shutdown"): void {
    for (const r of this.running.values()) if (!r.abort.signal.aborted) r.abort.abort(reason);
  }

  private currentRuns() {
    return [...this.running.values()].map((r) => ({
      task_id: r.task.task_id,
      package_id: r.task.package_id,
      phase: r.phase,
    }));
  }

  private clampDesired(v: unknown): void {
    if (typeof v === "number" && Number.isFinite(v))
      this.desired = Math.max(1, Math.min(this.o.maxConcurrency, Math.trunc(v)));
  }

  /** Waits for a task to finish, a stop request, or the timeout; a change since the last wait counts. */
  private waitForChange(ms: number): Promise<void> {
    if (this.changed || this.stopping) {
      this.changed = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.wake = () => (this.changed = true);
        this.changed = false;
        resolve();
      };
      const t = setTimeout(done, ms);
      this.wake = done;
    });
  }

  private launch(task: ClaimedTask): void {
    if (typeof task?.task_id !== "string" || this.running.has(task.task_id)) return;
    this.claimed++;
    this.o.log(`task ${task.task_id} claimed attempt=${task.attempt_no ?? 1} kind=${task.task_kind ?? "-"}`);
    const abort = new AbortController();
    const entry: Running = { task, phase: "starting", abort, done: Promise.resolve(undefined as never) };
    const ctx: TaskContext = this.o;
    entry.done = runClaimedTask(task, ctx, abort, (p) => (entry.phase = p))
      .catch((e: unknown) => ({
        task_id: task.task_id,
        ok: false,
        state: "failed",
        error: { type: "Error", detail: String(e) },
      }))
      .then((report) => {
        this.running.delete(task.task_id);
        this.reports.push(report);
        this.wake();
        return report;
      });
    this.running.set(task.task_id, entry);
  }

  async run(): Promise<PullSummary> {
    const o = this.o;
    const backoff = new Backoff(1000, o.maxBackoffMs ?? 30_000);
    if (o.register !== false) {
      try {
        await registerWithRetry(o, this.stopCtl.signal, o.maxBackoffMs);
      } catch (e) {
        if (this.stopping) return this.summary(true);
        throw e;
      }
    }
    let idleRounds = 0;
    while (!this.stopping) {
      if (!(await this.beat(backoff))) continue;
      if (o.maxTasks > 0 && this.claimed >= o.maxTasks) {
        if (this.running.size === 0) break;
        await this.waitForChange(o.pollSeconds * 1000);
        continue;
      }
      const slots = Math.min(o.maxConcurrency, this.desired) - this.running.size;
      if (slots <= 0) {
        await this.waitForChange(o.pollSeconds * 1000);
        continue;
      }
      const t0 = Date.now();
      const tasks = await this.claimTasks(o.maxTasks > 0 ? Math.min(slots, o.maxTasks - this.claimed) : slots, backoff);
      if (!tasks) continue;
      // The Hub leased every task it returned to us, so all of them run, even past `limit`.
      for (const t of tasks) this.launch(t);
      if (tasks.length) {
        idleRounds = 0;
        continue;
      }
      if (this.running.size === 0) {
        idleRounds++;
        if (o.once && idleRounds >= 1) break;
      }
      // A long-poll that really waited needs no extra sleep; a Hub that ignored wait_seconds does.
      const waited = o.claimWaitSeconds > 0 && Date.now() - t0 >= o.claimWaitSeconds * 500;
      if (!waited) await this.waitForChange(o.pollSeconds * 1000);
    }
    await this.drain();
    try {
      await o.client.heartbeat(await heartbeatBody(o, [], "completed"));
    } catch (e) {
      o.log(`final heartbeat failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    return this.summary(this.stopping);
  }

  /**
   * One heartbeat, which also says the concurrency the Hub wants. False: look again from the
   * top of the loop, after a wait (it failed), or after registering again (the Hub did not
   * know this worker as registered).
   */
  private async beat(backoff: Backoff): Promise<boolean> {
    const o = this.o;
    try {
      const hb = await o.client.heartbeat(
        await heartbeatBody(o, this.currentRuns(), this.running.size ? "running" : "idle"),
      );
      this.clampDesired(hb.desired_concurrency);
      if (hb.registered === false) {
        const wait = backoff.next();
        o.log(`the Hub does not know this worker as registered; registering again in ${(wait / 1000).toFixed(1)}s`);
        await this.waitForChange(wait);
        if (this.stopping) return false;
        this.clampDesired((await registerWithRetry(o, this.stopCtl.signal, o.maxBackoffMs)).desired_concurrency);
        return false;
      }
      backoff.reset();
      return true;
    } catch (e) {
      if (isFatal(e, "loop")) throw e;
      const wait = backoff.next();
      o.log(
        `heartbeat failed (${e instanceof Error ? e.message : String(e)}); retrying in ${(wait / 1000).toFixed(1)}s`,
      );
      await this.waitForChange(wait);
      return false;
    }
  }

  /**
   * Claim up to `limit` tasks (long-polling when the Runner waits for work). Undefined when
   * the claim failed, after a wait (and registering again if the Hub did not know this
   * worker), or when the loop is stopping.
   */
  private async claimTasks(limit: number, backoff: Backoff): Promise<ClaimedTask[] | undefined> {
    const o = this.o;
    const req: ClaimRequest = { worker_id: o.workerId, limit, lease_seconds: o.leaseSeconds };
    if (o.claimWaitSeconds > 0) {
      req.wait_seconds = o.claimWaitSeconds;
      req.wait_poll_seconds = Math.min(Math.max(o.pollSeconds, 1), 5);
    }
    try {
      const reply = await o.client.claim(req, this.stopCtl.signal);
      this.clampDesired(reply.desired_concurrency);
      backoff.reset();
      return Array.isArray(reply.tasks) ? reply.tasks : [];
    } catch (e) {
      if (this.stopping) return undefined;
      if (isFatal(e, "loop")) throw e;
      const wait = backoff.next();
      o.log(`claim failed (${e instanceof Error ? e.message : String(e)}); retrying in ${(wait / 1000).toFixed(1)}s`);
      await this.waitForChange(wait);
      // Registering again is what makes the Hub know us; the growing wait keeps a refused Runner from hammering it.
      if (notRegistered(e) && !this.stopping) {
        try {
          const reg = await registerWithRetry(o, this.stopCtl.signal, o.maxBackoffMs);
          this.clampDesired(reg.desired_concurrency);
        } catch (err) {
          if (this.stopping) return undefined;
          throw err;
        }
      }
      return undefined;
    }
  }

  /** After a stop request running tasks get the grace period, then are stopped; otherwise they finish. */
  private async drain(): Promise<void> {
    if (!this.running.size) return;
    const all = () => Promise.all([...this.running.values()].map((r) => r.done));
    if (!this.stopping) {
      await all();
      return;
    }
    this.o.log(`waiting up to ${this.o.graceSeconds}s for ${this.running.size} running task(s)`);
    const timedOut = await Promise.race([all().then(() => false), sleep(this.o.graceSeconds * 1000).then(() => true)]);
    if (timedOut && this.running.size) {
      this.o.log(`grace period over; stopping ${this.running.size} task(s)`);
      this.abortRunning("shutdown: grace period elapsed");
      await all();
    }
  }

  private summary(stopped: boolean): PullSummary {
    return { claimed: this.claimed, completed: this.reports.length, reports: [...this.reports], stopped };
  }
}
