// `loom hub`: serve the Hub on the embedded store (or another store).
import { existsSync, statSync } from "node:fs";
import { Command, InvalidArgumentError, Option } from "commander";
import { holdHeapGrowth, HEAP_HEADROOM_MIB } from "../observability/heap-growth.ts";
import { LOG_FORMATS } from "../observability/logging.ts";
import { stopPretenuring } from "../observability/pretenuring.ts";
import { DEFAULT_HUB_OPTIONS, Hub } from "../hub.ts";
import { migrateStore } from "../store/migrate.ts";
import { hubBackend, storeOption, storeUrl, withEtcdFlags, type EtcdFlags } from "./store-flags.ts";
import { openStore } from "../roles/backend.ts";
import { exitsWithParent, stopSignal } from "./common.ts";

export const intArg =
  (name: string, min = 0, max = Number.MAX_SAFE_INTEGER) =>
  (v: string) => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}, got ${JSON.stringify(v)}`);
    return n;
  };

/** A --data-dir that exists must be a directory; said before anything is opened in it. */
export function dataDirArg(v: string): string {
  if (existsSync(v) && !statSync(v).isDirectory())
    throw new InvalidArgumentError(`${v} is a file, not a directory; give a directory (it is created when missing)`);
  return v;
}

/** --inventory and --manifests name what exists; a typo is an error, not a path watched in vain. */
const existingPath = (flag: string) => (v: string, acc: string[]) => {
  if (!existsSync(v)) throw new InvalidArgumentError(`${v} does not exist (${flag} takes an existing file or folder)`);
  return [...acc, v];
};

/** --log-format: short lines on a terminal, JSON in a pipe, unless told. */
export const logFormatOption = () =>
  new Option("--log-format <format>", "auto (short lines on a terminal, JSON otherwise), pretty or json")
    .choices(LOG_FORMATS)
    .default("auto");

/** The default of --heap-growth-percent. */
const HEAP_GROWTH_PERCENT = 30;

export function hubCommand(): Command {
  return withEtcdFlags(new Command("hub"))
    .description("serve the Loom Hub: the Runner API, the data API and the resource API")
    .option("--host <host>", "address to bind", DEFAULT_HUB_OPTIONS.host)
    .option(
      "--port <port>",
      "port to listen on (0: any free port)",
      intArg("--port", 0, 65535),
      DEFAULT_HUB_OPTIONS.port,
    )
    .option("--data-dir <dir>", "where the embedded store and results live", dataDirArg, ".loom/hub")
    .option("--auth-token-env <name>", "env var holding the Hub token", DEFAULT_HUB_OPTIONS.authTokenEnv)
    .option(
      "--direct-api-token-env <name>",
      "env var holding the token for pushing to Direct Runners",
      DEFAULT_HUB_OPTIONS.runnerTokenEnv,
    )
    .option(
      "--direct-token-env <names...>",
      "variables a Worker's direct_api_token_env may name: exact names, or prefixes ending in *",
      [...DEFAULT_HUB_OPTIONS.directTokenEnv],
    )
    .option("--worker-tokens-file <path>", "YAML/JSON map of worker_id to a token that may act only as that worker")
    .option(
      "--heartbeat-grace-seconds <n>",
      "a worker silent for longer is not Ready",
      intArg("--heartbeat-grace-seconds", 1),
      DEFAULT_HUB_OPTIONS.heartbeatGraceSeconds,
    )
    .option(
      "--fair-share-half-life <seconds>",
      "order queues by usage decayed over this half-life (0: by current usage)",
      intArg("--fair-share-half-life", 0),
      DEFAULT_HUB_OPTIONS.fairShareHalfLifeSeconds,
    )
    .option(
      "--nominate-after-seconds <n>",
      "a queued task that fits nowhere this long holds the worker where it could start soonest",
      intArg("--nominate-after-seconds", 1),
      DEFAULT_HUB_OPTIONS.nominateAfterSeconds,
    )
    .option(
      "--default-max-attempts <n>",
      "attempts for a task whose leases keep expiring and that has no retry_policy",
      intArg("--default-max-attempts", 1),
      DEFAULT_HUB_OPTIONS.defaultMaxAttempts,
    )
    .option(
      "--inventory <path>",
      "inventory file or folder to apply and watch (repeatable)",
      existingPath("--inventory"),
      [] as string[],
    )
    .option(
      "--manifests <path>",
      "campaign manifest file or folder to apply and watch (repeatable)",
      existingPath("--manifests"),
      [] as string[],
    )
    .option("--tls-cert-file <path>", "serve HTTPS with this PEM certificate (kubectl sends tokens only over TLS)")
    .option("--tls-key-file <path>", "the PEM private key of --tls-cert-file")
    .option(
      "--tls-self-signed",
      "serve HTTPS with a self-signed certificate for --host, kept in DATA_DIR/tls (made once, renewed when it expires)",
    )
    .option("--log-level <level>", "silent, error, warn, info or debug", DEFAULT_HUB_OPTIONS.logLevel)
    .addOption(logFormatOption())
    .addOption(storeOption())
    .option("--replica-id <id>", "this replica's name among several Hubs on etcd (default: host-pid)")
    .option(
      "--leader-ttl-seconds <n>",
      "on etcd: a leader silent this long is replaced",
      intArg("--leader-ttl-seconds", 1),
      3,
    )
    .option(
      "--heap-growth-percent <n>",
      `how far the JS heap may grow past what the last full GC kept before the next one runs, in percent; at least ${HEAP_HEADROOM_MIB} MiB whatever the percentage (0: V8's own choice, which lets a busy Hub hold about twice the memory)`,
      intArg("--heap-growth-percent", 0, 1000),
      HEAP_GROWTH_PERCENT,
    )
    .addCommand(migrateCommand())
    .action(async (o) => {
      const stopRequested = stopSignal({ withParent: exitsWithParent() }); // before start-up prints anything
      const backend = hubBackend(o, (m) => process.stderr.write(`${m}\n`));
      const hub = await Hub.start({
        backend,
        dataDir: o.dataDir,
        host: o.host,
        port: o.port,
        authTokenEnv: o.authTokenEnv,
        runnerTokenEnv: o.directApiTokenEnv,
        directTokenEnv: o.directTokenEnv,
        workerTokensFile: o.workerTokensFile,
        heartbeatGraceSeconds: o.heartbeatGraceSeconds,
        nominateAfterSeconds: o.nominateAfterSeconds,
        fairShareHalfLifeSeconds: o.fairShareHalfLifeSeconds,
        defaultMaxAttempts: o.defaultMaxAttempts,
        logLevel: o.logLevel,
        logFormat: o.logFormat,
        gitopsPaths: [...o.inventory, ...o.manifests],
        tlsCertFile: o.tlsCertFile,
        tlsKeyFile: o.tlsKeyFile,
        tlsSelfSigned: o.tlsSelfSigned,
      });
      // Held once the store is loaded (observability/heap-growth.ts): while the informer
      // fills, the heap only grows, and a full GC at every 30% of growth would slow the
      // start by about a tenth.
      const releaseHeap = o.heapGrowthPercent > 0 ? holdHeapGrowth(o.heapGrowthPercent) : () => {};
      // Likewise once loaded: short-lived objects stay in the young generation (pretenuring.ts).
      stopPretenuring();
      // SIGHUP re-reads every watched file, e.g. after a path that did not exist appears.
      const hup = () =>
        void hub.gitops?.syncNow().catch((e) => process.stderr.write(`gitops sync failed: ${(e as Error).message}\n`));
      process.on("SIGHUP", hup);
      process.stderr.write(
        `loom hub ${hub.leadership.identity} listening on ${hub.url} (store: ${hub.store.backend}, data: ${hub.opts.dataDir}${hub.authRequired ? ", token required" : ", no token: loopback only"})\n`,
      );
      process.stderr.write(`web view: ${hub.url}/ui/\n`);
      if (o.tlsSelfSigned)
        process.stderr.write(
          `self-signed certificate: ${hub.opts.tlsCertFile}; clients trust it with --certificate-authority ${hub.opts.tlsCertFile} (or LOOM_CA_FILE)\n`,
        );
      await stopRequested;
      process.off("SIGHUP", hup);
      await hub.close();
      releaseHeap();
      // Everything is closed; a follower's etcd3 election campaign still watches its
      // predecessor's key after resigning (the client offers no way to cancel that wait),
      // which would keep the process alive.
      if (backend.kind === "etcd") process.exit(0);
    });
}

function migrateCommand(): Command {
  return withEtcdFlags(new Command("migrate"))
    .description(
      "copy a store into another, e.g. --from sqlite:.loom/hub --to etcd:http://127.0.0.1:2379 (stop the Hub first)",
    )
    .requiredOption("--from <store>", "sqlite:DIR (the Hub's --data-dir) or etcd:URL[,URL...]")
    .requiredOption("--to <store>", "sqlite:DIR or etcd:URL[,URL...] (must be empty; the etcd prefix is --etcd-prefix)")
    .action(async (o: EtcdFlags & { from: string; to: string }) => {
      const from = await openStore(storeUrl(o.from, o, "--from"));
      try {
        const to = await openStore(storeUrl(o.to, o, "--to"));
        try {
          const r = await migrateStore(from, to, (kind, n) => process.stderr.write(`\r${kind}: ${n}`));
          process.stderr.write("\n");
          process.stdout.write(
            `copied ${r.total} objects: ${Object.entries(r.kinds)
              .map(([k, n]) => `${k} ${n}`)
              .join(", ")}\n`,
          );
        } finally {
          await to.close();
        }
      } finally {
        await from.close();
      }
    });
}
