// The lease-expiry controller: a lease ends at its own lease_until, woken by a delayed
// requeue of its task's key (no sweep over all tasks), decided from the stored lease_until
// (never early by the clock of whoever runs it), and a second reconcile changes nothing.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Controller } from "../../src/reconciler/controller.ts";
import { LeaseExpiry } from "../../src/reconciler/lease-expiry.ts";
import type { LoomEvent } from "../../src/resources/meta.ts";
import type { Task } from "../../src/resources/types.ts";
import { SchedulerContext } from "../../src/scheduler/context.ts";
import { controllerServices } from "../../src/scheduler/controller-services.ts";
import { ClaimQueue } from "../../src/scheduler/queue.ts";
import { RENEWAL_KIND, renewalCheck, type TaskLease } from "../../src/scheduler/renewal.ts";
import { renew } from "../../src/scheduler/transitions.ts";
import { Informer } from "../../src/store/cache.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject } from "../../src/store/store.ts";
import { eventually } from "../support/hub.ts";

const A = "loom.dev/v1alpha1";
let dir: string;
let store: Store;
let cache: Informer;
let events: LoomEvent[];
let clock: number;
let stopAll: (() => Promise<void>)[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-lease-"));
  store = openSqliteStore(join(dir, "loom.db"));
  cache = new Informer(store, ["Worker", "Task"]);
  events = [];
  clock = Date.parse("2030-01-01T00:00:00Z");
  await store.create({
    apiVersion: A,
    kind: "Worker",
    metadata: { name: "w" },
    spec: {
      max_concurrency: 4,
      initial_concurrency: 4,
      capabilities: [],
      resource_capacity: { cpu_millis: 4000, memory_mb: 4096, disk_mb: 1000, gpu_count: 0 },
    },
  });
});
afterEach(async () => {
  for (const s of stopAll) await s();
  stopAll = [];
  cache.stop();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

/** A task leased to w until `until` (ms), on its first attempt of `maxAttempts`. */
async function leased(name: string, until: number, maxAttempts = 3): Promise<void> {
  const at = new Date(until - 60_000).toISOString();
  await store.create({
    apiVersion: A,
    kind: "Task",
    metadata: { name },
    spec: {
      required_capability: "",
      execution_profile: { placement: "shared", resources: { cpu_millis: 100 } },
      payload: {},
      retry_policy: { max_attempts: maxAttempts },
    },
    status: {
      state: "leased",
      attempt: 1,
      lease: { worker: "w", epoch: 1, mode: "pull", leased_at: at, lease_until: new Date(until).toISOString() },
    },
  });
}

function context(now: () => number): SchedulerContext {
  return new SchedulerContext(
    store,
    cache,
    { heartbeatGraceSeconds: 60, defaultMaxAttempts: 3, resultsDir: join(dir, "results") },
    { now, recordEvent: (e) => events.push(e) },
  );
}
/** The lease controller over this context, as the Hub builds it. */
const expiry = (ctx: SchedulerContext) => new LeaseExpiry(controllerServices(ctx, new ClaimQueue()));
const task = (name: string) => cache.get<Task & StoredObject>("Task", name)!;

describe("lease expiry by the clock of the stored lease_until", () => {
  it("before lease_until a reconcile writes nothing and asks to look again when it falls due", async () => {
    const ctx = context(() => clock);
    const r = expiry(ctx);
    await leased("t", clock + 90_000);
    await cache.start();
    const rev = await store.revision();
    expect(await r.reconcile("t")).toEqual({ requeueAfterMs: 90_005 });
    expect(await store.revision()).toBe(rev);
    expect(task("t").status?.state).toBe("leased");

    clock += 90_001;
    expect(await r.reconcile("t")).toEqual({ writes: 1 });
    expect(task("t").status).toMatchObject({ state: "retry_queued", attempt: 2 });
    expect(task("t").status?.lease).toBeUndefined();
    expect(events.map((e) => e.reason)).toEqual(["LeaseExpired"]);

    // Twice is harmless: nothing written, no second Event, no further look asked for.
    const after = await store.revision();
    expect(await r.reconcile("t")).toBeUndefined();
    expect(await store.revision()).toBe(after);
    expect(events).toHaveLength(1);
    expect(task("t").status?.attempt).toBe(2);
  });

  it("the last attempt ends lease_expired; a missing task or one without a lease is left alone", async () => {
    const ctx = context(() => clock);
    const r = expiry(ctx);
    await leased("last", clock - 1, 1);
    await store.create({
      apiVersion: A,
      kind: "Task",
      metadata: { name: "idle" },
      spec: { required_capability: "", payload: {} },
      status: { state: "queued", attempt: 1 },
    });
    await cache.start();
    expect(r.keys()).toEqual(["last"]);
    expect(await r.reconcile("last")).toEqual({ writes: 1 });
    expect(task("last").status?.state).toBe("lease_expired");
    expect(await r.reconcile("idle")).toBeUndefined();
    expect(await r.reconcile("gone")).toBeUndefined();
    expect(r.keys()).toEqual([]);
  });

  it("run as a controller, a short lease ends at its lease_until without any sweep, and a renewed one at its new time", async () => {
    const ctx = context(Date.now);
    const r = expiry(ctx);
    const c = new Controller(r, { log: () => {}, resyncMs: 0 }); // no periodic resync: only the delayed requeue
    await cache.start();
    // The informer's Task events queue each key for its lease_until, as the Hub's manager does.
    const off = cache.on((ev) => {
      if (ev.object.kind !== "Task" || ev.type === "DELETED") return;
      const due = r.delayOf(ev.object as unknown as Task);
      if (due !== undefined) c.enqueue(ev.object.metadata.name, due);
    });
    stopAll.push(async () => {
      off();
      await c.stop();
    });
    c.start();

    const until = Date.now() + 400;
    await leased("short", until);
    await leased("renewed", until);
    // Renew one lease before it falls due: its early wake-up finds it not due and looks again later.
    const cur = (await store.get("Task", "renewed"))!;
    const renewedUntil = until + 400;
    await store.updateStatus({
      ...cur,
      status: {
        ...(cur.status as object),
        lease: { ...(cur.status as Task["status"] & object).lease!, lease_until: new Date(renewedUntil).toISOString() },
      },
    });

    const expiredAt = await eventually(
      () => task("short")?.status?.state === "retry_queued" && Date.now(),
      "the short lease to expire",
    );
    expect(expiredAt).toBeGreaterThanOrEqual(until);
    expect(task("renewed").status?.state).toBe("leased");
    const renewedAt = await eventually(
      () => task("renewed")?.status?.state === "retry_queued" && Date.now(),
      "the renewed lease to expire",
    );
    expect(renewedAt).toBeGreaterThanOrEqual(renewedUntil);
    // Each key was looked at a handful of times (its events and its due times), not on every tick of a sweep.
    expect(c.passes).toBeLessThanOrEqual(8);
    expect(
      events
        .filter((e) => e.reason === "LeaseExpired")
        .map((e) => e.object.metadata.name)
        .sort(),
    ).toEqual(["renewed", "short"]);
  });
});

describe("a renew moves a small TaskLease record, never the Task", () => {
  it("renews without rewriting the Task, expires at the renewed time, and a renewal landing during an expiry makes the expiry decide again", async () => {
    cache = new Informer(store, ["Worker", "Task", RENEWAL_KIND]);
    const ctx = context(() => clock);
    const r = expiry(ctx);
    await leased("r", clock + 10_000);
    await cache.start();
    const before = task("r").metadata.resourceVersion;

    const reply = await renew(ctx, { worker_id: "w", task_id: "r", lease_seconds: 60 });
    expect(reply.lease_until).toBe(new Date(clock + 60_000).toISOString());
    await ctx.caughtUp();
    // The Task is untouched: same resourceVersion; the renewal is its own small object.
    expect(task("r").metadata.resourceVersion).toBe(before);
    const rec = cache.get<TaskLease>(RENEWAL_KIND, "r")!;
    expect(rec.spec).toEqual({ worker: "w", epoch: 1, lease_until: reply.lease_until });
    expect(JSON.stringify(rec).length).toBeLessThan(400);

    // Past the granted lease_until but before the renewed one: nothing expires.
    clock += 30_000;
    expect(await r.reconcile("r")).toEqual({ requeueAfterMs: 30_005 });
    expect(task("r").status?.state).toBe("leased");
    // A renew sets the end to now + lease_seconds, as in v1, also when that is sooner.
    const again = await renew(ctx, { worker_id: "w", task_id: "r", lease_seconds: 40 });
    await ctx.caughtUp();
    expect(cache.get<TaskLease>(RENEWAL_KIND, "r")!.spec.lease_until).toBe(again.lease_until);
    expect(again.lease_until).toBe(new Date(clock + 40_000).toISOString());

    // The expiry pins the renewal it read: one written meanwhile (another replica) fails it.
    clock += 40_001;
    const stale = cache.get<TaskLease>(RENEWAL_KIND, "r")!;
    await store.update({ ...stale, spec: { ...stale.spec, lease_until: new Date(clock + 60_000).toISOString() } });
    const t = task("r");
    const refused = await store
      .txn([
        { op: "updateStatus", object: { ...t, status: { ...t.status, state: "retry_queued" } } },
        renewalCheck("r", stale),
      ])
      .then(
        () => "committed",
        (e: Error) => e.message,
      );
    expect(refused).toMatch(/expected resourceVersion/);
    await ctx.caughtUp();
    expect(await r.reconcile("r")).toEqual({ requeueAfterMs: 60_005 });

    // Once the lease ends the stale record goes.
    clock += 60_001;
    expect(await r.reconcile("r")).toEqual({ writes: 1 });
    await ctx.caughtUp();
    expect(task("r").status?.state).toBe("retry_queued");
    expect(await r.reconcile("r")).toEqual({ writes: 1 });
    await ctx.caughtUp();
    expect(cache.get(RENEWAL_KIND, "r")).toBeUndefined();
  });

  it("a renewal whose task is gone is deleted; with no renewal a missing task is left alone", async () => {
    cache = new Informer(store, ["Worker", "Task", RENEWAL_KIND]);
    const ctx = context(() => clock);
    const r = expiry(ctx);
    await leased("doomed", clock + 10_000);
    await cache.start();
    await renew(ctx, { worker_id: "w", task_id: "doomed", lease_seconds: 60 });
    await store.delete("Task", "doomed");
    await ctx.caughtUp();
    expect(cache.get(RENEWAL_KIND, "doomed")).toBeDefined();
    expect(await r.reconcile("doomed")).toEqual({ writes: 1 });
    await ctx.caughtUp();
    expect(cache.get(RENEWAL_KIND, "doomed")).toBeUndefined();
    expect(await r.reconcile("doomed")).toBeUndefined();
  });
});
