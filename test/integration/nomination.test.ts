// Starvation: one worker runs a continuous stream of short shared tasks and one exclusive
// task needs it. Without nomination the worker is never empty, so the exclusive task never
// starts; with it, the worker is held after the threshold and the task starts once the
// leases it waits on end, while the small work flows to the other worker.
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "../../src/cli/client.ts";
import { describe as describeObject } from "../../src/cli/describe.ts";
import { resolveKind } from "../../src/cli/kinds.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";
import { ALL } from "../../src/reconciler/controller.ts";

type Json = Record<string, any>;
let h: TestHub;
afterEach(async () => {
  await h?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RUN_MS = 300;
const TICK_MS = 150;

/**
 * Drives the stream for up to `ms`: every tick one short task (declares 1 s) is dispatched,
 * each worker completes what has run RUN_MS and claims. Returns when `big` is leased, with
 * when that happened and which short tasks each worker took meanwhile.
 */
async function stream(ms: number, bigAfterMs: number) {
  const t0 = Date.now();
  let dispatchedAt: number | undefined;
  let nominated: string | null = null;
  let nominatedAt: number | undefined;
  let shown: { task: string; worker: string } | undefined;
  const running = new Map<string, { worker: string; at: number; attempt: number }>();
  const took: Record<string, { task: string; at: number }[]> = { w1: [], w2: [] };
  let bigAt: number | undefined;
  let n = 0;
  while (Date.now() - t0 < ms && bigAt === undefined) {
    const now = Date.now();
    if (dispatchedAt === undefined && now - t0 >= bigAfterMs) {
      await dispatchBig();
      dispatchedAt = Date.now();
    }
    if (dispatchedAt !== undefined && !nominated) {
      nominated = (await get(h.url, "/api/data/task-admission?task_id=big")).body.nominated_worker;
      if (nominated) {
        nominatedAt = Date.now();
        const c = new Client({ controller: h.url });
        shown = {
          task: await describeObject(c, resolveKind("task"), "big"),
          worker: await describeObject(c, resolveKind("worker"), "w1"),
        };
      }
    }
    expect(
      (
        await post(h.url, "/api/tasks/dispatch", {
          schema_version: 1,
          tasks: [
            { task_id: `s${n++}`, required_capability: "linux", payload: { runner: "noop", timeout_seconds: 1 } },
          ],
        })
      ).status,
    ).toBe(201);
    for (const worker of ["w1", "w2"]) {
      for (const [id, r] of running)
        if (r.worker === worker && now - r.at >= RUN_MS) {
          expect(
            (await post(h.url, "/api/tasks/complete", { worker_id: worker, task_id: id, attempt_no: r.attempt }))
              .status,
          ).toBe(200);
          running.delete(id);
        }
      const c = await post(h.url, "/api/tasks/claim", { worker_id: worker, limit: 2, lease_seconds: 60 });
      for (const t of c.body.tasks as Json[]) {
        if (t.task_id === "big") bigAt = Date.now();
        else {
          running.set(t.task_id, { worker, at: Date.now(), attempt: t.attempt_no });
          took[worker].push({ task: t.task_id, at: Date.now() });
        }
      }
    }
    await sleep(TICK_MS);
  }
  return { dispatchedAt, bigAt, nominated, nominatedAt, took, shown };
}

async function setUp(nominateAfterSeconds: number) {
  h = await startHub({ nominateAfterSeconds, heartbeatGraceSeconds: 3600 });
  // Only w1 can run the exclusive task; both run the short ones (w1 two at a time, w2 four).
  expect(
    (
      await post(
        h.url,
        "/api/workers/register",
        registerBody("w1", { capabilities: ["linux", "big"], max_concurrency: 2, initial_concurrency: 2 }),
      )
    ).status,
  ).toBe(200);
  expect(
    (
      await post(
        h.url,
        "/api/workers/register",
        registerBody("w2", { capabilities: ["linux"], max_concurrency: 4, initial_concurrency: 4 }),
      )
    ).status,
  ).toBe(200);
}

const dispatchBig = async () =>
  expect(
    (
      await post(h.url, "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [
          {
            task_id: "big",
            required_capability: "big",
            execution_profile: { placement: "exclusive", resources: {} },
            payload: { runner: "noop", timeout_seconds: 5 },
          },
        ],
      })
    ).status,
  ).toBe(201);

describe("nomination against starvation", () => {
  it("an exclusive task starts within a bounded time after its threshold, while small work keeps flowing on the other worker", async () => {
    await setUp(1);
    // The stream runs first so w1 is never empty; the exclusive task is dispatched among it.
    const run = await stream(20_000, 600);
    expect(run.bigAt, "the exclusive task was leased").toBeDefined();
    const waited = run.bigAt! - run.dispatchedAt!;
    // Threshold 1 s, then the leases it waits on (declared 1 s each) end: loosely, under 8 s.
    expect(waited).toBeLessThan(8000);
    expect(run.nominated).toBe("w1");
    // describe shows the nomination on both sides.
    expect(run.shown!.task).toMatch(/^  Nominated Worker:\s+w1 \(waits on s\d+/m);
    expect(run.shown!.worker).toMatch(/^  Nominated For:\s+big \(waits on s\d+/m);
    // While w1 was held, w1 took no new short work and small work kept flowing on w2.
    const held = (w: string) => run.took[w].filter((x) => x.at >= run.nominatedAt!).length;
    expect(held("w1")).toBe(0);
    expect(held("w2")).toBeGreaterThan(0);
    console.log(
      `nomination bound: exclusive task leased ${waited} ms after dispatch (threshold 1000 ms; short tasks run ${RUN_MS} ms and declare 1 s); nominated ${run.nominatedAt! - run.dispatchedAt!} ms after dispatch; while held, w2 took ${held("w2")} short tasks, w1 none`,
    );
  });

  it("under v1's rules (threshold never reached) the same stream keeps the exclusive task waiting", async () => {
    await setUp(3600);
    const run = await stream(6000, 600);
    expect(run.bigAt).toBeUndefined();
    expect(run.took.w1.length).toBeGreaterThan(5);
  });
});

// --- The nomination as stored on the task: hand-made states, one pass at a time.

type Stored = { spec: Json; status?: Json };
const stored = (name: string) => h.hub.cache.get("Task", name) as unknown as Stored | undefined;
const condition = (name: string, type: string) =>
  (stored(name)?.status?.conditions as Json[] | undefined)?.find((c) => c.type === type);
async function eventsOf(name: string): Promise<Json[]> {
  const r = await get(
    h.url,
    `/apis/loom.dev/v1alpha1/events?fieldSelector=involvedObject.kind=Task,involvedObject.name=${name}`,
  );
  expect(r.status).toBe(200);
  return r.body.items as Json[];
}
/** Runs `n` more admission-conditions passes to completion (each rereads the state). */
async function passes(n: number) {
  const ac = h.hub.controllers!.admission;
  for (let i = 0; i < n; i++) {
    // A pass that starts after this call: one more than have started so far.
    const target = ac.started + 1;
    ac.enqueue(ALL);
    await eventually(() => ac.passes >= target, "an admission-conditions pass");
  }
}
const dispatchTasks = async (tasks: Json[]) =>
  expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
const exclusive = (task_id: string, required_capability: string, extra: Json = {}) => ({
  task_id,
  required_capability,
  execution_profile: { placement: "exclusive", resources: {} },
  payload: { runner: "noop", timeout_seconds: 5 },
  ...extra,
});
/** Each worker gets one running lease of `lease` (priority as given), so none is empty. */
async function busyWorkers(workers: Record<string, { capabilities: string[]; leasePriority?: number }>) {
  for (const [w, o] of Object.entries(workers)) {
    expect(
      (
        await post(
          h.url,
          "/api/workers/register",
          registerBody(w, { capabilities: o.capabilities, max_concurrency: 2, initial_concurrency: 2 }),
        )
      ).status,
    ).toBe(200);
    await dispatchTasks([
      {
        task_id: `lease-${w}`,
        required_capability: o.capabilities[0],
        priority: o.leasePriority ?? 0,
        payload: { runner: "noop", timeout_seconds: 30 },
      },
    ]);
    const c = await post(h.url, "/api/tasks/claim", { worker_id: w, limit: 1, lease_seconds: 600 });
    expect(c.body.tasks.map((t: Json) => t.task_id)).toEqual([`lease-${w}`]);
  }
}

describe("the stored nomination: status.nominated_worker, the Nominated condition and its Events", () => {
  it("appears on the task with the leases it waits on, is announced once across passes, and is cleared with one Event when the task is leased", async () => {
    h = await startHub({ nominateAfterSeconds: 1, heartbeatGraceSeconds: 3600 });
    await busyWorkers({ w1: { capabilities: ["big"] } });
    await dispatchTasks([exclusive("big", "big")]);

    await eventually(() => stored("big")?.status?.nominated_worker === "w1", "big nominates w1");
    expect(stored("big")!.status!.nomination_blockers).toEqual(["lease-w1"]);
    expect(condition("big", "Nominated")).toMatchObject({ status: "True", reason: "WaitedPastThreshold" });
    expect(condition("big", "Nominated")!.message).toMatch(
      /^holds w1: .*threshold of 1s; waits on lease-w1, expected to start by /,
    );
    // Every replica's claims read the stored field: the data API answers from it too.
    expect((await get(h.url, "/api/data/nominations")).body.nominations).toEqual([
      expect.objectContaining({ worker_id: "w1", task_id: "big", blocking_leases: ["lease-w1"] }),
    ]);
    expect((await get(h.url, "/api/data/task-admission?task_id=big")).body.nominated_worker).toBe("w1");
    const c = new Client({ controller: h.url });
    expect(await describeObject(c, resolveKind("task"), "big")).toMatch(
      /^  Nominated Worker:\s+w1 \(waits on lease-w1\)$/m,
    );
    expect(await describeObject(c, resolveKind("worker"), "w1")).toMatch(
      /^  Nominated For:\s+big \(waits on lease-w1/m,
    );

    // More passes over the same state write nothing new and announce nothing again.
    const rv = (h.hub.cache.get("Task", "big") as Json).metadata.resourceVersion;
    await passes(3);
    expect((h.hub.cache.get("Task", "big") as Json).metadata.resourceVersion).toBe(rv);
    await eventually(
      async () => (await eventsOf("big")).some((e) => e.reason === "Nominated"),
      "the Nominated Event is stored",
    );
    expect((await eventsOf("big")).filter((e) => e.reason === "Nominated").map((e) => [e.count, e.message])).toEqual([
      [1, condition("big", "Nominated")!.message],
    ]);

    // While held, w1 admits nothing that would delay big; once its lease ends big is claimed.
    await dispatchTasks([
      { task_id: "small", required_capability: "big", payload: { runner: "noop", timeout_seconds: 600 } },
    ]);
    expect(
      (await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 2, lease_seconds: 60 })).body.tasks,
    ).toEqual([]);
    expect(
      (await post(h.url, "/api/tasks/complete", { worker_id: "w1", task_id: "lease-w1", attempt_no: 1 })).status,
    ).toBe(200);
    const claimed = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1, lease_seconds: 60 });
    expect(claimed.body.tasks.map((t: Json) => t.task_id)).toEqual(["big"]);

    expect(stored("big")!.status!.nominated_worker).toBeUndefined();
    expect(stored("big")!.status!.nomination_blockers).toBeUndefined();
    expect(condition("big", "Nominated")).toMatchObject({
      status: "False",
      reason: "Leased",
      message: "no longer holds w1: leased to w1",
    });
    expect((await get(h.url, "/api/data/nominations")).body.nominations).toEqual([]);
    await passes(2);
    await eventually(
      async () => (await eventsOf("big")).some((e) => e.reason === "NominationEnded"),
      "the NominationEnded Event is stored",
    );
    const reasons = (await eventsOf("big")).filter((e) => e.reason === "Nominated" || e.reason === "NominationEnded");
    expect(reasons.map((e) => [e.reason, e.count])).toEqual([
      ["Nominated", 1],
      ["NominationEnded", 1],
    ]);
  });

  it("ends with one Event when the task is cancelled", async () => {
    h = await startHub({ nominateAfterSeconds: 1, heartbeatGraceSeconds: 3600 });
    await busyWorkers({ w1: { capabilities: ["big"] } });
    await dispatchTasks([exclusive("big", "big")]);
    await eventually(() => stored("big")?.status?.nominated_worker === "w1", "big nominates w1");
    expect((await post(h.url, "/api/admin/cancel-task", { task_id: "big" })).status).toBe(200);
    expect(stored("big")!.status!.nominated_worker).toBeUndefined();
    expect(condition("big", "Nominated")).toMatchObject({ status: "False", reason: "Cancelled" });
    await eventually(
      async () => (await eventsOf("big")).some((e) => e.reason === "NominationEnded"),
      "the NominationEnded Event is stored",
    );
    expect((await eventsOf("big")).find((e) => e.reason === "NominationEnded")).toMatchObject({
      count: 1,
      message: "no longer holds w1: cancelled",
    });
  });

  it("honours a campaign's nominate_after_seconds over the Hub's", async () => {
    h = await startHub({ nominateAfterSeconds: 3600, heartbeatGraceSeconds: 3600 });
    await busyWorkers({ w1: { capabilities: ["big"] }, w2: { capabilities: ["other"] } });
    const campaign = {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Campaign",
      metadata: { name: "urgent" },
      spec: {
        schema_version: 1,
        campaign_id: "urgent",
        nominate_after_seconds: 1,
        cases: [
          {
            case_id: "c1",
            setting_id: "s",
            run_id: "r",
            required_capability: "big",
            execution_profile: { placement: "exclusive" },
            payload: { runner: "noop" },
          },
        ],
      },
    };
    expect((await post(h.url, "/apis/loom.dev/v1alpha1/campaigns", campaign)).status).toBe(201);
    // The same starving shape with the Hub's threshold (an hour), on the other worker.
    await dispatchTasks([exclusive("patient", "other")]);
    const name = await eventually(
      () =>
        h.hub.cache
          .list("Task")
          .map((t) => t.metadata.name)
          .find((n) => n.startsWith("urgent")),
      "the campaign's task",
    );
    expect(stored(name)!.spec.nominate_after_seconds).toBe(1);
    await eventually(() => stored(name)?.status?.nominated_worker === "w1", "the campaign's task nominates w1");
    await passes(1);
    expect(stored("patient")!.status?.nominated_worker).toBeUndefined();
    expect(condition("patient", "Nominated")).toBeUndefined();
  });

  it("nominates at once, before the threshold, a task that outranks a lease it waits on; equal priority does not", async () => {
    h = await startHub({ nominateAfterSeconds: 3600, heartbeatGraceSeconds: 3600 });
    await busyWorkers({
      w1: { capabilities: ["big"], leasePriority: 0 },
      w2: { capabilities: ["other"], leasePriority: 5 },
    });
    await dispatchTasks([exclusive("urgent", "big", { priority: 5 }), exclusive("peer", "other", { priority: 5 })]);
    await eventually(() => stored("urgent")?.status?.nominated_worker === "w1", "urgent nominates w1");
    expect(condition("urgent", "Nominated")).toMatchObject({ status: "True", reason: "OutranksLease" });
    expect(condition("urgent", "Nominated")!.message).toMatch(
      /^holds w1: fits no worker now and its priority 5 outranks lease-w1 \(priority 0\); waits on lease-w1/,
    );
    await passes(1);
    expect(stored("peer")!.status?.nominated_worker).toBeUndefined();
    // Backfill still applies: w1 takes no work that would delay urgent.
    await dispatchTasks([
      { task_id: "filler", required_capability: "big", payload: { runner: "noop", timeout_seconds: 600 } },
    ]);
    expect(
      (await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 2, lease_seconds: 60 })).body.tasks,
    ).toEqual([]);
  });
});
