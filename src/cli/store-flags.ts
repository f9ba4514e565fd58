// Which store a Hub (or `loom hub migrate`) opens, as its flags say: the embedded SQLite
// file under the data dir, or an etcd cluster shared by several Hub replicas. The flags
// become a spec; roles/backend.ts opens it.
import { readFileSync } from "node:fs";
import { type Command, InvalidArgumentError, Option } from "commander";
import type { BackendSpec, StoreSpec } from "../roles/backend.ts";
import type { EtcdStoreOptions } from "../store/etcd.ts";
import { UsageError } from "./client.ts";

export type EtcdFlags = {
  etcdEndpoints?: string[];
  etcdPrefix: string;
  etcdCaFile?: string;
  etcdCertFile?: string;
  etcdKeyFile?: string;
  etcdUsername?: string;
  etcdPasswordEnv: string;
  etcdMaxTxnOps?: number;
  etcdMaxRequestBytes?: number;
};

const atLeast =
  (flag: string, min: number) =>
  (v: string): number => {
    const n = Number(v);
    if (!Number.isInteger(n) || n < min)
      throw new InvalidArgumentError(`${flag} must be a whole number of at least ${min}`);
    return n;
  };

const endpointList = (v: string): string[] => {
  const urls = v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (!urls.length) throw new InvalidArgumentError("--etcd-endpoints needs at least one URL");
  for (const u of urls)
    if (!/^https?:\/\/[^/\s]+\/?$/.test(u))
      throw new InvalidArgumentError(`--etcd-endpoints: "${u}" is not an http(s)://host:port URL`);
  return urls;
};

/** The etcd connection flags, shared by `loom hub` and `loom hub migrate`. */
export function withEtcdFlags(cmd: Command): Command {
  return cmd
    .option("--etcd-endpoints <urls>", "etcd client URLs, comma-separated (with --store etcd)", endpointList)
    .option("--etcd-prefix <prefix>", "key prefix of this installation in etcd", "/loom")
    .option("--etcd-ca-file <path>", "PEM CA certificate that signed the etcd servers' certificates (TLS)")
    .option("--etcd-cert-file <path>", "PEM client certificate for etcd (mutual TLS)")
    .option("--etcd-key-file <path>", "PEM private key of --etcd-cert-file")
    .option("--etcd-username <name>", "etcd user (etcd auth); the password comes from --etcd-password-env")
    .option("--etcd-password-env <name>", "env var holding the etcd user's password", "LOOM_ETCD_PASSWORD")
    .option(
      "--etcd-max-txn-ops <n>",
      "the etcd servers' --max-txn-ops: the Hub splits its writes to fit (default: etcd's own default, 128)",
      atLeast("--etcd-max-txn-ops", 16),
    )
    .option(
      "--etcd-max-request-bytes <n>",
      "the etcd servers' --max-request-bytes (default: etcd's own default, 1.5 MiB)",
      atLeast("--etcd-max-request-bytes", 262_144),
    );
}

export const storeOption = () =>
  new Option("--store <backend>", "sqlite (one Hub, embedded) or etcd (several Hub replicas)")
    .choices(["sqlite", "etcd"])
    .default("sqlite");

export function etcdOptions(
  o: EtcdFlags,
  endpoints: string[] | undefined = o.etcdEndpoints,
  env: NodeJS.ProcessEnv = process.env,
): EtcdStoreOptions {
  if (!endpoints?.length) throw new UsageError("--store etcd needs --etcd-endpoints URL[,URL...]");
  if (!!o.etcdCertFile !== !!o.etcdKeyFile) throw new UsageError("--etcd-cert-file and --etcd-key-file go together");
  if ((o.etcdCaFile || o.etcdCertFile) && endpoints.some((u) => u.startsWith("http://")))
    throw new UsageError("--etcd-ca-file/--etcd-cert-file need https:// endpoints");
  let auth: EtcdStoreOptions["auth"];
  if (o.etcdUsername) {
    const password = env[o.etcdPasswordEnv];
    if (!password) throw new UsageError(`--etcd-username needs the password in env ${o.etcdPasswordEnv}`);
    auth = { username: o.etcdUsername, password };
  }
  const tls = o.etcdCaFile
    ? {
        ca: readFileSync(o.etcdCaFile),
        cert: o.etcdCertFile ? readFileSync(o.etcdCertFile) : undefined,
        key: o.etcdKeyFile ? readFileSync(o.etcdKeyFile) : undefined,
      }
    : undefined;
  return {
    endpoints,
    prefix: o.etcdPrefix,
    tls,
    auth,
    maxTxnOps: o.etcdMaxTxnOps,
    maxRequestBytes: o.etcdMaxRequestBytes,
  };
}

/** The backend of a Hub started with these flags. */
export function hubBackend(
  o: EtcdFlags & { store: string; replicaId?: string; leaderTtlSeconds: number },
  log: (m: string) => void,
): BackendSpec {
  if (o.store !== "etcd") {
    if (o.etcdEndpoints) throw new UsageError("--etcd-endpoints needs --store etcd");
    return { kind: "sqlite" };
  }
  return { kind: "etcd", etcd: etcdOptions(o), replicaId: o.replicaId, leaderTtlSeconds: o.leaderTtlSeconds, log };
}

/** `sqlite:DIR` or `etcd:URL[,URL...]` of `loom hub migrate`. */
export function storeUrl(spec: string, o: EtcdFlags, flag: string): StoreSpec {
  const i = spec.indexOf(":");
  const [scheme, rest] = i < 0 ? [spec, ""] : [spec.slice(0, i), spec.slice(i + 1)];
  if (scheme === "sqlite" && rest) return { kind: "sqlite", dataDir: rest };
  if (scheme === "etcd" && rest) {
    let endpoints: string[];
    try {
      endpoints = endpointList(rest);
    } catch (e) {
      throw new UsageError(`${flag}: ${(e as Error).message.replace("--etcd-endpoints", "etcd:")}`);
    }
    return { kind: "etcd", etcd: etcdOptions(o, endpoints) };
  }
  throw new UsageError(`${flag}: expected sqlite:DIR or etcd:URL[,URL...], got "${spec}"`);
}
