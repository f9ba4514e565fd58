// `loom hub`: serve the Hub on the embedded store (or another store).
import { Command, InvalidArgumentError } from "commander";
import { DEFAULT_HUB_OPTIONS, Hub } from "../hub.ts";

export const intArg = (name: string, min = 0) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < min) throw new InvalidArgumentError(`${name} must be an integer >= ${min}`);
  return n;
};

export function hubCommand(): Command {
  return new Command("hub")
    .description("serve the Loom Hub: the Runner API, the data API and the resource API")
    .option("--host <host>", "address to bind", DEFAULT_HUB_OPTIONS.host)
    .option("--port <port>", "port to listen on", intArg("--port"), DEFAULT_HUB_OPTIONS.port)
    .option("--data-dir <dir>", "where the embedded store and results live", ".loom/hub")
    .option("--auth-token-env <name>", "env var holding the Hub token", DEFAULT_HUB_OPTIONS.authTokenEnv)
    .option("--direct-api-token-env <name>", "env var holding the token for pushing to Direct Runners", DEFAULT_HUB_OPTIONS.runnerTokenEnv)
    .option("--worker-tokens-file <path>", "YAML/JSON map of worker_id to a token that may act only as that worker")
    .option("--heartbeat-grace-seconds <n>", "a worker silent for longer is not Ready", intArg("--heartbeat-grace-seconds", 1), DEFAULT_HUB_OPTIONS.heartbeatGraceSeconds)
    .option("--nominate-after-seconds <n>", "a queued task that fits nowhere this long holds the worker where it could start soonest", intArg("--nominate-after-seconds", 1), DEFAULT_HUB_OPTIONS.nominateAfterSeconds)
    .option("--default-max-attempts <n>", "attempts for a task whose leases keep expiring and that has no retry_policy", intArg("--default-max-attempts", 1), DEFAULT_HUB_OPTIONS.defaultMaxAttempts)
    .option("--inventory <path>", "inventory file or folder to apply and watch (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option("--manifests <path>", "campaign manifest file or folder to apply and watch (repeatable)", (v: string, acc: string[]) => [...acc, v], [] as string[])
    .option("--tls-cert-file <path>", "serve HTTPS with this PEM certificate (kubectl sends tokens only over TLS)")
    .option("--tls-key-file <path>", "the PEM private key of --tls-cert-file")
    .option("--log-level <level>", "silent, error, warn, info or debug", DEFAULT_HUB_OPTIONS.logLevel)
    .action(async (o) => {
      const hub = await Hub.start({
        dataDir: o.dataDir,
        host: o.host,
        port: o.port,
        authTokenEnv: o.authTokenEnv,
        runnerTokenEnv: o.directApiTokenEnv,
        workerTokensFile: o.workerTokensFile,
        heartbeatGraceSeconds: o.heartbeatGraceSeconds,
        nominateAfterSeconds: o.nominateAfterSeconds,
        defaultMaxAttempts: o.defaultMaxAttempts,
        logLevel: o.logLevel,
        gitopsPaths: [...o.inventory, ...o.manifests],
        tlsCertFile: o.tlsCertFile,
        tlsKeyFile: o.tlsKeyFile,
      });
      process.stderr.write(`loom hub listening on ${hub.url} (store: ${hub.store.backend}, data: ${hub.opts.dataDir}${hub.authRequired ? ", token required" : ", no token: loopback only"})\n`);
      process.stderr.write(`web view: ${hub.url}/ui/\n`);
      // SIGHUP re-reads every watched file, e.g. after a path that did not exist appears.
      const hup = () => void hub.gitops?.syncNow().catch((e) => process.stderr.write(`gitops sync failed: ${(e as Error).message}\n`));
      process.on("SIGHUP", hup);
      await new Promise<void>((resolve) => {
        const stop = () => resolve();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      process.off("SIGHUP", hup);
      await hub.close();
    });
}
