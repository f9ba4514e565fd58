// The stall probe: GET /api/healthz every few milliseconds on one keep-alive connection,
// from its own process. The longest time between two answers bounds the Hub's longest
// event-loop stall from the outside (no instrumentation inside the Hub). Stops on a line
// on stdin and prints one RESULT line.
import { createInterface } from "node:readline";
import { JsonClient } from "../lib/http.ts";
import { percentile } from "../lib/stats.ts";

const url = process.env.LOOM_BENCH_URL!;
const everyMs = Number(process.env.LOOM_BENCH_PROBE_MS ?? 5);
const c = new JsonClient(url);
let stopping = false;
createInterface({ input: process.stdin }).once("line", () => { stopping = true; });

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
process.stdout.write(`RESULT ${JSON.stringify({ probes: latencies.length, failures, longestGapMs: longestGap, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: percentile(latencies, 100) })}\n`);
