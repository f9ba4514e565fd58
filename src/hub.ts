// The composition root: store + informer + scheduler + API, started by `loom hub`.
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { app } from "./api/app.ts";
import { isLoopback } from "./api/auth.ts";
import { EventRecorder } from "./reconciler/events.ts";
import { ControllerManager } from "./reconciler/manager.ts";
import { GitopsSync } from "./gitops/index.ts";
import { compileAll } from "./resources/validate.ts";
import { Scheduler } from "./scheduler/scheduler.ts";
import { expireLeases } from "./scheduler/transitions.ts";
import { Informer } from "./store/cache.ts";
import { openSqliteStore } from "./store/sqlite.ts";
import type { Store } from "./store/store.ts";
import { parse as parseYaml } from "yaml";

export type HubOptions = {
  dataDir: string;
  host: string;
  port: number;
  /** Name of the env var holding the Hub token. */
  authTokenEnv: string;
  /** Name of the env var holding the Direct Runner token the Hub pushes with. */
  runnerTokenEnv: string;
  /** A YAML/JSON file mapping worker_id to a token that may act only as that worker. */
  workerTokensFile?: string;
  heartbeatGraceSeconds: number;
  /** A queued task that fits nowhere this long nominates the worker where it could start soonest. */
  nominateAfterSeconds: number;
  defaultMaxAttempts: number;
  uploadLimitBytes: number;
  /** How often leases are checked for expiry. */
  leaseSweepMs: number;
  /** How often every controller looks at everything again. */
  resyncMs: number;
  /** Pacing of the Admitted/Unsatisfiable condition passes. */
  conditions?: { minIntervalMs: number; refreshMs: number; maxWritesPerPass: number };
  logLevel: "silent" | "error" | "warn" | "info" | "debug";
  env?: NodeJS.ProcessEnv;
  /** Inventory and campaign files or folders to keep in sync with the store (GitOps). */
  gitopsPaths?: string[];
  gitopsDebounceMs?: number;
  /** Serve HTTPS with this certificate and key (PEM files). kubectl sends its token only over TLS. */
  tlsCertFile?: string;
  tlsKeyFile?: string;
  /** Use this store instead of opening SQLite under dataDir (tests, etcd). */
  store?: Store;
};

export const DEFAULT_HUB_OPTIONS: Omit<HubOptions, "dataDir"> = {
  host: "127.0.0.1",
  port: 8765,
  authTokenEnv: "LOOM_HUB_TOKEN",
  runnerTokenEnv: "LOOM_RUNNER_TOKEN",
  heartbeatGraceSeconds: 120,
  nominateAfterSeconds: 60,
  defaultMaxAttempts: 3,
  uploadLimitBytes: 512 * 1024 * 1024,
  leaseSweepMs: 1000,
  resyncMs: 30_000,
  logLevel: "info",
};

function readWorkerTokens(path: string): Record<string, string> {
  const doc = parseYaml(readFileSync(path, "utf8")) as unknown;
  const map = (doc && typeof doc === "object" && "workers" in (doc as object) ? (doc as { workers: unknown }).workers : doc) as Record<string, unknown>;
  if (!map || typeof map !== "object" || Array.isArray(map)) throw new Error(`${path}: expected a map of worker_id to token`);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(map)) {
    if (typeof v !== "string" || v.length < 16) throw new Error(`${path}: workers.${k}: token must be a string of at least 16 characters`);
    out[k] = v;
  }
  return out;
}

export class Hub {
  readonly scheduler: Scheduler;
  readonly events: EventRecorder;
  controllers: ControllerManager | undefined;
  gitops: GitopsSync | undefined;
  readonly authRequired: boolean;
  private readonly abort = new AbortController();
  readonly stopping = this.abort.signal;
  private sweep: NodeJS.Timeout | undefined;
  http: FastifyInstance | undefined;
  url = "";

  private constructor(readonly store: Store, readonly cache: Informer, readonly opts: HubOptions) {
    this.scheduler = new Scheduler(store, cache, { heartbeatGraceSeconds: opts.heartbeatGraceSeconds, nominateAfterSeconds: opts.nominateAfterSeconds, defaultMaxAttempts: opts.defaultMaxAttempts, resultsDir: join(opts.dataDir, "results") });
    this.events = new EventRecorder(store, { maxEvents: 5000, ttlMs: 3_600_000, flushMs: 100, onError: (e) => this.http?.log.warn({ err: e }, "event write failed") });
    this.scheduler.ctx.recordEvent = this.events.record;
    const env = opts.env ?? process.env;
    this.authRequired = Boolean(env[opts.authTokenEnv]);
  }

  /** Open the store, sync the informer, and serve HTTP. */
  static async start(partial: Partial<HubOptions> & { dataDir: string }): Promise<Hub> {
    const opts: HubOptions = { ...DEFAULT_HUB_OPTIONS, ...partial, dataDir: resolve(partial.dataDir) };
    const env = opts.env ?? process.env;
    const hubToken = env[opts.authTokenEnv] || undefined;
    const workerTokens = opts.workerTokensFile ? readWorkerTokens(opts.workerTokensFile) : undefined;
    if (!hubToken && !isLoopback(opts.host))
      throw new Error(`refusing to listen on ${opts.host} without a token: set ${opts.authTokenEnv} (or --auth-token-env NAME), or bind 127.0.0.1`);
    if (workerTokens && !hubToken) throw new Error(`per-worker tokens need a Hub token as well: set ${opts.authTokenEnv}`);
    if (!!opts.tlsCertFile !== !!opts.tlsKeyFile) throw new Error("--tls-cert-file and --tls-key-file go together");
    const https = opts.tlsCertFile ? { cert: readFileSync(opts.tlsCertFile), key: readFileSync(opts.tlsKeyFile!) } : undefined;
    compileAll();
    mkdirSync(opts.dataDir, { recursive: true });
    const store = opts.store ?? openSqliteStore(join(opts.dataDir, "loom.db"));
    const cache = new Informer(store, ["Worker", "Task", "Campaign"], { pending: true });
    const hub = new Hub(store, cache, opts);
    await cache.start();
    // The scheduler follows the informer from before its first list, so its queue is already full.
    const http = Fastify({ logger: opts.logLevel === "silent" ? false : { level: opts.logLevel, redact: ["req.headers.authorization", "req.headers[\"x-loom-token\"]"] }, bodyLimit: 16 * 1024 * 1024, forceCloseConnections: true, ...(https ? { https } : {}) });
    await http.register(app, { hub, auth: { hubToken, workerTokens } });
    hub.http = http;
    const log = (level: "info" | "warn" | "error", msg: string, extra?: object) => http.log[level](extra ?? {}, msg);
    hub.controllers = new ControllerManager(hub.scheduler, log, { resyncMs: opts.resyncMs, push: { defaultTokenEnv: opts.runnerTokenEnv, env }, conditions: opts.conditions });
    hub.controllers.start();
    if (opts.gitopsPaths?.length) {
      // Declared workers exist before any Runner can register as them.
      hub.gitops = new GitopsSync({ store, paths: opts.gitopsPaths.map((p) => resolve(p)), recordEvent: hub.events.record, log, debounceMs: opts.gitopsDebounceMs });
      await hub.gitops.start();
    }
    hub.url = await http.listen({ host: opts.host, port: opts.port });
    hub.sweep = setInterval(() => void expireLeases(hub.scheduler.ctx).catch((e) => http.log.error({ err: e }, "lease sweep failed")), opts.leaseSweepMs);
    return hub;
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
    await this.gitops?.close();
    this.abort.abort();
    this.scheduler.stop();
    await this.controllers?.stop();
    await this.http?.close();
    await this.events.close();
    this.cache.stop();
    await this.store.close();
  }
}
