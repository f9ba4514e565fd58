// The load generator: W simulated pull Runners in one process, each on its own keep-alive
// connection. Each registers, then loops claim(limit) -> start -> complete per task (noop,
// nothing executed) until every task of the run is complete. It prints READY once
// registered, waits for GO on stdin (so the parent can read the server's CPU time at the
// start), then prints one RESULT line.
import { writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { JsonClient } from "../lib/http.ts";
import { nowMs, percentile } from "../lib/stats.ts";
import { registerBody, taskIndex, WARM_CLAIMS } from "../lib/workload.ts";

export type LoadConfig = {
  url: string;
  /** Several Hub replicas: Runner i talks to urls[i % urls.length] (default: [url]). */
  urls?: string[];
  runners: number;
  claimLimit: number;
  /** Tasks in the run: the load stops when this many are complete. */
  tasks: number;
  /** Write the acknowledgement time of every (task, state) of sampled tasks here (watch lag). */
  acksFile?: string;
  /** Record acks for tasks whose index is a multiple of this. */
  ackSample?: number;
};

export type LoadResult = {
  wallMs: number;
  leases: number;
  claims: number;
  emptyClaims: number;
  claimP50: number;
  claimP99: number;
  claimMax: number;
  /** The claims' p99 without each Runner's first WARM_CLAIMS (the server's code still cold). */
  claimP99Warm: number;
  /** CPU seconds this load generator used over the load: it shares the machine's cores with the server. */
  cpuS: number;
};

const cfg = JSON.parse(process.env.LOOM_BENCH_LOAD!) as LoadConfig;
const urls = cfg.urls?.length ? cfg.urls : [cfg.url];
const clients = Array.from({ length: cfg.runners }, (_, i) => new JsonClient(urls[i % urls.length]));
const ids = clients.map((_, i) => `bench-runner-${String(i).padStart(3, "0")}`);
await Promise.all(clients.map((c, i) => c.post("/api/workers/register", registerBody(ids[i], cfg.claimLimit))));

process.stdout.write("READY\n");
await new Promise<void>((resolve) => createInterface({ input: process.stdin }).once("line", () => resolve()));

const claimLat: number[] = [];
const warmLat: number[] = [];
const acks: Record<string, number> = {};
const sample = cfg.ackSample ?? 0;
const ack = (task: string, state: string) => {
  if (cfg.acksFile && taskIndex(task) % sample === 0) acks[`${task}|${state}`] = nowMs();
};
let completed = 0;
let leases = 0;
let emptyClaims = 0;

async function runner(i: number): Promise<void> {
  const c = clients[i];
  const worker_id = ids[i];
  let claims = 0;
  while (completed < cfg.tasks) {
    const t0 = performance.now();
    const r = await c.post<{ tasks: { task_id: string }[] }>("/api/tasks/claim", {
      worker_id,
      limit: cfg.claimLimit,
      lease_seconds: 600,
    });
    claimLat.push(performance.now() - t0);
    if (++claims > WARM_CLAIMS) warmLat.push(performance.now() - t0);
    if (!r.tasks.length) {
      emptyClaims++;
      // Others still hold the last tasks; ask again shortly.
      await new Promise((res) => setTimeout(res, 5));
      continue;
    }
    leases += r.tasks.length;
    for (const t of r.tasks) ack(t.task_id, "leased");
    for (const t of r.tasks) {
      await c.post("/api/tasks/start", { worker_id, task_id: t.task_id });
      ack(t.task_id, "running");
      await c.post("/api/tasks/complete", { worker_id, task_id: t.task_id, result: {}, upload: {} });
      ack(t.task_id, "returned");
      completed++;
    }
  }
}

const start = performance.now();
const cpu0 = process.cpuUsage();
await Promise.all(clients.map((_, i) => runner(i)));
const wallMs = performance.now() - start;
const used = process.cpuUsage(cpu0);
for (const c of clients) c.close();
if (cfg.acksFile) writeFileSync(cfg.acksFile, JSON.stringify(acks));
const out: LoadResult = {
  wallMs,
  leases,
  claims: claimLat.length,
  emptyClaims,
  claimP50: percentile(claimLat, 50),
  claimP99: percentile(claimLat, 99),
  claimMax: percentile(claimLat, 100),
  claimP99Warm: percentile(warmLat, 99),
  cpuS: (used.user + used.system) / 1e6,
};
process.stdout.write(`RESULT ${JSON.stringify(out)}\n`);
