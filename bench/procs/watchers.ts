// Watchers for the watch-lag scenario: N NDJSON watches of tasks from one revision on, each
// on its own connection. For sampled tasks each watcher notes when it first saw each
// state. When the parent sends the path of the load generator's acknowledgement times on
// stdin, it prints the lag (receive time minus the time the write was acknowledged to the
// Runner that made it) over every watcher and sampled (task, state).
import http from "node:http";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { nowMs, percentile } from "../lib/stats.ts";
import { taskIndex } from "../lib/workload.ts";

const url = new URL(process.env.LOOM_BENCH_URL!);
const n = Number(process.env.LOOM_BENCH_WATCHERS);
const from = process.env.LOOM_BENCH_FROM!;
const sample = Number(process.env.LOOM_BENCH_SAMPLE);
const prefix = process.env.LOOM_BENCH_PREFIX!;
const NAME = `"name":"${prefix}-`;

/** (task|state) -> first receive time per watcher (NaN until seen). */
const seen = new Map<string, Float64Array>();
let lines = 0;
let errors = 0;
const requests: http.ClientRequest[] = [];

function onLine(i: number, line: string, at: number): void {
  lines++;
  const k = line.indexOf(NAME);
  if (k < 0) return;
  const name = line.slice(k + 8, line.indexOf('"', k + 8));
  if (taskIndex(name) % sample !== 0) return;
  const ev = JSON.parse(line) as { type: string; object: { status?: { state?: string } } };
  if (ev.type === "ERROR") {
    errors++;
    return;
  }
  const key = `${name}|${ev.object.status?.state}`;
  let row = seen.get(key);
  if (!row) seen.set(key, (row = new Float64Array(n).fill(NaN)));
  if (Number.isNaN(row[i])) row[i] = at;
}

let connected = 0;
await new Promise<void>((resolve, reject) => {
  for (let i = 0; i < n; i++) {
    const req = http.get(
      {
        host: url.hostname,
        port: Number(url.port),
        path: `/apis/loom.dev/v1alpha1/tasks?watch=1&resourceVersion=${from}`,
        agent: false,
      },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`watch ${i}: HTTP ${res.statusCode}`));
        if (++connected === n) resolve();
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => {
          const at = nowMs();
          const parts = (buf + d).split("\n");
          buf = parts.pop()!;
          for (const l of parts) onLine(i, l, at);
        });
        res.on("error", () => {});
      },
    );
    req.on("error", (e) => {
      if (connected < n) reject(e);
    });
    requests.push(req);
  }
});
process.stdout.write("READY\n");

const acksFile = await new Promise<string>((resolve) =>
  createInterface({ input: process.stdin }).once("line", (l) => resolve(l.trim())),
);
for (const r of requests) r.destroy();
const acks = JSON.parse(readFileSync(acksFile, "utf8")) as Record<string, number>;
const lags: number[] = [];
let missing = 0;
for (const [key, ackAt] of Object.entries(acks)) {
  const row = seen.get(key);
  for (let i = 0; i < n; i++) {
    const at = row ? row[i] : NaN;
    if (Number.isNaN(at)) missing++;
    else lags.push(at - ackAt);
  }
}
process.stdout.write(
  `RESULT ${JSON.stringify({ watchers: n, lines, errors, deliveries: lags.length, missing, p50: percentile(lags, 50), p99: percentile(lags, 99), max: percentile(lags, 100) })}\n`,
);
