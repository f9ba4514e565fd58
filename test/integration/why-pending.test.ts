// "Why pending" over real HTTP against a real Hub: hand-made states whose queue positions,
// blocking leases and suggestions are worked out by hand in the comments.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Json = Record<string, any>;
let h: TestHub;
beforeEach(async () => {
  h = await startHub();
});
afterEach(async () => {
  await h.close();
});

const mem = (memory_mb: number) => ({ placement: "shared", resources: { memory_mb } });
const task = (task_id: string, memory_mb: number, extra: Json = {}) => ({
  task_id,
  required_capability: "",
  payload: { runner: "noop", timeout_seconds: 600 },
  execution_profile: mem(memory_mb),
  ...extra,
});

async function ok(path: string, body: unknown): Promise<Json> {
  const r = await post(h.url, path, body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}
const dispatch = (tasks: Json[]) => ok("/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
async function admission(id: string): Promise<Json> {
  const r = await get(h.url, `/api/data/task-admission?task_id=${id}`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

/**
 * w1: 8192 MB, holding a1 (3000 MB, declares 100 s), a2 (3000, 300 s), a3 (1000, 50 s): 1192 free.
 * w2: 2048 MB, empty and not claiming. Both offer only the capability linux.
 * Queued, in claim order: t3-high (prio 5, 6000), t1-early (4000), t2-big (4000),
 * plus t4-nocap (prio 9, needs a capability nobody has) and t5-huge (prio 9, 100000 MB).
 * The leases have priority 5, so t3-high outranks none of them and nominates no worker
 * (nomination.test.ts covers that): the answers here are admission's alone.
 */
async function setUp(): Promise<void> {
  await ok("/api/workers/register", registerBody("w1", { capabilities: ["linux"] }));
  await ok(
    "/api/workers/register",
    registerBody("w2", {
      capabilities: ["linux"],
      health: { hostname: "w2", resources: { cpu_count: 4, mem_available_mb: 2048, disk_available_mb: 50_000 } },
    }),
  );
  await dispatch([
    task("a1", 3000, { priority: 5, payload: { runner: "noop", timeout_seconds: 100 } }),
    task("a2", 3000, { priority: 5, payload: { runner: "noop", timeout_seconds: 300 } }),
    task("a3", 1000, {
      priority: 5,
      payload: {
        runner: "noop",
        phases: [
          { name: "p", command: "true", timeout_seconds: 20 },
          { name: "q", command: "true", timeout_seconds: 30 },
        ],
      },
    }),
  ]);
  const c = await ok("/api/tasks/claim", { worker_id: "w1", limit: 10, lease_seconds: 600 });
  expect(c.tasks.map((t: Json) => t.task_id).sort()).toEqual(["a1", "a2", "a3"]);
  await dispatch([
    task("t1-early", 4000),
    task("t2-big", 4000),
    task("t3-high", 6000, { priority: 5 }),
    task("t4-nocap", 10, { priority: 9, required_capability: "quantum" }),
    task("t5-huge", 100_000, { priority: 9 }),
  ]);
}

const w1Until = (adm: Json) => adm.workers.find((w: Json) => w.worker_id === "w1").blocking_until;

describe("task-admission: why a queued task is pending", () => {
  it("queue_position counts the tasks ahead that compete for the same workers, and names the higher-priority ones", async () => {
    await setUp();
    const big = await admission("t2-big");
    // Ahead of t2-big: t3-high (priority) and t1-early (same priority, earlier). t4-nocap and
    // t5-huge outrank it but can run on no worker it could, so they do not compete.
    expect(big.queue_position).toBe(3);
    expect(big.higher_priority_ahead).toEqual(["t3-high"]);
    expect(big.higher_priority_ahead_count).toBe(1);
    expect((await admission("t3-high")).queue_position).toBe(1);
    expect((await admission("t1-early")).queue_position).toBe(2);
    expect((await admission("t4-nocap")).queue_position).toBe(1);
    // A leased task has no place in the queue.
    expect((await admission("a1")).queue_position).toBeNull();

    const all = await get(h.url, "/api/data/queue-positions");
    expect(all.body.positions).toEqual({ "t3-high": 1, "t1-early": 2, "t2-big": 3, "t4-nocap": 1, "t5-huge": 1 });
  });

  it("blocking_leases is the smallest set of leases whose release lets the task fit, with the time they should take", async () => {
    await setUp();
    const big = await admission("t2-big");
    const w1 = big.workers.find((w: Json) => w.worker_id === "w1");
    // Greedy releases a3 (ends first, 50 s) then a1 (100 s): 5192 free. Putting a3 back
    // still leaves 4192 >= 4000, so only a1 is needed.
    expect(w1.blocking_leases.map((l: Json) => l.task)).toEqual(["a1"]);
    const a1 = w1.blocking_leases[0];
    expect(a1.declared_seconds).toBe(100);
    expect(Date.parse(a1.ends_at) - Date.parse(a1.since)).toBe(100_000);
    expect(w1.blocking_until).toBe(a1.ends_at);
    // w2 is too small even empty: no lease is to blame there.
    expect(big.workers.find((w: Json) => w.worker_id === "w2").blocking_leases).toBeUndefined();

    // 6000 MB needs a1 and a2 gone; a3 (1000) can stay: 7192 free.
    const high = (await admission("t3-high")).workers.find((w: Json) => w.worker_id === "w1");
    expect(high.blocking_leases.map((l: Json) => l.task).sort()).toEqual(["a1", "a2"]);
    const a2 = high.blocking_leases.find((l: Json) => l.task === "a2");
    expect(high.blocking_until).toBe(a2.ends_at);
    expect(Date.parse(a2.ends_at) - Date.parse(a2.since)).toBe(300_000);
    const early = await admission("t1-early");
    expect(early.workers.find((w: Json) => w.worker_id === "w1").blocking_leases.map((l: Json) => l.task)).toEqual([
      "a1",
    ]);

    // An exclusive task needs every lease gone, listed soonest-ending first; a3's run time
    // is the sum of its phases' (20 + 30 s).
    await dispatch([task("t7-excl", 0, { execution_profile: { placement: "exclusive", resources: {} } })]);
    const excl = (await admission("t7-excl")).workers.find((w: Json) => w.worker_id === "w1");
    expect(excl.blocking_leases.map((l: Json) => [l.task, l.declared_seconds])).toEqual([
      ["a3", 50],
      ["a1", 100],
      ["a2", 300],
    ]);
    expect(excl.blocking_until).toBe(a2.ends_at);
  });

  it("suggestions for a task that fits nowhere: the smallest request that fits now, and where it fits once leases end; both verified", async () => {
    await setUp();
    const big = await admission("t2-big");
    expect(big.eligible_worker_count).toBe(0);
    // Lowering memory to w1's 1192 free is a 70% cut; to w2's 2048 (empty) a 49% cut.
    const req = big.suggestions.find((s: Json) => s.kind === "request");
    expect(req).toMatchObject({ worker: "w2", resources: { memory_mb: 2048 } });
    const later = big.suggestions.find((s: Json) => s.kind === "empty_worker");
    expect(later).toMatchObject({ worker: "w1" });
    expect(later.until).toBe(w1Until(big));

    // The request suggestion really fits: dispatch a task with it and see w2 admit it.
    await dispatch([task("t6-smaller", 0, { execution_profile: { placement: "shared", resources: req.resources } })]);
    const smaller = await admission("t6-smaller");
    expect(smaller.workers.find((w: Json) => w.worker_id === "w2").ok).toBe(true);

    // A task that can never fit anywhere gets no suggestion that is not a fit.
    const huge = await admission("t5-huge");
    expect(huge.suggestions.find((s: Json) => s.kind === "empty_worker")).toBeUndefined();
    expect(huge.suggestions.find((s: Json) => s.kind === "request")).toMatchObject({
      worker: "w2",
      resources: { memory_mb: 2048 },
    });
  });
});

describe("POST /api/simulate: the same admission over a copy of the state, nothing written", () => {
  const simulate = (changes: Json) => post(h.url, "/api/simulate", changes);
  const placed = (r: { body: Json }) => r.body.admitted.map((p: Json) => [p.order, p.task, p.worker]);

  it("reports what each change would admit, where and in order, and leaves the store revision unchanged", async () => {
    await setUp();
    // Let the background condition writes finish: the revision is stable for a second.
    let rev = await h.hub.store.revision();
    for (;;) {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await h.hub.store.revision();
      if (now === rev) break;
      rev = now;
    }

    const none = await simulate({});
    expect(none.status).toBe(200);
    expect(none.body).toEqual({ admitted: [], queued_before: 5, still_queued: 5, baseline_admitted: 0 });

    // Cancelling a1 frees 3000 MB on w1 (4192 free): t3-high (6000) still does not fit,
    // t1-early (4000) does; then t2-big finds 192 MB left.
    const cancel = await simulate({ cancel_tasks: ["a1"] });
    expect(placed(cancel)).toEqual([[1, "t1-early", "w1"]]);
    expect(cancel.body.still_queued).toBe(4);

    // A new 16 GB worker takes the three that fit it, in claim order.
    const add = await simulate({
      add_workers: [
        {
          worker_id: "w3",
          initial_concurrency: 4,
          max_concurrency: 4,
          capabilities: ["linux"],
          resource_capacity: { cpu_millis: 8000, memory_mb: 16384, disk_mb: 50000 },
        },
      ],
    });
    expect(add.status, JSON.stringify(add.body)).toBe(200);
    expect(placed(add)).toEqual([
      [1, "t3-high", "w3"],
      [2, "t1-early", "w3"],
      [3, "t2-big", "w3"],
    ]);

    // More memory on w2 and a smaller t5-huge: t5-huge (priority 9) goes first, to w1.
    const edit = await simulate({
      workers: { w2: { resource_capacity: { memory_mb: 4096 } } },
      tasks: { "t5-huge": { execution_profile: { resources: { memory_mb: 1000 } } } },
    });
    expect(placed(edit)).toEqual([
      [1, "t5-huge", "w1"],
      [2, "t1-early", "w2"],
    ]);

    // Concurrency 1 on w1 (3 leases held) and w2 removed: nothing fits.
    const conc = await simulate({
      workers: { w1: { max_concurrency: 1 } },
      remove_workers: ["w2"],
      cancel_tasks: ["a1", "a2"],
    });
    expect(placed(conc)).toEqual([]);
    // ... while cancelling all three of w1's leases empties it: 8192 MB for t3-high, then 2192 left.
    const empty = await simulate({ cancel_tasks: ["a1", "a2", "a3"] });
    expect(placed(empty)).toEqual([[1, "t3-high", "w1"]]);

    // Bad input names the field and the reason.
    const bad = await Promise.all([
      simulate({ remove_workers: ["nope"] }),
      simulate({ frobnicate: 1 }),
      simulate({ workers: { w1: { max_concurrency: 0 } } }),
      simulate({ tasks: { a1: { execution_profile: { resources: {} } } } }),
      simulate({ add_workers: [{ max_concurrency: 2 }] }),
    ]);
    expect(bad.map((r) => [r.status, r.body.field])).toEqual([
      [400, "remove_workers[0]"],
      [400, "frobnicate"],
      [400, "workers.w1.max_concurrency"],
      [400, "tasks.a1"],
      [400, "add_workers.workers[0].worker_id"],
    ]);
    expect(await h.hub.store.revision()).toBe(rev);
    // And the real state is as it was: a1 still leased, t1-early still queued.
    expect((await admission("t1-early")).state).toBe("queued");
    expect((await admission("a1")).state).toBe("leased");
  });
});

describe("Events on change only", () => {
  const eventsOf = async (name: string): Promise<Json[]> =>
    (await get(h.url, `/apis/loom.dev/v1alpha1/events?fieldSelector=involvedObject.name=${name}`)).body.items.filter(
      (e: Json) => e.reason === "NotAdmitted" || e.reason === "Admissible",
    );
  const settle = async () => {
    for (let stable = 0, rev = -1; stable < 3;) {
      await new Promise((r) => setTimeout(r, 600));
      const now = await h.hub.store.revision();
      stable = now === rev ? stable + 1 : 0;
      rev = now;
    }
  };

  it("a task's NotAdmitted Event is recorded when its reason or shortfall changes, never as a repeat", async () => {
    await setUp();
    await settle();
    const first = await eventsOf("t2-big");
    expect(first.map((e) => e.reason)).toEqual(["NotAdmitted"]);
    expect(first[0].message).toMatch(
      /^exceeds_worker_capacity: 0\/2 workers admit: .*resource_reservation_unavailable/,
    );

    // Cancelling a3 changes only the numbers on w1 (1192 free -> 2192): no new Event.
    expect((await post(h.url, "/api/admin/cancel-task", { task_id: "a3" })).status).toBe(200);
    await settle();
    expect(await eventsOf("t2-big")).toHaveLength(1);

    // Blocking w2 adds a reason there: news, one Event. Unblocking it: news again.
    expect((await post(h.url, "/api/admin/block-worker", { worker_id: "w2" })).status).toBe(200);
    await settle();
    const second = await eventsOf("t2-big");
    expect(second).toHaveLength(2);
    expect(second.some((e) => /worker_cordoned/.test(e.message))).toBe(true);
    expect((await post(h.url, "/api/admin/unblock-worker", { worker_id: "w2" })).status).toBe(200);
    await settle();
    expect(await eventsOf("t2-big")).toHaveLength(3);
    // Quiet state, passes keep running: still 3.
    await settle();
    expect(await eventsOf("t2-big")).toHaveLength(3);
  });
});
