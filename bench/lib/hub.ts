// A real `loom hub` in its own process, on a data directory the benchmark owns.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT, spawnNode, stop, waitForLine, type Child } from "./proc.ts";
import type { JsonClient } from "./http.ts";

export type HubProc = Child & { url: string; dataDir: string };

export const tempDir = (prefix: string) => mkdtempSync(join(tmpdir(), `loom-bench-${prefix}-`));

/**
 * Start `loom hub` on `dataDir` at an ephemeral loopback port, quiet (no request logs).
 * `extraArgs` is where a store backend is chosen: the lease scenario's etcd rows pass
 * ["--store", "etcd", "--etcd-endpoints", url, ...] here.
 */
export async function startHub(dataDir: string, extraArgs: string[] = [], timeoutMs = 120_000): Promise<HubProc> {
  const child = spawnNode(
    [join(ROOT, "bin", "loom.mjs"), "hub", "--data-dir", dataDir, "--port", "0", "--log-level", "warn", ...extraArgs],
    { LOOM_HUB_TOKEN: "" },
  );
  const m = await waitForLine(child, "stderr", /listening on (https?:\/\/[^\s]+)/, timeoutMs);
  return { ...child, url: m[1], dataDir };
}

export async function stopHub(h: HubProc, opts: { keepData?: boolean } = {}): Promise<void> {
  await stop(h);
  if (!opts.keepData) rmSync(h.dataDir, { recursive: true, force: true });
}

/** The store revision the Hub's informer has reached (a list of a kind the benchmarks leave empty). */
export async function revisionOf(c: JsonClient): Promise<number> {
  const l = await c.get<{ metadata: { resourceVersion: string } }>("/apis/loom.dev/v1alpha1/campaigns");
  return Number(l.metadata.resourceVersion);
}

/**
 * Wait until the Hub stops writing (its revision holds still for `quietMs`): the reactions
 * to a bulk dispatch (conditions, events) are over, so what follows measures only itself.
 * `from`: a Hub's API, or a function that reads the revision (a Hub in this process).
 */
export async function waitQuiet(
  from: JsonClient | (() => Promise<number>),
  quietMs: number,
  timeoutMs: number,
): Promise<{ waitedMs: number; settled: boolean }> {
  const revision = typeof from === "function" ? from : () => revisionOf(from);
  const t0 = Date.now();
  let rev = await revision();
  let since = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    await new Promise((r) => setTimeout(r, Math.min(200, quietMs / 2)));
    const now = await revision();
    if (now !== rev) {
      rev = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) return { waitedMs: Date.now() - t0, settled: true };
  }
  return { waitedMs: Date.now() - t0, settled: false };
}

type TaskConditions = { items: { status?: { conditions?: { type: string; reason?: string }[] } }[] };

/**
 * Wait until every Task carries an Admitted condition whose reason `settled` accepts: the
 * conditions pass owes the queue nothing more. A pass writes at most a bounded number of
 * tasks and spaces itself by its own length, so a Hub can fall quiet for a second between
 * two passes of one backlog; this waits for the backlog itself.
 */
export async function waitConditions(
  c: JsonClient,
  settled: (reason: string | undefined) => boolean,
  timeoutMs: number,
): Promise<{ waitedMs: number; owed: number }> {
  const t0 = Date.now();
  for (;;) {
    const { items } = await c.get<TaskConditions>("/apis/loom.dev/v1alpha1/tasks");
    const owed = items.filter((t) => {
      const a = t.status?.conditions?.find((x) => x.type === "Admitted");
      return !a || !settled(a.reason);
    }).length;
    if (owed === 0 || Date.now() - t0 >= timeoutMs) return { waitedMs: Date.now() - t0, owed };
    await new Promise((r) => setTimeout(r, 500));
  }
}
