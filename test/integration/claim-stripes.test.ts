// Claims through several replicas prefer their own stripe of the queue's head, so replicas
// racing for the same tasks rarely pick the same ones; past a small window claim order holds.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Task, Worker } from "../../src/resources/types.ts";
import { pickForWorker, stripeOf } from "../../src/scheduler/claim.ts";
import { Scheduler } from "../../src/scheduler/scheduler.ts";
import { Informer } from "../../src/store/cache.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject } from "../../src/store/store.ts";

const A = "loom.dev/v1alpha1";
let dir: string;
let store: Store;
let cache: Informer;
let scheduler: Scheduler;
/** This replica's place among the replicas, as the Hub would follow it. */
let stripe = { index: 0, count: 1 };

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-stripes-"));
  store = openSqliteStore(join(dir, "loom.db"));
  cache = new Informer(store, ["Worker", "Task"]);
  await store.create({
    apiVersion: A,
    kind: "Worker",
    metadata: { name: "w" },
    spec: {
      max_concurrency: 64,
      initial_concurrency: 64,
      capabilities: [],
      resource_capacity: { cpu_millis: 64_000, memory_mb: 65_536, disk_mb: 1000, gpu_count: 0 },
    },
    status: { registration: { registered_at: new Date().toISOString() } },
  });
  for (let i = 0; i < 60; i++)
    await store.create({
      apiVersion: A,
      kind: "Task",
      metadata: { name: `t${String(i).padStart(3, "0")}` },
      spec: { required_capability: "", payload: {} },
      status: { state: "queued", attempt: 1 },
    });
  scheduler = new Scheduler(
    store,
    cache,
    { heartbeatGraceSeconds: 60, defaultMaxAttempts: 3, resultsDir: join(dir, "results") },
    { stripe: () => stripe },
  );
  stripe = { index: 0, count: 1 };
  await cache.start();
  scheduler.resync();
  scheduler.ctx.liveness.touch("w", Date.now());
});
afterEach(async () => {
  scheduler?.stop();
  cache.stop();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const names = (limit: number) =>
  pickForWorker(scheduler.queue, scheduler.ctx, cache.get<Worker & StoredObject>("Worker", "w")!, limit).picks.map(
    (p) => p.task.metadata.name,
  );
const order = () =>
  cache
    .list<Task & StoredObject>("Task")
    .map((t) => t.metadata.name)
    .sort();

describe("claim stripes across replicas", () => {
  it("one replica takes the head in claim order", () => {
    expect(names(4)).toEqual(order().slice(0, 4));
  });

  it("three replicas each take their own stripe of the head first, all different, and nothing past the window", () => {
    const got = [0, 1, 2].map((index) => {
      stripe = { index, count: 3 };
      return names(4);
    });
    const window = order().slice(0, 4 * 3 * 2);
    for (const [index, picks] of got.entries()) {
      expect(picks).toHaveLength(4);
      for (const n of picks) expect(stripeOf(n, 3)).toBe(index);
      for (const n of picks) expect(window).toContain(n);
      // Within its stripe, claim order still holds.
      expect(picks).toEqual(window.filter((n) => stripeOf(n, 3) === index).slice(0, 4));
    }
    expect(new Set(got.flat()).size).toBe(12);
  });

  it("a stripe nobody claims is taken by the others once it fills the window", () => {
    stripe = { index: 0, count: 3 };
    // Everyone's stripe 0 leased already: only other stripes are left at the head.
    const others = order().filter((n) => stripeOf(n, 3) !== 0);
    for (const n of order().filter((n) => stripeOf(n, 3) === 0)) scheduler.queue.remove(n);
    expect(names(4)).toEqual(others.slice(0, 4));
  });
});
