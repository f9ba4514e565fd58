// 6. Cold start: from spawning `loom hub` on a data dir holding the scale queue to its first
// successful claim (a Runner registers and is granted a task), after a clean stop and
// again after SIGKILL. The probe starts knocking at the moment of the spawn, so the time
// includes process start, store open, informer sync and whatever else comes before the
// first lease.
// 7. RSS: the Hub's resident memory (VmRSS) on that data dir, once it can claim and again
// once its workers are live and it has stopped writing.
import { join } from "node:path";
import { JsonClient } from "../lib/http.ts";
import { waitQuiet } from "../lib/hub.ts";
import { HEARTBEAT_EVERY_MS, scaleSizes } from "../lib/hubscale.ts";
import { ROOT, rssMb, spawnNode, stop, type Child } from "../lib/proc.ts";
import { cell, type Table } from "../lib/report.ts";
import { freePort, heartbeatAll, keepHeartbeating, scaleDataDir } from "../lib/scale.ts";
import type { RunOptions, Scenario } from "../lib/scenario.ts";
import { registerBody } from "../lib/workload.ts";

type Started = { child: Child; url: string; firstClaimMs: number };

/** Spawn the Hub and knock until a claim is granted; the clock starts at the spawn. */
async function spawnUntilClaim(dir: string, o: RunOptions, probeId: string, timeoutMs: number): Promise<Started> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = spawnNode(
    [
      join(ROOT, "bin", "loom.mjs"),
      "hub",
      "--data-dir",
      dir,
      "--port",
      String(port),
      "--log-level",
      "warn",
      ...o.hubArgs,
    ],
    { LOOM_HUB_TOKEN: "" },
  );
  const c = new JsonClient(url);
  try {
    let registered = false;
    for (;;) {
      if (child.proc.exitCode !== null)
        throw new Error(`hub exited (${child.proc.exitCode}): ${child.stderr().slice(-2000)}`);
      if (performance.now() - t0 > timeoutMs)
        throw new Error(`no claim granted within ${timeoutMs} ms: ${child.stderr().slice(-2000)}`);
      try {
        if (!registered) {
          await c.post("/api/workers/register", registerBody(probeId, 4));
          registered = true;
        }
        const r = await c.post<{ tasks: unknown[] }>("/api/tasks/claim", {
          worker_id: probeId,
          limit: 1,
          lease_seconds: 600,
        });
        if (r.tasks.length) return { child, url, firstClaimMs: performance.now() - t0 };
      } catch {
        // Not listening yet, or not ready: knock again shortly.
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  } catch (e) {
    await stop(child);
    throw e;
  } finally {
    c.close();
  }
}

export const coldStartScenario: Scenario = {
  name: "coldstart",
  summary:
    "time from spawning `loom hub` on 200,000 tasks to the first granted claim, after a clean stop and after SIGKILL",
  async run(o) {
    const { tasks, workers } = scaleSizes(o.quick);
    const dir = await scaleDataDir(tasks, workers);
    const timeout = o.quick ? 60_000 : 300_000;
    const first = await spawnUntilClaim(dir, o, "cold-probe-1", timeout);
    await stop(first.child); // clean stop (SIGTERM)
    const clean = await spawnUntilClaim(dir, o, "cold-probe-2", timeout);
    await stop(clean.child, "SIGKILL");
    const killed = await spawnUntilClaim(dir, o, "cold-probe-3", timeout);
    await stop(killed.child);
    const t: Table = {
      scenario: "coldstart",
      title: `cold start on ${tasks.toLocaleString("en")} queued tasks and ${workers.toLocaleString("en")} workers`,
      columns: ["start", "spawn → first granted claim"],
      rows: [
        ["first start on the data dir", cell(first.firstClaimMs, "ms")],
        ["restart after a clean stop (SIGTERM)", cell(clean.firstClaimMs, "ms")],
        ["restart after SIGKILL", cell(killed.firstClaimMs, "ms")],
      ],
      notes: ["target: ≤ 5 s after a restart or a SIGKILL, 200,000 tasks"],
    };
    return [t];
  },
};

export const rssScenario: Scenario = {
  name: "rss",
  summary: "the Hub's resident memory (VmRSS) holding 200,000 tasks",
  async run(o) {
    const { tasks, workers } = scaleSizes(o.quick);
    const dir = await scaleDataDir(tasks, workers);
    const s = await spawnUntilClaim(dir, o, "rss-probe", o.quick ? 60_000 : 300_000);
    try {
      const atClaim = rssMb(s.child.pid);
      // The highest reading while the workers go live and the conditions converge, not only the end's.
      let peak = atClaim;
      const sampler = setInterval(() => {
        try {
          peak = Math.max(peak, rssMb(s.child.pid));
        } catch {
          // The Hub exited: the wait below fails and says so.
        }
      }, 250);
      let quiet: Awaited<ReturnType<typeof waitQuiet>>;
      const quietMs = o.quick ? 500 : 10_000;
      let beats: ReturnType<typeof keepHeartbeating> | undefined;
      try {
        await heartbeatAll(s.url, workers);
        beats = keepHeartbeating(s.url, workers, HEARTBEAT_EVERY_MS);
        const c = new JsonClient(s.url);
        // As the conditions scenario waits: converging over 200,000 tasks takes minutes, and a
        // shorter silence can fall between two batches of the conditions pass.
        quiet = await waitQuiet(c, quietMs, o.quick ? 30_000 : 600_000);
        c.close();
      } finally {
        clearInterval(sampler);
        await beats?.stop();
      }
      const settled = rssMb(s.child.pid);
      peak = Math.max(peak, settled);
      return [
        {
          scenario: "rss",
          title: `Hub resident memory, ${tasks.toLocaleString("en")} tasks, ${workers.toLocaleString("en")} workers`,
          columns: ["when", "VmRSS"],
          rows: [
            ["at the first granted claim after start", cell(atClaim, "MB")],
            [
              `workers live and heartbeating, conditions converged${quiet.settled ? "" : " (not quiet: timed out)"}`,
              cell(settled, "MB"),
            ],
            ["highest while the workers went live and the conditions converged", cell(peak, "MB")],
          ],
          notes: [
            "target: ≤ 500 MB at 200,000 tasks",
            `VmRSS of the Hub's process, read every 250 ms; converged: ${quietMs / 1000} s without a write, the workers heartbeating every ${HEARTBEAT_EVERY_MS / 1000} s`,
          ],
        },
      ];
    } finally {
      await stop(s.child);
    }
  },
};
