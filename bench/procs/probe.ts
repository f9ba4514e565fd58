// The stall probe: GET /api/healthz every few milliseconds on one keep-alive connection,
// from its own process. The longest time between two answers bounds the Hub's longest
// event-loop stall from the outside (no instrumentation inside the Hub). With
// LOOM_BENCH_PROBE_WORKER set it also claims one task as that worker every
// LOOM_BENCH_CLAIM_MS on a second connection, and runs it to completion (start, complete): the
// claim latency a Runner sees while the Hub is busy. Stops on a line on stdin and prints one
// RESULT line.
import { createInterface } from "node:readline";
import { JsonClient } from "../lib/http.ts";
import { percentile } from "../lib/stats.ts";

const url = process.env.LOOM_BENCH_URL!;
const everyMs = Number(process.env.LOOM_BENCH_PROBE_MS ?? 5);
const c = new JsonClient(url);
let stopping = false;
createInterface({ input: process.stdin }).once("line", () => {
  stopping = true;
});

const worker = process.env.LOOM_BENCH_PROBE_WORKER;
const claimEveryMs = Number(process.env.LOOM_BENCH_CLAIM_MS ?? 20);
// Claiming stops after this long, so that the Hub can fall quiet while the probe goes on.
const claimForMs = Number(process.env.LOOM_BENCH_CLAIM_FOR_MS ?? Infinity);
const claimStart = performance.now();
const claims: number[] = [];
let claimFailures = 0;
const claiming = (async () => {
  if (!worker) return;
  const cc = new JsonClient(url);
  while (!stopping && performance.now() - claimStart < claimForMs) {
    const sent = performance.now();
    try {
      const r = await cc.post<{ tasks: { task_id: string }[] }>("/api/tasks/claim", {
        worker_id: worker,
        limit: 1,
        lease_seconds: 600,
      });
      claims.push(performance.now() - sent);
      for (const t of r.tasks ?? []) {
        await cc.post("/api/tasks/start", { worker_id: worker, task_id: t.task_id });
        await cc.post("/api/tasks/complete", { worker_id: worker, task_id: t.task_id, result: {}, upload: {} });
      }
    } catch {
      claimFailures++;
    }
    const wait = claimEveryMs - (performance.now() - sent);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  cc.close();
})();

const latencies: number[] = [];
let longestGap = 0;
let last = performance.now();
let failures = 0;
while (!stopping) {
  const sent = performance.now();
  try {
    await c.get("/api/healthz");
  } catch {
    failures++;
  }
  const now = performance.now();
  latencies.push(now - sent);
  longestGap = Math.max(longestGap, now - last);
  last = now;
  const wait = everyMs - (performance.now() - sent);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
c.close();
await claiming;
const claim = worker
  ? { claims: claims.length, claimFailures, claimP50: percentile(claims, 50), claimP99: percentile(claims, 99) }
  : {};
process.stdout.write(
  `RESULT ${JSON.stringify({ probes: latencies.length, failures, longestGapMs: longestGap, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: percentile(latencies, 100), ...claim })}\n`,
);
