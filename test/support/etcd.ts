// Test support: a real etcd (Debian's etcd-server) on free loopback ports with a temp data
// dir, stopped by its pid. Suites skip with a visible reason only when the binary is missing.
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const ETCD_BIN = process.env.LOOM_ETCD_BIN ?? "/usr/bin/etcd";
export const etcdMissing = existsSync(ETCD_BIN)
  ? undefined
  : `${ETCD_BIN} is missing (apt-get install -y etcd-server); etcd tests skipped`;
if (etcdMissing) console.warn(etcdMissing);

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

export type EtcdMember = {
  name: string;
  clientUrl: string;
  peerUrl: string;
  proc: ChildProcess;
  dir: string;
  stop(signal?: NodeJS.Signals): Promise<void>;
};
export type EtcdCluster = { endpoints: string[]; members: EtcdMember[]; stop(): Promise<void> };

/**
 * Start `size` etcd members forming one cluster on loopback, on etcd's default limits
 * (--max-txn-ops 128, --max-request-bytes 1.5 MiB): the Hub must fit a stock etcd.
 */
export async function startEtcd(size = 1): Promise<EtcdCluster> {
  // A free port can be taken by another test file between the probe and etcd's bind: retry.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(size);
    } catch (e) {
      if (attempt >= 3) throw e;
    }
  }
}

async function startOnce(size: number): Promise<EtcdCluster> {
  const specs = [];
  for (let i = 0; i < size; i++)
    specs.push({
      name: `m${i}`,
      client: await freePort(),
      peer: await freePort(),
      dir: await mkdtemp(join(tmpdir(), "loom-etcd-")),
    });
  const cluster = specs.map((s) => `${s.name}=http://127.0.0.1:${s.peer}`).join(",");
  const token = `loom-test-${specs[0].client}`; // one token for every member of this cluster
  const members: EtcdMember[] = specs.map((s) => {
    const clientUrl = `http://127.0.0.1:${s.client}`;
    const peerUrl = `http://127.0.0.1:${s.peer}`;
    const proc = spawn(
      ETCD_BIN,
      [
        "--name",
        s.name,
        "--data-dir",
        s.dir,
        "--listen-client-urls",
        clientUrl,
        "--advertise-client-urls",
        clientUrl,
        "--listen-peer-urls",
        peerUrl,
        "--initial-advertise-peer-urls",
        peerUrl,
        "--initial-cluster",
        cluster,
        "--initial-cluster-state",
        "new",
        "--initial-cluster-token",
        token,
        "--log-level",
        "error",
        "--logger",
        "zap",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    let stderr = "";
    proc.stderr.on("data", (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    proc.on("exit", (code, sig) => {
      if (code && !sig) console.error(`etcd ${s.name} exited with ${code}: ${stderr}`);
    });
    return {
      name: s.name,
      clientUrl,
      peerUrl,
      proc,
      dir: s.dir,
      async stop(signal: NodeJS.Signals = "SIGTERM") {
        if (proc.exitCode === null && proc.signalCode === null) {
          const exited = new Promise((r) => proc.once("exit", r));
          process.kill(proc.pid!, signal);
          await exited;
        }
      },
    };
  });
  const stop = async () => {
    for (const m of members) await m.stop();
    for (const m of members) await rm(m.dir, { recursive: true, force: true });
  };
  try {
    await Promise.all(members.map((m) => waitHealthy(m.clientUrl, m)));
  } catch (e) {
    await stop();
    throw e;
  }
  return { endpoints: members.map((m) => m.clientUrl), members, stop };
}

async function waitHealthy(url: string, m: { proc: ChildProcess }, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (m.proc.exitCode !== null) throw new Error(`etcd at ${url} exited with ${m.proc.exitCode}`);
    try {
      const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) }); // /health can block while there is no leader
      if (res.ok && ((await res.json()) as { health?: string }).health === "true") return;
    } catch {
      // not listening yet
    }
    if (Date.now() > end) throw new Error(`etcd at ${url} not healthy within ${timeoutMs}ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
