// Direct Runner API (RUNNER_PROTOCOL §1c): the Hub pushes tasks to this Runner over HTTP
// instead of the Runner pulling them. A pushed task runs through the same
// start/renew/upload/complete path as a pulled one.
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import type { ClaimedTask, ExecuteReply } from "../protocol/types.gen.ts";
import { hostSnapshot, resolveCapacity } from "./host.ts";
import { runClaimedTask, type TaskReport } from "./lifecycle.ts";
import { HubError } from "./client.ts";
import { heartbeatBody, isFatal, PullLoop, registerWithRetry, registrationBody, type PullOptions } from "./pull.ts";
import { utcNow } from "./process.ts";

const isObj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
import { isLoopback, presentedToken, tokenEquals } from "../security/tokens.ts";

export const DIRECT_DEFAULT_PORT = 9876;

export interface DirectOptions extends PullOptions {
  host: string;
  port: number;
  /** The Runner token; when set, every request must carry it. */
  runnerToken?: string;
  /** How often an idle Runner heartbeats (default 30 s, well inside the Hub's 120 s grace). */
  idleHeartbeatSeconds?: number;
}

/** Every request carries the Runner token when one is set. */
export function tokenMatches(headers: FastifyRequest["headers"], expected: string | undefined): boolean {
  if (!expected) return true;
  const given = presentedToken(headers);
  return given !== undefined && tokenEquals(given, expected);
}

interface Push {
  task: ClaimedTask;
  abort: AbortController;
  done: Promise<void>;
}

export class DirectServer {
  readonly app: FastifyInstance;
  private readonly pushes = new Map<string, Push>();
  private loop: PullLoop | undefined;
  private loopDone: Promise<void> | undefined;
  private lastResult: Record<string, unknown> = {};
  private readonly stopCtl = new AbortController();
  private registration: Promise<unknown> | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private beating = false;

  constructor(private readonly o: DirectOptions) {
    if (!isLoopback(o.host) && !o.runnerToken) {
      throw new Error(
        `refusing to serve the Direct Runner API on ${o.host} without a Runner token (set LOOM_RUNNER_TOKEN or --direct-api-token-env)`,
      );
    }
    this.app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024 });
    this.routes();
  }

  get activePushes(): string[] {
    return [...this.pushes.keys()];
  }

  get loopRunning(): boolean {
    return this.loop !== undefined;
  }

  private routes(): void {
    const app = this.app;
    // v1 clients send an empty body for {}; bad JSON is a 400, not a 500.
    const parseJson = (_req: FastifyRequest, body: string, done: (err: Error | null, v?: unknown) => void) => {
      if (body.trim() === "") return done(null, {});
      try {
        done(null, JSON.parse(body));
      } catch (e) {
        done(
          Object.assign(new Error(`invalid JSON body: ${(e as Error).message}`), {
            statusCode: 400,
            code: "invalid_json",
          }),
        );
      }
    };
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("application/json", { parseAs: "string" }, parseJson);
    app.addContentTypeParser("*", { parseAs: "string" }, parseJson);
    app.addHook("onRequest", async (req, reply) => {
      reply.header("Cache-Control", "no-store");
      if (!tokenMatches(req.headers, this.o.runnerToken)) return reply.code(401).send({ error: "unauthorized" });
    });
    app.setNotFoundHandler((req, reply) => reply.code(404).send({ error: "not_found", path: req.url }));
    app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, _req, reply) => {
      const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 500 ? err.statusCode : 500;
      reply
        .code(status)
        .send(
          status === 500
            ? { error: err.name, detail: err.message }
            : { error: err.code ?? "bad_request", detail: err.message },
        );
    });

    app.get("/api/healthz", () => this.health());
    app.get("/api/meta", () => this.meta());
    app.post("/api/register", (_req, reply) => this.register(reply));
    app.post("/api/run-loop", (req, reply) => this.runLoop(req, reply));
    app.post("/api/tasks/execute", (req, reply) => this.execute(req, reply));
  }

  /** GET /api/healthz: what this Runner is doing. */
  private async health() {
    return {
      ok: true,
      worker_id: this.o.workerId,
      mode: "direct-api",
      runner_api_version: 1,
      concurrency_policy: this.o.concurrencyPolicy,
      initial_concurrency: this.o.initialConcurrency,
      max_concurrency: this.o.maxConcurrency,
      running: this.loopRunning,
      active_pushes: this.activePushes,
      last_result: this.lastResult,
      resources: (await hostSnapshot(this.o.workDir)).resources,
    };
  }

  /** GET /api/meta: who this Runner is and what it registers. */
  private async meta() {
    const snap = await hostSnapshot(this.o.workDir);
    return {
      service: "runner",
      runner_api_version: 1,
      api_version: 1,
      worker_id: this.o.workerId,
      auth_required: Boolean(this.o.runnerToken),
      connection_mode: "direct-api",
      capabilities: this.o.capabilities,
      concurrency_policy: this.o.concurrencyPolicy,
      initial_concurrency: this.o.initialConcurrency,
      max_concurrency: this.o.maxConcurrency,
      resource_capacity: resolveCapacity(snap.resources, this.o.capacityOverrides),
    };
  }

  /** POST /api/register: one attempt; the caller waits on this request, so the Hub's answer (or silence) is reported, not retried. */
  private async register(reply: FastifyReply) {
    try {
      const { body } = await registrationBody(this.o);
      return { ok: true, register: await this.o.client.register(body) };
    } catch (e) {
      if (!(e instanceof HubError)) throw e;
      return reply.code(502).send({ error: "hub_register_failed", hub_status: e.status, detail: e.message });
    }
  }

  /** POST /api/run-loop: start a pull loop, unless pushed tasks are running. */
  private async runLoop(req: FastifyRequest, reply: FastifyReply) {
    const body = (req.body ?? {}) as { max_tasks?: unknown; once?: unknown };
    if (this.pushes.size) return reply.code(409).send({ error: "push_tasks_active", active_pushes: this.activePushes });
    if (this.loop) return reply.code(202).send({ ok: true, state: "already_running", worker_id: this.o.workerId });
    const opts: PullOptions = { ...this.o, register: false };
    if (body.max_tasks !== undefined && body.max_tasks !== null)
      opts.maxTasks = Math.max(0, Math.trunc(Number(body.max_tasks)) || 0);
    if (body.once !== undefined && body.once !== null) opts.once = Boolean(body.once);
    const loop = new PullLoop(opts);
    this.loop = loop;
    this.lastResult = { ok: true, state: "starting", started_at: utcNow() };
    this.loopDone = loop
      .run()
      .then(
        (s) => {
          this.lastResult = { ok: true, completed: s.completed, finished_at: utcNow() };
        },
        (e: unknown) => {
          this.lastResult = {
            ok: false,
            error: { type: e instanceof Error ? e.name : "Error", detail: String(e instanceof Error ? e.message : e) },
            finished_at: utcNow(),
          };
        },
      )
      .finally(() => {
        this.loop = undefined;
      });
    return reply.code(202).send({ ok: true, state: "started", worker_id: this.o.workerId });
  }

  /** POST /api/tasks/execute: accept one pushed task. */
  private async execute(req: FastifyRequest, reply: FastifyReply) {
    const task = isObj(req.body) && isObj(req.body.task) ? req.body.task : undefined;
    const workerId = this.o.workerId;
    if (!task) return reply.code(400).send({ error: "task_object_required" });
    const taskId = typeof task.task_id === "string" ? task.task_id : "";
    if (!taskId) return reply.code(400).send({ error: "task_id_required" });
    if (String(task.assigned_worker_id ?? "") !== workerId) {
      return reply.code(409).send({
        error: "assigned_worker_mismatch",
        worker_id: workerId,
        task_id: taskId,
        received: task.assigned_worker_id ?? null,
      });
    }
    if (this.loop) return reply.code(409).send({ error: "pull_loop_active", task_id: taskId });
    if (this.pushes.has(taskId))
      return reply
        .code(202)
        .send({ ok: true, state: "already_running", task_id: taskId, worker_id: workerId } satisfies ExecuteReply);
    if (this.pushes.size >= this.o.maxConcurrency) {
      return reply.code(429).send({
        error: "worker_capacity_reached",
        worker_id: workerId,
        active_pushes: this.activePushes,
        max_concurrency: this.o.maxConcurrency,
      });
    }
    // The rest of the task is the Hub's claim-shaped task, saved as it came (task.json).
    this.accept({ ...task, task_id: taskId });
    return reply
      .code(202)
      .send({ ok: true, state: "accepted", task_id: taskId, worker_id: workerId } satisfies ExecuteReply);
  }

  private accept(task: ClaimedTask): void {
    const id = task.task_id;
    const abort = new AbortController();
    this.lastResult = { ok: true, state: "accepted", task_id: id, accepted_at: utcNow() };
    this.o.log(`task ${id} pushed attempt=${task.attempt_no ?? 1}`);
    const push: Push = { task, abort, done: Promise.resolve() };
    push.done = runClaimedTask(task, this.o, abort)
      .catch((e: unknown): TaskReport => ({
        task_id: id,
        ok: false,
        state: "failed",
        error: { type: "Error", detail: String(e) },
      }))
      .then(async (report) => {
        this.pushes.delete(id);
        this.lastResult = { ...report, finished_at: utcNow() };
        // The completion heartbeat tells the Hub at once that the slot is free (v1 does the same).
        try {
          const runs = [...this.pushes.values()].map((p) => ({
            task_id: p.task.task_id,
            package_id: p.task.package_id,
            phase: "running",
          }));
          await this.o.client.heartbeat(await heartbeatBody(this.o, runs, runs.length ? "running" : "completed"));
        } catch (e) {
          this.o.log(`completion heartbeat failed: ${e instanceof Error ? e.message : String(e)}`);
        }
      });
    this.pushes.set(id, push);
  }

  /**
   * An idle Direct Runner keeps proving it is alive: without this a Runner that waits for
   * pushes longer than the heartbeat grace, or across a Hub restart, would never be Ready
   * again. A pull loop heartbeats on its own; a Hub that has forgotten the registration
   * (pruned and declared again) gets a new one.
   */
  private async beat(): Promise<void> {
    if (this.loop || this.stopCtl.signal.aborted || this.beating) return;
    this.beating = true;
    try {
      const runs = [...this.pushes.values()].map((p) => ({
        task_id: p.task.task_id,
        package_id: p.task.package_id,
        phase: "running",
      }));
      const hb = await this.o.client.heartbeat(await heartbeatBody(this.o, runs, runs.length ? "running" : "idle"));
      if (hb.registered === false) {
        this.o.log("the Hub does not know this worker as registered; registering again");
        await registerWithRetry(this.o, this.stopCtl.signal, this.o.maxBackoffMs);
      }
    } catch (e) {
      if (!this.stopCtl.signal.aborted)
        this.o.log(`idle heartbeat failed: ${e instanceof Error ? e.message : String(e)}`);
    } finally {
      this.beating = false;
    }
  }

  /** Registers (in the background, retrying while the Hub is unreachable) and listens. */
  async start(): Promise<string> {
    this.registration = registerWithRetry(this.o, this.stopCtl.signal, this.o.maxBackoffMs).catch((e: unknown) => {
      if (!this.stopCtl.signal.aborted)
        this.o.log(
          `registration failed${isFatal(e, "register") ? " (not retried)" : ""}: ${e instanceof Error ? e.message : String(e)}`,
        );
    });
    this.heartbeatTimer = setInterval(() => void this.beat(), (this.o.idleHeartbeatSeconds ?? 30) * 1000);
    this.heartbeatTimer.unref();
    const url = await this.app.listen({ host: this.o.host, port: this.o.port });
    this.o.log(`direct worker API listening on ${url} (auth ${this.o.runnerToken ? "required" : "off"})`);
    return url;
  }

  /** Stops the pull loop and pushed tasks (given `graceSeconds` to finish), then closes the server. */
  async close(graceSeconds = this.o.graceSeconds): Promise<void> {
    this.stopCtl.abort("closing");
    clearInterval(this.heartbeatTimer);
    const loop = this.loop;
    loop?.requestStop("server closing");
    const work = () => Promise.all([...[...this.pushes.values()].map((p) => p.done), this.loopDone]);
    const late = await Promise.race([
      work().then(() => false),
      new Promise<boolean>((r) => setTimeout(() => r(true), graceSeconds * 1000).unref()),
    ]);
    if (late) {
      for (const p of this.pushes.values()) p.abort.abort("shutdown: grace period elapsed");
      loop?.abortRunning("shutdown: grace period elapsed");
    }
    await work();
    await this.registration;
    await this.app.close();
  }
}
