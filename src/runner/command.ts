// `loom runner`: the agent on a worker host. Pull modes (ssh-start, long-poll, prestarted)
// run the pull loop; direct-worker-api serves the Direct Runner API for pushes.
import { mkdir } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Command } from "commander";
import { HubClient } from "./client.ts";
import { CA_FILE_ENV, readCa } from "../tls/fetch.ts";
import { DirectServer, DIRECT_DEFAULT_PORT } from "./direct.ts";
import { isLoopback } from "../security/tokens.ts";
import { DEFAULT_SCRUBBED_ENV } from "./execute.ts";
import { CapacityError, hostSnapshot, resolveCapacity } from "./host.ts";
import { EXIT_WITH_PARENT_ENV, onParentExit, parentToOutlive, utcNow } from "./process.ts";
import { PullLoop, type ConcurrencyPolicy, type PullOptions } from "./pull.ts";

export const CONNECTION_MODES = ["ssh-start", "long-poll", "direct-worker-api", "prestarted"] as const;
export type ConnectionMode = (typeof CONNECTION_MODES)[number];
/** v1 Runner's mode names: `poll` is a pull loop with no long-poll wait, `direct-api` serves pushes. */
export const V1_CONNECTION_MODES: Record<string, ConnectionMode> = {
  poll: "prestarted",
  "direct-api": "direct-worker-api",
};
const LONG_POLL_WAIT_SECONDS = 25;
const SHUTDOWN_GRACE_SECONDS = 30;

interface RawOptions {
  controller?: string;
  certificateAuthority?: string;
  workerId?: string;
  capability: string[];
  maxConcurrency: string;
  initialConcurrency?: string;
  concurrencyPolicy: string;
  resourceCapacityJson?: string;
  workDir?: string;
  leaseSeconds: string;
  claimWaitSeconds?: string;
  connectionMode: string;
  pollSeconds: string;
  once?: boolean;
  maxTasks?: string;
  serveHost: string;
  servePort: string;
  authTokenEnv: string;
  /** v1's name for --auth-token-env; wins when given. */
  controllerTokenEnv?: string;
  directApiTokenEnv: string;
  shutdownGraceSeconds: string;
  /** v1 flags this Runner accepts but has nothing to do with (it keeps no source cache). */
  sourceCacheDir?: string;
  sourceCacheMaxMb?: string;
  failFast?: boolean;
  directApiRunOnStart?: boolean;
}

export class FlagError extends Error {
  constructor(
    readonly flag: string,
    message: string,
  ) {
    super(`${flag}: ${message}`);
    this.name = "FlagError";
  }
}

function int(flag: string, raw: string | undefined, { min, max }: { min: number; max?: number }): number | undefined {
  if (raw === undefined) return undefined;
  if (!/^\s*\d+\s*$/.test(raw))
    throw new FlagError(flag, `must be a whole number${min > 0 ? ` >= ${min}` : " >= 0"}, got ${JSON.stringify(raw)}`);
  const n = Number(raw);
  if (n < min || (max !== undefined && n > max))
    throw new FlagError(flag, `must be between ${min} and ${max ?? "∞"}, got ${n}`);
  return n;
}

/** Directory-safe worker id for the default work dir. */
const dirSafe = (s: string) => s.replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^[-.]+/, "") || "worker";

export interface RunnerConfig {
  mode: ConnectionMode;
  controller: string;
  /** PEM of the CA that signed the Hub's certificate (--certificate-authority or LOOM_CA_FILE). */
  ca?: Buffer;
  authTokenEnv: string;
  directApiTokenEnv: string;
  /** v1 flags given that have no effect here, each with why; logged at start. */
  ignored: string[];
  pull: Omit<PullOptions, "client" | "log">;
  serveHost: string;
  servePort: number;
}

/** --controller (or LOOM_CONTROLLER) and the CA that signs its certificate. */
function controllerFlags(raw: RawOptions, env: NodeJS.ProcessEnv): { controller: string; ca?: Buffer } {
  const controller = raw.controller ?? env.LOOM_CONTROLLER ?? "http://127.0.0.1:8765";
  let url: URL;
  try {
    url = new URL(controller);
  } catch {
    throw new FlagError("--controller", `not a URL: ${JSON.stringify(controller)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new FlagError("--controller", `must be an http(s) URL, got ${url.protocol}`);
  if (url.username || url.password)
    throw new FlagError(
      "--controller",
      "must not carry credentials; put the token in the env var named by --auth-token-env",
    );
  let ca: Buffer | undefined;
  try {
    ca = readCa(raw.certificateAuthority, env)?.pem;
  } catch (e) {
    throw new FlagError(raw.certificateAuthority ? "--certificate-authority" : CA_FILE_ENV, (e as Error).message);
  }
  return { controller, ...(ca ? { ca } : {}) };
}

/** --connection-mode, v1's names accepted. */
function connectionMode(raw: RawOptions): ConnectionMode {
  const modeName = V1_CONNECTION_MODES[raw.connectionMode] ?? raw.connectionMode;
  if (!(CONNECTION_MODES as readonly string[]).includes(modeName)) {
    throw new FlagError(
      "--connection-mode",
      `must be one of ${[...CONNECTION_MODES, ...Object.keys(V1_CONNECTION_MODES)].join(", ")}, got ${JSON.stringify(raw.connectionMode)}`,
    );
  }
  return modeName;
}

/** --concurrency-policy, --max-concurrency and --initial-concurrency, which must fit under it. */
function concurrencyFlags(raw: RawOptions): {
  concurrencyPolicy: ConcurrencyPolicy;
  maxConcurrency: number;
  initialConcurrency: number;
} {
  if (raw.concurrencyPolicy !== "fixed" && raw.concurrencyPolicy !== "adaptive") {
    throw new FlagError(
      "--concurrency-policy",
      `must be fixed or adaptive, got ${JSON.stringify(raw.concurrencyPolicy)}`,
    );
  }
  const maxConcurrency = int("--max-concurrency", raw.maxConcurrency, { min: 1, max: 1024 })!;
  // v1's default: start at one and let the Hub raise it.
  const initialConcurrency = int("--initial-concurrency", raw.initialConcurrency, { min: 1 }) ?? 1;
  if (initialConcurrency > maxConcurrency) {
    throw new FlagError(
      "--initial-concurrency",
      `must be between 1 and --max-concurrency (${maxConcurrency}), got ${initialConcurrency}`,
    );
  }
  return { concurrencyPolicy: raw.concurrencyPolicy, maxConcurrency, initialConcurrency };
}

/** --resource-capacity-json, parsed and checked for its shape. */
function capacityOverridesOf(json: string | undefined): unknown {
  if (json === undefined) return undefined;
  let capacityOverrides: unknown;
  try {
    capacityOverrides = JSON.parse(json);
  } catch (e) {
    throw new FlagError("--resource-capacity-json", `not valid JSON: ${(e as Error).message}`);
  }
  try {
    // Validated against an empty snapshot: only the shape matters here, the host fills the rest at registration.
    resolveCapacity({}, capacityOverrides, "resource_capacity");
  } catch (e) {
    if (e instanceof CapacityError) throw new FlagError("--resource-capacity-json", e.message);
    throw e;
  }
  return capacityOverrides;
}

/** Validates every flag; a FlagError names the flag. */
export function resolveConfig(raw: RawOptions, env: NodeJS.ProcessEnv = process.env): RunnerConfig {
  const { controller, ca } = controllerFlags(raw, env);
  const workerId = (raw.workerId ?? os.hostname()).trim();
  if (!workerId) throw new FlagError("--worker-id", "must not be empty");
  const mode = connectionMode(raw);
  const authTokenEnv = raw.controllerTokenEnv ?? raw.authTokenEnv;
  const concurrency = concurrencyFlags(raw);
  const capacityOverrides = capacityOverridesOf(raw.resourceCapacityJson);
  const leaseSeconds = int("--lease-seconds", raw.leaseSeconds, { min: 30 })!;
  const explicitWait = int("--claim-wait-seconds", raw.claimWaitSeconds, { min: 0, max: 60 });
  const claimWaitSeconds = explicitWait ?? (mode === "long-poll" ? LONG_POLL_WAIT_SECONDS : 0);
  const pollSeconds = int("--poll-seconds", raw.pollSeconds, { min: 1, max: 3600 })!;
  const maxTasks = int("--max-tasks", raw.maxTasks, { min: 0 }) ?? 0;
  const servePort = int("--serve-port", raw.servePort, { min: 0, max: 65535 })!;
  const shutdownGrace = int("--shutdown-grace-seconds", raw.shutdownGraceSeconds, { min: 0 })!;
  int("--source-cache-max-mb", raw.sourceCacheMaxMb, { min: 0 });
  for (const [flag, name] of [
    [raw.controllerTokenEnv !== undefined ? "--controller-token-env" : "--auth-token-env", authTokenEnv],
    ["--direct-api-token-env", raw.directApiTokenEnv],
  ] as const) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name))
      throw new FlagError(flag, `must be an environment variable name, got ${JSON.stringify(name)}`);
  }
  if (mode === "direct-worker-api" && !isLoopback(raw.serveHost) && !env[raw.directApiTokenEnv]) {
    throw new FlagError(
      "--serve-host",
      `${raw.serveHost} is not a loopback address; serving the Direct Runner API there needs a token in $${raw.directApiTokenEnv}`,
    );
  }
  const capabilities = raw.capability.length
    ? [...new Set(raw.capability.map((c) => c.trim()).filter(Boolean))]
    : ["linux", "*"];
  const workDir = path.resolve(raw.workDir ?? path.join(".loom", "runner", dirSafe(workerId)));
  return {
    mode,
    controller: controller.replace(/\/+$/, ""),
    ...(ca ? { ca } : {}),
    authTokenEnv,
    directApiTokenEnv: raw.directApiTokenEnv,
    ignored: [
      ...(raw.sourceCacheDir !== undefined || raw.sourceCacheMaxMb !== undefined
        ? ["--source-cache-dir/--source-cache-max-mb (this Runner keeps no source cache)"]
        : []),
      ...(raw.failFast ? ["--fail-fast (a failed task is reported to the Hub and the loop goes on)"] : []),
      ...(raw.directApiRunOnStart ? ["--direct-api-run-on-start (a Direct Runner here only takes pushes)"] : []),
    ],
    serveHost: raw.serveHost,
    servePort,
    pull: {
      workerId,
      workDir,
      capabilities,
      ...concurrency,
      capacityOverrides,
      leaseSeconds,
      claimWaitSeconds,
      pollSeconds,
      once: Boolean(raw.once),
      maxTasks,
      graceSeconds: shutdownGrace,
      scrubEnv: [...new Set([...DEFAULT_SCRUBBED_ENV, authTokenEnv, raw.directApiTokenEnv])],
    },
  };
}

const stderrLog = (workerId: string) => (line: string) =>
  process.stderr.write(`${utcNow()} runner ${workerId}: ${line}\n`);

/** SIGINT/SIGTERM: the first stops claiming and lets tasks finish; a second stops them now. */
function onSignals(first: (sig: string) => void, second: (sig: string) => void): () => void {
  let count = 0;
  const handler = (sig: string) => (++count === 1 ? first(sig) : second(sig));
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  // Started by `loom quickstart`: a quick start that is gone (even killed) takes its Runners with it,
  // at once: the Hub it ran went with it, so running tasks have nowhere to report.
  const gone = () => {
    while (count < 2) handler("parent exited");
  };
  const unwatch = process.env[EXIT_WITH_PARENT_ENV] ? onParentExit(gone, parentToOutlive()) : () => undefined;
  return () => {
    process.off("SIGINT", handler);
    process.off("SIGTERM", handler);
    unwatch();
  };
}

export async function runRunner(cfg: RunnerConfig): Promise<number> {
  const log = stderrLog(cfg.pull.workerId);
  await mkdir(cfg.pull.workDir, { recursive: true });
  const client = new HubClient({ baseUrl: cfg.controller, tokenEnv: cfg.authTokenEnv, ca: cfg.ca });
  if (!client.hasToken) log(`no Hub token in $${cfg.authTokenEnv}; calling the Hub without one`);
  for (const flag of cfg.ignored) log(`accepted, no effect: ${flag}`);
  const opts: PullOptions = { ...cfg.pull, client, log };
  // Capacity is frozen at registration: say what it will be before anything else.
  const snap = await hostSnapshot(cfg.pull.workDir);
  log(
    `work dir ${cfg.pull.workDir}; capacity ${JSON.stringify(resolveCapacity(snap.resources, cfg.pull.capacityOverrides))}; mode ${cfg.mode}`,
  );

  if (cfg.mode === "direct-worker-api") {
    const server = new DirectServer({
      ...opts,
      host: cfg.serveHost,
      port: cfg.servePort,
      runnerToken: process.env[cfg.directApiTokenEnv] || undefined,
    });
    await server.start();
    await new Promise<void>((resolve) => {
      const off = onSignals(
        (sig) => {
          log(`${sig}: closing (grace ${cfg.pull.graceSeconds}s)`);
          void server.close().then(() => {
            off();
            resolve();
          });
        },
        (sig) => {
          log(`${sig} again: stopping running tasks now`);
          void server.close(0);
        },
      );
    });
    return 0;
  }

  const loop = new PullLoop(opts);
  const off = onSignals(
    (sig) => loop.requestStop(`${sig} received`),
    (sig) => {
      log(`${sig} again: stopping running tasks now`);
      loop.abortRunning(`${sig}: shutdown`);
    },
  );
  try {
    const s = await loop.run();
    log(`exiting: ${s.claimed} claimed, ${s.completed} finished${s.stopped ? " (stopped)" : ""}`);
    process.stdout.write(
      JSON.stringify({ worker_id: cfg.pull.workerId, claimed: s.claimed, completed: s.completed }) + "\n",
    );
    return 0;
  } finally {
    off();
  }
}

const collect = (v: string, prev: string[]) => [...prev, v];

export function runnerCommand(): Command {
  const cmd = new Command("runner")
    .description(
      "run a Loom Runner on this host: register with the Hub, then pull (or be pushed) tasks and upload their result ZIPs",
    )
    .option("--controller <url>", "Hub URL (env LOOM_CONTROLLER, default http://127.0.0.1:8765)")
    .option("--certificate-authority <file>", "PEM file of the CA that signed the Hub's certificate (env LOOM_CA_FILE)")
    .option("--worker-id <id>", "worker id (default: the hostname)")
    .option("--capability <name>", "capability to advertise (repeatable; default linux and *)", collect, [])
    .option("--max-concurrency <n>", "hard cap on tasks running at once", "1")
    .option("--initial-concurrency <n>", "desired concurrency at registration; the Hub may raise it (default 1)")
    .option("--concurrency-policy <policy>", "fixed | adaptive", "fixed")
    .option(
      "--resource-capacity-json <json>",
      'capacity overrides, e.g. {"memory_mb":2048,"gpu_count":1,"gpu_types":["a100"]}',
    )
    .option("--work-dir <dir>", "where attempts and result ZIPs are kept (default ./.loom/runner/<worker>)")
    .option("--lease-seconds <n>", "lease asked for on claim and renew (>= 30)", "600")
    .option("--claim-wait-seconds <n>", "long-poll wait sent with claims (0..60; long-poll mode: 25)")
    .option(
      "--connection-mode <mode>",
      `${CONNECTION_MODES.join(" | ")}; v1's poll and direct-api mean prestarted and direct-worker-api`,
      "ssh-start",
    )
    .option("--poll-seconds <n>", "pause between idle rounds", "5")
    .option("--once", "exit after an idle round with nothing running")
    .option("--max-tasks <n>", "exit after this many tasks (0 = no limit)")
    .option("--serve-host <host>", "direct-worker-api: address to listen on", "127.0.0.1")
    .option("--serve-port <port>", "direct-worker-api: port to listen on", String(DIRECT_DEFAULT_PORT))
    .option("--auth-token-env <name>", "env var holding the Hub token", "LOOM_HUB_TOKEN")
    .option("--controller-token-env <name>", "v1's name for --auth-token-env")
    .option("--direct-api-token-env <name>", "env var holding the Direct Runner API token", "LOOM_RUNNER_TOKEN")
    .option(
      "--shutdown-grace-seconds <n>",
      "on SIGINT/SIGTERM, how long running tasks may finish",
      String(SHUTDOWN_GRACE_SECONDS),
    )
    .option("--source-cache-dir <dir>", "v1 flag, accepted; this Runner keeps no source cache")
    .option("--source-cache-max-mb <n>", "v1 flag, accepted; this Runner keeps no source cache")
    .option("--fail-fast", "v1 flag, accepted; a failed task is reported and the loop goes on")
    .option("--direct-api-run-on-start", "v1 flag, accepted; a Direct Runner here only takes pushes")
    .exitOverride()
    .action(async (raw: RawOptions) => {
      let cfg: RunnerConfig;
      try {
        cfg = resolveConfig(raw);
      } catch (e) {
        if (e instanceof FlagError) cmd.error(`error: ${e.message}`, { exitCode: 2, code: "loom.runner.invalidFlag" });
        throw e;
      }
      process.exitCode = await runRunner(cfg);
    });
  return cmd;
}
