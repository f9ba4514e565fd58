// The composition root: store + informer + scheduler + API, started by `loom hub`.
import { RENEWAL_KIND } from "./scheduler/renewal.ts";
import { setMaxListeners } from "node:events";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { app } from "./api/app.ts";
import type { WatchStream } from "./api/watch.ts";
import { isLoopback } from "./security/tokens.ts";
import { EVENT_TTL_SECONDS, EventRecorder } from "./reconciler/events.ts";
import { ControllerManager } from "./reconciler/manager.ts";
import type { AdmissionConditionsOptions } from "./reconciler/admission-conditions.ts";
import { GitopsSync } from "./gitops/index.ts";
import { compileAll, compileStatusValidators } from "./resources/validate.ts";
import { DEFAULT_ALLOWED_TOKEN_ENV } from "./scheduler/push.ts";
import { Scheduler } from "./scheduler/scheduler.ts";
import type { SchedulerObserver } from "./scheduler/options.ts";
import { Informer } from "./store/cache.ts";
import type { Leadership } from "./roles/leader.ts";
import { openBackend, type Backend, type BackendSpec } from "./roles/backend.ts";
import type { Store, StoredObject } from "./store/store.ts";
import type { LoomEvent } from "./resources/meta.ts";
import { parse as parseYaml } from "yaml";
import { type HealthCheck, CommitHealth, within } from "./observability/health.ts";
import { HubMetrics, QUEUED_REASON_INDEX, queuedReasonIndex } from "./observability/metrics.ts";
import { ensureSelfSigned } from "./tls/certs.ts";
import { type LogFormat, type LogLevel, logRequests, serverLogOptions } from "./observability/logging.ts";
import type { Worker } from "./resources/types.ts";

export type HubOptions = {
  dataDir: string;
  host: string;
  port: number;
  /** Name of the env var holding the Hub token. */
  authTokenEnv: string;
  /** Name of the env var holding the Direct Runner token the Hub pushes with. */
  runnerTokenEnv: string;
  /** Env vars a Worker's direct_api_token_env may name (exact, or a prefix ending in "*"). */
  directTokenEnv: string[];
  /** A YAML/JSON file mapping worker_id to a token that may act only as that worker. */
  workerTokensFile?: string;
  heartbeatGraceSeconds: number;
  /** A queued task that fits nowhere this long nominates the worker where it could start soonest. */
  nominateAfterSeconds: number;
  /** Fair share across queues from usage decayed over this half-life; 0: from current usage. */
  fairShareHalfLifeSeconds: number;
  defaultMaxAttempts: number;
  uploadLimitBytes: number;
  /** Uploads received at once; more get 429. */
  uploadConcurrency: number;
  /** Uploads that may wait for a slot (unread) before the next is refused with 429. */
  uploadQueue: number;
  /** How long an upload waits for a slot before it is refused with 429. */
  uploadWaitMs: number;
  /** How often the lease controller looks at every active lease again: a backstop, since each lease is expired at its own lease_until. */
  leaseSweepMs: number;
  /** How often every controller looks at everything again. */
  resyncMs: number;
  /** Pacing of the Admitted/Unsatisfiable condition passes. */
  conditions?: Partial<AdmissionConditionsOptions>;
  logLevel: LogLevel;
  /** auto: short lines on a terminal, JSON in a pipe. */
  logFormat?: LogFormat;
  env?: NodeJS.ProcessEnv;
  /** The scheduler's clock (ms since the epoch): leases, their expiry, heartbeats, nominations. Default Date.now. */
  now?: () => number;
  /** Inventory and campaign files or folders to keep in sync with the store (GitOps). */
  gitopsPaths?: string[];
  gitopsDebounceMs?: number;
  /** Serve HTTPS with this certificate and key (PEM files). kubectl sends its token only over TLS. */
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** Without a certificate given: make (or reuse) a self-signed one under dataDir/tls for the listen address. */
  tlsSelfSigned?: boolean;
  /** The store and who leads on it: SQLite under dataDir (the default; its sole Hub always leads), or etcd shared by replicas. */
  backend?: BackendSpec;
};

export const DEFAULT_HUB_OPTIONS: Omit<HubOptions, "dataDir"> = {
  host: "127.0.0.1",
  port: 8765,
  authTokenEnv: "LOOM_HUB_TOKEN",
  runnerTokenEnv: "LOOM_RUNNER_TOKEN",
  directTokenEnv: [...DEFAULT_ALLOWED_TOKEN_ENV],
  heartbeatGraceSeconds: 120,
  nominateAfterSeconds: 60,
  fairShareHalfLifeSeconds: 0,
  defaultMaxAttempts: 3,
  uploadLimitBytes: 512 * 1024 * 1024,
  uploadConcurrency: 8,
  uploadQueue: 256,
  uploadWaitMs: 30_000,
  leaseSweepMs: 30_000,
  resyncMs: 30_000,
  logLevel: "info",
};

function readWorkerTokens(path: string): Record<string, string> {
  const doc = parseYaml(readFileSync(path, "utf8")) as unknown;
  const map = (doc && typeof doc === "object" && "workers" in doc ? doc.workers : doc) as Record<string, unknown>;
  if (!map || typeof map !== "object" || Array.isArray(map))
    throw new Error(`${path}: expected a map of worker_id to token`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(map)) {
    if (typeof v !== "string" || v.length < 16)
      throw new Error(`${path}: workers.${k}: token must be a string of at least 16 characters`);
    out[k] = v;
  }
  return out;
}

/** How often a replica looks at which replicas are alive (its stripe of the queue's head). */
const REPLICA_LOOK_MS = 2000;

/** Events kept: at most this many, for at most this long; the GC looks every `everyMs`. */
const EVENTS = { maxEvents: 5000, ttlMs: EVENT_TTL_SECONDS * 1000, everyMs: 10_000 };

export class Hub {
  readonly store: Store;
  readonly scheduler: Scheduler;
  readonly events: EventRecorder;
  controllers: ControllerManager | undefined;
  gitops: GitopsSync | undefined;
  readonly authRequired: boolean;
  private readonly abort = new AbortController();
  /** Aborted when the Hub shuts down. */
  readonly stopping = this.abort.signal;
  /** Where it listens, once it does. */
  private listening = "";
  readonly metrics: HubMetrics;
  /** Open watch streams of the resource API (the API adds and removes them). */
  readonly watchStreams = new Set<WatchStream>();
  readonly commitHealth = new CommitHealth();
  readonly leadership: Leadership;
  /** Lets go of what the backend holds besides the store (the data dir's lock). */
  private readonly release: () => void;
  /** This replica's place among the live replicas (followReplicas), for the claims' stripes. */
  private stripe = { index: 0, count: 1 };
  /** Starts and stops of the singleton work, one at a time. */
  private roleChange: Promise<void> = Promise.resolve();

  private constructor(
    backend: Backend,
    readonly cache: Informer,
    readonly http: FastifyInstance,
    readonly opts: HubOptions,
  ) {
    const store = (this.store = backend.store);
    this.leadership = backend.leadership;
    this.release = backend.release;
    setMaxListeners(0, this.stopping); // every waiting long-poll claim listens
    this.events = new EventRecorder(store, {
      maxEvents: EVENTS.maxEvents,
      flushMs: 100,
      onError: (e) => this.http.log.warn({ err: e }, "event write failed"),
      onDrop: (reason) => this.metrics.eventDropped(reason),
      now: opts.now,
      // The live replicas split each reason's rate (followReplicas keeps their count).
      share: () => 1 / this.stripe.count,
    });
    this.metrics = new HubMetrics({
      taskCounts: (index) => cache.indexCounts("Task", index),
      workers: () =>
        cache
          .list<Worker & StoredObject>("Worker")
          .map((w) => ({ worker: w.metadata.name, ...this.scheduler.controllers.capacityEntry(w) })),
      watchers: () => this.watchStreams.size,
      commits: () => store.commitStats(),
      rejectedFiles: () => this.gitops?.rejectedFiles().length ?? 0,
      queues: () =>
        this.scheduler.controllers
          .queuesReport()
          .queues.filter(() => this.scheduler.controllers.queues.active)
          .map((q) => ({
            queue: q.name,
            used: q.used,
            quota: q.quota,
            pending: q.pending,
            admitted: q.admitted,
            share: q.rank,
          })),
    });
    const observer: SchedulerObserver = {
      commit: (...a) => {
        this.commitHealth.commit(...a);
        this.metrics.commit(...a);
      },
      claim: (...a) => this.metrics.claim(...a),
      claimRaceLost: () => this.metrics.claimRaceLost(),
    };
    this.scheduler = new Scheduler(
      store,
      cache,
      {
        heartbeatGraceSeconds: opts.heartbeatGraceSeconds,
        defaultMaxAttempts: opts.defaultMaxAttempts,
        nominateAfterSeconds: opts.nominateAfterSeconds,
        fairShareHalfLifeSeconds: opts.fairShareHalfLifeSeconds,
        resultsDir: join(opts.dataDir, "results"),
      },
      { recordEvent: this.record, observer, now: opts.now, stripe: () => this.stripe },
    );
    cache.addIndex("Task", QUEUED_REASON_INDEX, queuedReasonIndex);
    cache.on((ev) => this.metrics.onTaskChange(ev));
    const env = opts.env ?? process.env;
    this.authRequired = Boolean(env[opts.authTokenEnv]);
  }

  /** Every Event goes through here, so the metrics see the ones they count. */
  private readonly record = (e: LoomEvent): void => {
    if (e.reason === "FileRejected") this.metrics.fileRejected();
    // The log line follows the Event: one over its reason's budget is counted, not logged either.
    if (!this.events.record(e)) return;
    // GitOps logs its own file events, with the errors in full.
    if (e.object.kind !== "File")
      this.http.log[e.type === "Warning" ? "warn" : "info"](
        { kind: e.object.kind, name: e.object.metadata.name, reason: e.reason },
        `${e.object.kind.toLowerCase()} ${e.object.metadata.name}: ${e.reason}: ${e.message}`,
      );
  };

  /** The probes of /livez and /readyz (the Kubernetes way: /healthz runs them all). */
  readonly checks: { livez: HealthCheck[]; readyz: HealthCheck[] } = {
    livez: [
      { name: "ping", run: async () => undefined },
      { name: "shutdown", run: async () => (this.stopping.aborted ? "the Hub is shutting down" : undefined) },
    ],
    readyz: [
      { name: "ping", run: async () => undefined },
      {
        name: "informer-sync",
        run: async () => (this.cache.synced ? undefined : "the informer has not synced with the store"),
      },
      { name: "store", run: async () => this.commitHealth.failing ?? within(this.store.revision(), 2000, "the store") },
      { name: "shutdown", run: async () => (this.stopping.aborted ? "the Hub is shutting down" : undefined) },
    ],
  };

  /** Open the store, sync the informer, and serve HTTP. */
  static async start(partial: Partial<HubOptions> & { dataDir: string }): Promise<Hub> {
    const given: HubOptions = { ...DEFAULT_HUB_OPTIONS, ...partial, dataDir: resolve(partial.dataDir) };
    const env = given.env ?? process.env;
    const hubToken = env[given.authTokenEnv] || undefined;
    const workerTokens = given.workerTokensFile ? readWorkerTokens(given.workerTokensFile) : undefined;
    if (!hubToken && !isLoopback(given.host))
      throw new Error(
        `refusing to listen on ${given.host} without a token: set ${given.authTokenEnv} (or --auth-token-env NAME), or bind 127.0.0.1`,
      );
    if (workerTokens && !hubToken)
      throw new Error(`per-worker tokens need a Hub token as well: set ${given.authTokenEnv}`);
    if (!!given.tlsCertFile !== !!given.tlsKeyFile) throw new Error("--tls-cert-file and --tls-key-file go together");
    if (given.tlsSelfSigned && given.tlsCertFile)
      throw new Error(
        "--tls-self-signed makes its own certificate: drop --tls-cert-file and --tls-key-file, or --tls-self-signed",
      );
    const made = given.tlsSelfSigned ? ensureSelfSigned(join(given.dataDir, "tls"), given.host) : undefined;
    const opts: HubOptions = made ? { ...given, tlsCertFile: made.certFile, tlsKeyFile: made.keyFile } : given;
    const https = opts.tlsCertFile
      ? { cert: readFileSync(opts.tlsCertFile), key: readFileSync(opts.tlsKeyFile!) }
      : undefined;
    compileAll();
    mkdirSync(opts.dataDir, { recursive: true });
    const backend = await openBackend(opts.backend ?? { kind: "sqlite" }, opts.dataDir);
    const cache = new Informer(backend.store, ["Worker", "Task", "Campaign", "Queue", RENEWAL_KIND], { pending: true });
    const http = Fastify({
      ...serverLogOptions(opts.logLevel, opts.logFormat),
      bodyLimit: 16 * 1024 * 1024,
      forceCloseConnections: true,
      ...(https ? { https } : {}),
    });
    logRequests(http, opts.logLevel);
    const hub = new Hub(backend, cache, http, opts);
    try {
      // The scheduler follows the informer from before its first list, so its queue is already full.
      await cache.start();
      // What the store says of each worker's last call carries over a restart, within the grace period.
      hub.scheduler.synced();
      await http.register(app, { hub, auth: { hubToken, workerTokens } });
      hub.leadership.onChange((leading) => void hub.lead(leading)); // lead() logs its own failure
      // The sole Hub leads from the start: declared workers exist before any Runner can register as them.
      if (hub.leadership.isLeader()) await hub.lead(true);
      await hub.listen();
      if (hub.leadership.mode === "elected") hub.followReplicas();
      hub.compileInBackground();
    } catch (e) {
      await hub.close(); // and release the data directory (a port in use must not leave it locked)
      throw e;
    }
    return hub;
  }

  /**
   * The status validators, compiled a step at a time between requests once the Hub serves:
   * compiled on first use instead, they would add tens of milliseconds to the first claims.
   */
  private compileInBackground(): void {
    const steps = compileStatusValidators();
    const step = () => {
      if (this.stopping.aborted) return;
      const until = performance.now() + 2;
      do if (steps.next().done) return;
      while (performance.now() < until);
      setImmediate(step);
    };
    setImmediate(step);
  }

  /** Where the Hub serves, once it listens. */
  get url(): string {
    return this.listening;
  }

  /** Listen, then take part among the replicas under that URL. */
  private async listen(): Promise<void> {
    this.listening = await this.http.listen({ host: this.opts.host, port: this.opts.port });
    await this.leadership.start(this.listening);
  }

  /** Keep this replica's stripe of the queue (claim.ts) in step with the live replicas. */
  private followReplicas(): void {
    const look = async () => {
      const ids = (await this.leadership.replicas()).map((r) => r.id).sort();
      const index = ids.indexOf(this.leadership.identity);
      this.stripe = index < 0 ? { index: 0, count: 1 } : { index, count: ids.length };
    };
    const tick = () => void look().catch((e) => this.http.log.warn({ err: e }, "listing the Hub replicas failed"));
    tick();
    const timer = setInterval(tick, REPLICA_LOOK_MS);
    timer.unref();
    this.stopping.addEventListener("abort", () => clearInterval(timer), { once: true });
  }

  /** Start or stop the singleton work: the controllers (campaigns, workers, conditions, push, lease expiry, Event GC) and GitOps sync. */
  private lead(leading: boolean): Promise<void> {
    this.roleChange = this.roleChange
      .then(() => (leading ? this.startSingletons() : this.stopSingletons()))
      .catch((e) => this.http.log.error({ err: e }, "changing role failed"));
    return this.roleChange;
  }

  private async startSingletons(): Promise<void> {
    if (this.controllers || this.abort.signal.aborted) return;
    const http = this.http;
    const opts = this.opts;
    const log = (level: "info" | "warn" | "error", msg: string, extra?: object) => http.log[level](extra ?? {}, msg);
    this.controllers = new ControllerManager(
      {
        scheduler: this.scheduler.controllers,
        log,
        observe: (...a) => this.metrics.reconciled(...a),
        eventsDropped: (names) => this.events.forget(names),
      },
      {
        resyncMs: opts.resyncMs,
        leaseResyncMs: opts.leaseSweepMs,
        push: {
          defaultTokenEnv: opts.runnerTokenEnv,
          env: opts.env ?? process.env,
          allowedTokenEnv: opts.directTokenEnv,
        },
        conditions: opts.conditions,
        events: EVENTS,
      },
    );
    this.controllers.start();
    if (opts.gitopsPaths?.length) {
      this.gitops = new GitopsSync({
        store: this.store,
        paths: opts.gitopsPaths.map((p) => resolve(p)),
        recordEvent: this.record,
        log,
        debounceMs: opts.gitopsDebounceMs,
        resyncMs: opts.resyncMs,
        observe: (...a) => this.metrics.reconciled(...a),
      });
      await this.gitops.start();
    }
  }

  private async stopSingletons(): Promise<void> {
    await this.gitops?.close();
    this.gitops = undefined;
    await this.controllers?.stop();
    this.controllers = undefined;
  }

  async close(): Promise<void> {
    await this.leadership.close();
    await this.lead(false);
    this.abort.abort();
    this.scheduler.stop();
    await this.http.close();
    await this.events.close();
    this.cache.stop();
    await this.store.close();
    this.release();
  }
}
