// Convergence: the controllers start from hand-made stores (inconsistent on purpose) and
// must reach the state the contract describes, and then stay quiet.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { StoredObject } from "../../src/store/store.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const A = "loom.dev/v1alpha1";
let hubs: TestHub[] = [];
let dirs: string[] = [];
afterEach(async () => {
  for (const h of hubs) await h.close().catch(() => {});
  for (const d of dirs) await rm(d, { recursive: true, force: true });
  hubs = [];
  dirs = [];
});

async function seed(objects: StoredObject[]): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "loom-rec-"));
  dirs.push(dir);
  const store = openSqliteStore(join(dir, "loom.db"));
  for (const o of objects) await store.create(o);
  await store.close();
  return dir;
}

async function start(dir: string, extra = {}) {
  const h = await startHub(
    { resyncMs: 200, conditions: { minIntervalMs: 20, refreshMs: 60_000, maxWritesPerPass: 2000 }, ...extra },
    dir,
  );
  hubs.push(h);
  return h;
}

const campaign = (cases: object[]): StoredObject => ({
  apiVersion: A,
  kind: "Campaign",
  metadata: { name: "demo", labels: { "loom.dev/campaign": "demo" } },
  spec: {
    schema_version: 1,
    campaign_id: "demo",
    defaults: {
      setting_id: "base",
      runner: "shell",
      command: "true",
      execution_profile: { resources: { cpu_millis: 500, memory_mb: 256 } },
    },
    cases,
  },
});
const tasks = (h: TestHub) => h.hub.cache.list("Task");

/** The store revision once a full conditions pass has run without writing anything. */
async function quiet(h: TestHub): Promise<number> {
  for (;;) {
    const rev = await h.hub.store.revision();
    const passes = h.hub.controllers!.admission.passes;
    await eventually(() => h.hub.controllers!.admission.passes > passes + 1, "a full conditions pass");
    await h.hub.events.flush(); // the Events those passes announced are writes too
    if ((await h.hub.store.revision()) === rev) return rev;
  }
}

describe("campaign controller", () => {
  it("looks at its own status write after the coalescing delay, not at once", async () => {
    const dir = await seed([campaign([{ case_id: "a", run_id: "1" }])]);
    const h = await start(dir, { resyncMs: 60_000 });
    const c = await eventually(() => {
      const c = h.hub.cache.get("Campaign", "demo");
      return c?.status?.task_count === 1 && c;
    }, "campaign counts");
    const ctl = h.hub.controllers!.campaigns;
    await eventually(
      () => ctl.waiting === 0 && ctl.queue.length === 0 && ctl.started === ctl.passes,
      "no campaign pass waiting or running",
    );
    const passes = ctl.passes;
    // The controller as the informer's handling of the write leaves it: read by a handler of
    // the informer's own, which runs after the manager's.
    let seen: { waiting: number; started: number } | undefined;
    const off = h.hub.cache.on((ev) => {
      if (ev.object.kind === "Campaign" && (ev.object.status as { task_count?: number } | undefined)?.task_count === 7)
        seen = { waiting: ctl.waiting, started: ctl.started };
    });
    // A status write alone, as the controller makes them (here with a wrong count).
    await h.hub.store.updateStatus({ ...c, status: { ...c.status, task_count: 7 } });
    await eventually(() => seen, "the status write in the informer").finally(off);
    // The campaign's next pass waits on the coalescing delay; none started.
    expect(seen).toEqual({ waiting: 1, started: passes });
    // The pass that writes them back counts as started before its write reaches the informer.
    await eventually(() => h.hub.cache.get("Campaign", "demo")?.status?.task_count === 1, "the counts written back");
    expect(ctl.started).toBeGreaterThan(passes);
  });

  it("creates the missing tasks of a campaign, once, and counts them", async () => {
    const dir = await seed([
      campaign([
        { case_id: "a", run_id: "1" },
        { case_id: "b", run_id: "1" },
        { case_id: "c", run_id: "1" },
      ]),
    ]);
    const h = await start(dir);
    await eventually(() => tasks(h).length === 3, "three tasks");
    const c = await eventually(() => {
      const c = h.hub.cache.get("Campaign", "demo");
      return c?.status?.task_count === 3 && c;
    }, "campaign counts");
    expect(c.status).toMatchObject({ task_count: 3, pending: 3, active: 0, final: 0, by_state: { queued: 3 } });
    expect(
      tasks(h)
        .map((t) => t.metadata.name)
        .sort(),
    ).toEqual(["demo__a__base__run-1", "demo__b__base__run-1", "demo__c__base__run-1"]);
    expect(tasks(h).every((t) => t.metadata.ownerReferences?.[0]?.uid === c.metadata.uid)).toBe(true);
    // Once settled, a resync pass changes nothing.
    await eventually(
      () => tasks(h).every((t) => t.status?.conditions?.some((c) => c.type === "Admitted")),
      "conditions",
    );
    const rev = await quiet(h);
    const passes = h.hub.controllers!.admission.passes;
    h.hub.controllers!.resyncAll();
    await eventually(() => h.hub.controllers!.admission.passes > passes + 1, "a resync pass");
    expect(tasks(h)).toHaveLength(3);
    expect(await h.hub.store.revision()).toBe(rev);
  });

  it("removes only the still-queued task of a case that left the manifest", async () => {
    const dir = await seed([
      campaign([
        { case_id: "a", run_id: "1" },
        { case_id: "b", run_id: "1" },
        { case_id: "c", run_id: "1" },
      ]),
    ]);
    const h = await start(dir);
    await eventually(() => tasks(h).length === 3, "three tasks");
    await post(h.url, "/api/workers/register", registerBody("w1"));
    const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    const leased = claim.body.tasks[0].task_id as string;
    const c = h.hub.cache.get("Campaign", "demo")!;
    await h.hub.store.update({ ...c, spec: { ...c.spec, cases: [] } });
    await eventually(() => tasks(h).length === 1, "queued tasks removed");
    expect(tasks(h)[0].metadata.name).toBe(leased);
    expect(tasks(h)[0].status?.state).toBe("leased");
  });
});

describe("task controller", () => {
  it("requeues an expired lease from a hand-made store, releasing its reservation", async () => {
    const past = new Date(Date.now() - 60_000).toISOString();
    const dir = await seed([
      {
        apiVersion: A,
        kind: "Worker",
        metadata: { name: "w1" },
        spec: {
          max_concurrency: 2,
          initial_concurrency: 2,
          resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
        },
      },
      {
        apiVersion: A,
        kind: "Task",
        metadata: { name: "t1" },
        spec: {
          execution_profile: { placement: "shared", resources: { cpu_millis: 800 } },
          payload: { runner: "noop" },
        },
        status: {
          state: "running",
          attempt: 1,
          lease: {
            worker: "w1",
            epoch: 1,
            leased_at: past,
            lease_until: past,
            placement: "shared",
            reservation: { cpu_millis: 800, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
          },
        },
      },
    ]);
    const h = await start(dir);
    const t = await eventually(() => {
      const t = h.hub.cache.get("Task", "t1");
      return t?.status?.state === "retry_queued" && t;
    }, "requeue");
    expect(t.status?.attempt).toBe(2);
    expect(t.status?.lease).toBeUndefined();
    expect(t.status?.attempts?.[0]).toMatchObject({ attempt: 1, worker: "w1", outcome: "lease_expired" });
    const cap = await get(h.url, "/api/data/worker-capacity");
    expect(cap.body.workers[0].reserved.cpu_millis).toBe(0);
    const w = await eventually(() => {
      const w = h.hub.cache.get("Worker", "w1");
      return w?.status?.reserved?.cpu_millis === 0 && w;
    }, "worker status shows the release");
    expect(w.status?.available?.cpu_millis).toBe(1000);
    expect(w.status?.active_task_ids).toEqual([]);
  });

  it("ends a task in lease_expired when its attempts run out", async () => {
    const past = new Date(Date.now() - 60_000).toISOString();
    const dir = await seed([
      { apiVersion: A, kind: "Worker", metadata: { name: "gone" }, spec: { max_concurrency: 1 } },
      {
        apiVersion: A,
        kind: "Task",
        metadata: { name: "t1" },
        spec: { retry_policy: { max_attempts: 2 }, payload: { runner: "noop" } },
        status: {
          state: "leased",
          attempt: 2,
          lease: { worker: "gone", epoch: 2, leased_at: past, lease_until: past },
        },
      },
    ]);
    const h = await start(dir);
    const t = await eventually(() => {
      const t = h.hub.cache.get("Task", "t1");
      return t?.status?.state === "lease_expired" && t;
    }, "final state");
    expect(t.status?.conditions?.find((c) => c.type === "Failed")).toMatchObject({
      status: "True",
      reason: "AttemptsExhausted",
    });
  });

  it("replaces stale Admitted conditions and explains every worker with numbers", async () => {
    const dir = await seed([
      {
        apiVersion: A,
        kind: "Worker",
        metadata: { name: "small" },
        spec: {
          max_concurrency: 2,
          initial_concurrency: 2,
          capabilities: ["linux"],
          resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
        },
      },
      {
        apiVersion: A,
        kind: "Worker",
        metadata: { name: "gpu" },
        spec: {
          max_concurrency: 2,
          initial_concurrency: 2,
          capabilities: ["gpu"],
          resource_capacity: { cpu_millis: 8000, memory_mb: 8192, disk_mb: 1000, gpu_count: 1 },
        },
      },
      {
        apiVersion: A,
        kind: "Task",
        metadata: { name: "big" },
        spec: {
          required_capability: "linux",
          execution_profile: { placement: "shared", resources: { memory_mb: 2048 } },
          payload: {},
        },
        status: {
          state: "queued",
          attempt: 1,
          conditions: [
            {
              type: "Admitted",
              status: "True",
              reason: "WorkerAvailable",
              message: "stale",
              lastTransitionTime: "2020-01-01T00:00:00Z",
            },
          ],
        },
      },
    ]);
    const h = await start(dir);
    const t = await eventually(() => {
      const t = h.hub.cache.get("Task", "big");
      const c = t?.status?.conditions?.find((c) => c.type === "Admitted");
      return c?.status === "False" && t;
    }, "Admitted=False");
    const admitted = t.status!.conditions!.find((c) => c.type === "Admitted")!;
    expect(admitted.message).toContain("0/2 workers admit");
    expect(admitted.message).toContain("short 1024 on small");
    expect(admitted.message).toContain("capability_missing");
    expect(admitted.lastTransitionTime).not.toBe("2020-01-01T00:00:00Z");
    expect(t.status!.conditions!.find((c) => c.type === "Unsatisfiable")).toMatchObject({ status: "True" });
  });

  it("writes nothing while nothing changes, across several resync periods", async () => {
    const dir = await seed([
      {
        apiVersion: A,
        kind: "Worker",
        metadata: { name: "w1" },
        spec: {
          max_concurrency: 1,
          initial_concurrency: 1,
          capabilities: ["linux"],
          resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
        },
      },
      ...Array.from({ length: 50 }, (_, i): StoredObject => ({
        apiVersion: A,
        kind: "Task",
        metadata: { name: `t${i}` },
        spec: {
          required_capability: "linux",
          execution_profile: { placement: "shared", resources: { memory_mb: 100 * (i % 3) } },
          payload: {},
        },
        status: { state: "queued", attempt: 1 },
      })),
    ]);
    const h = await start(dir);
    await eventually(
      () => tasks(h).every((t) => t.status?.conditions?.some((c) => c.type === "Admitted")),
      "conditions on every task",
    );
    await eventually(() => h.hub.cache.get("Worker", "w1")?.status?.conditions?.length, "worker status");
    const before = await quiet(h);
    const passes = h.hub.controllers!.admission.passes;
    // Six more passes ran (eventually throws otherwise), and wrote nothing.
    await eventually(() => h.hub.controllers!.admission.passes >= passes + 6, "six more passes");
    expect(await h.hub.store.revision()).toBe(before);
  });
});

describe("restart in the middle of a run", () => {
  it("converges without double leases", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-restart-"));
    dirs.push(dir);
    let h = await start(dir);
    await post(
      h.url,
      "/api/workers/register",
      registerBody("w1", {
        max_concurrency: 3,
        initial_concurrency: 3,
        resource_capacity: { cpu_millis: 3000, memory_mb: 3000, disk_mb: 1000 },
      }),
    );
    const many = Array.from({ length: 10 }, (_, i) => ({
      task_id: `t${i}`,
      payload: { runner: "noop" },
      execution_profile: { resources: { cpu_millis: 1000 } },
    }));
    expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks: many })).status).toBe(201);
    const first = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 10 });
    expect(first.body.tasks).toHaveLength(3);
    await h.close();
    hubs = hubs.filter((x) => x !== h);
    h = await start(dir);
    // The Runner keeps calling after the restart; the Hub still counts its three leases.
    const again = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 10 });
    expect(again.body.tasks).toHaveLength(0);
    expect(again.body.active_count).toBe(3);
    const leased = tasks(h).filter((t) => t.status?.state === "leased");
    expect(leased.map((t) => t.metadata.name).sort()).toEqual(first.body.tasks.map((t: any) => t.task_id).sort());
    await post(h.url, "/api/admin/cancel-task", { task_id: leased[0].metadata.name });
    const third = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 10 });
    expect(third.body.tasks).toHaveLength(1);
    const active = tasks(h).filter((t) => t.status?.state === "leased");
    expect(active).toHaveLength(3);
    expect(new Set(active.map((t) => t.metadata.name)).size).toBe(3);
  });
});
