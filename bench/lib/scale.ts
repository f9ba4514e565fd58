// Data directories at scale (e.g. 200,000 queued tasks and 2,000 workers), written once per
// `npm run bench` through the store's bulk transactions. Each scenario starts its Hub on a
// fresh copy, so what one Hub wrote (conditions, leases) never changes what the next
// scenario measures, whatever the order.
import { cpSync, rmSync } from "node:fs";
import { join } from "node:path";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { JsonClient } from "./http.ts";
import { tempDir } from "./hub.ts";
import { bulkCreate, seedTask, seedWorker, workerName } from "./seed.ts";

const made = new Map<string, Promise<string>>();
const copies: string[] = [];

/** A fresh data dir holding `tasks` queued tasks (10 shapes) and `workers` declared workers, as no Hub has seen it yet. */
export async function scaleDataDir(tasks: number, workers: number): Promise<string> {
  const template = await scaleTemplate(tasks, workers);
  const dir = tempDir(`scale-${tasks}x${workers}-copy`);
  cpSync(template, dir, { recursive: true });
  copies.push(dir);
  return dir;
}

function scaleTemplate(tasks: number, workers: number): Promise<string> {
  const key = `${tasks}x${workers}`;
  let p = made.get(key);
  if (!p) {
    p = (async () => {
      const dir = tempDir(`scale-${key}`);
      const store = openSqliteStore(join(dir, "loom.db"));
      await bulkCreate(store, workers, seedWorker, 1000);
      await bulkCreate(store, tasks, (i) => seedTask(i, 10));
      await store.close();
      return dir;
    })();
    made.set(key, p);
  }
  return p;
}

export async function removeScaleDataDirs(): Promise<void> {
  for (const p of made.values()) rmSync(await p.catch(() => ""), { recursive: true, force: true });
  for (const d of copies.splice(0)) rmSync(d, { recursive: true, force: true });
  made.clear();
}

/** Heartbeat workers 0..n-1 so the Hub sees them live (liveness is not stored). */
export async function heartbeatAll(url: string, n: number, parallel = 16): Promise<void> {
  const clients = Array.from({ length: parallel }, () => new JsonClient(url));
  let next = 0;
  await Promise.all(
    clients.map(async (c) => {
      for (let i; (i = next++) < n;)
        await c.post("/api/workers/heartbeat", {
          worker_id: workerName(i),
          current_runs: [],
          health: { phase: "idle" },
        });
      c.close();
    }),
  );
}

/**
 * Heartbeat workers 0..n-1 again every `everyMs` until `stop`, as live Runners do on every
 * loop: a fleet that heartbeated once falls out of the Hub's grace (120 s) and every queued
 * task's conditions are rewritten. A round that fails (the Hub stopping under it) is ignored.
 */
export function keepHeartbeating(url: string, n: number, everyMs: number): { stop: () => Promise<void> } {
  let stopped = false;
  let round: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | undefined;
  const next = () => {
    timer = setTimeout(() => {
      round = heartbeatAll(url, n).catch(() => {});
      void round.then(() => (stopped ? undefined : next()));
    }, everyMs);
  };
  next();
  return {
    stop: async () => {
      stopped = true;
      clearTimeout(timer);
      await round;
    },
  };
}

/** A loopback port nobody listens on right now (for a Hub whose address must be known before it starts). */
export { freePort } from "../../test/support/etcd.ts";
