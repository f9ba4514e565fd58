// Several Hub replicas on one real etcd, in this process: each serves the Runner contract,
// exactly one leads, and claims spread across replicas never over-reserve a tight worker.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hub } from "../../src/hub.ts";
import { DEFAULT_EVENT_BUDGET, EVENT_TTL_SECONDS } from "../../src/reconciler/events.ts";
import type { EtcdStore } from "../../src/store/etcd.ts";
import { writeZip } from "../../src/results/zip.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";
import { eventually, get, post, registerBody } from "../support/hub.ts";
import { InvariantRecorder } from "../support/invariant.ts";

type Json = Record<string, any>;

describe.skipIf(etcdMissing)("Hub replicas on etcd", () => {
  let etcd: EtcdCluster;
  let dir: string;
  let hubs: Hub[] = [];
  const prefix = `/loom-hubs-${process.pid}`;

  beforeAll(async () => {
    etcd = await startEtcd();
    dir = await mkdtemp(join(tmpdir(), "loom-hub-etcd-"));
    // One results folder for every replica: an upload to one is read through any.
    for (const id of ["a", "b", "c"]) {
      hubs.push(
        await Hub.start({
          dataDir: dir,
          port: 0,
          logLevel: "silent",
          backend: { kind: "etcd", etcd: { endpoints: etcd.endpoints, prefix }, replicaId: id },
        }),
      );
    }
  }, 60_000);
  afterAll(async () => {
    for (const h of hubs) await h.close();
    hubs = [];
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const result = (taskId: string) =>
    writeZip([
      { name: "task.json", data: JSON.stringify({ task_id: taskId }) },
      { name: "worker-result.json", data: JSON.stringify({ task_id: taskId, exit_code: 0 }) },
      { name: "stdout.txt", data: "" },
      { name: "stderr.txt", data: "" },
    ]);

  let lastViews = "";
  it("exactly one replica leads, every replica knows which, and get hubs lists all three", async () => {
    const leaders = await eventually(
      async () => {
        const hz = await Promise.all(hubs.map((h) => get(h.url, "/api/healthz")));
        lastViews = JSON.stringify(
          hz.map((r) => ({ replica: r.body.replica, leader: r.body.leader, leading: r.body.leading })),
        );
        const leading = hz.filter((r) => r.body.leading);
        return leading.length === 1 && hz.every((r) => r.body.leader === leading[0].body.replica) && hz;
        // An election settles within a few lease TTLs (3 s); a loaded machine may need several.
      },
      "one agreed leader (last views in the next line)",
      30_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${lastViews}`);
    });
    expect(leaders.map((r) => r.body.store)).toEqual(["etcd", "etcd", "etcd"]);
    const listed = (await get(hubs[1].url, "/api/hubs")).body.items as Json[];
    expect(listed.map((h) => h.id)).toEqual(["a", "b", "c"]);
    expect(listed.filter((h) => h.leader)).toHaveLength(1);
    expect(listed.map((h) => h.url).sort()).toEqual(hubs.map((h) => h.url).sort());
  }, 60_000);

  for (const i of [0, 1, 2]) {
    it(`replica ${"abc"[i]} serves the Runner contract: register, dispatch, claim, start, upload, complete`, async () => {
      const u = hubs[i].url;
      const worker = `runner-${i}`;
      const taskId = `smoke-${i}`;
      expect(
        (await post(u, "/api/workers/register", registerBody(worker, { capabilities: [`only-${i}`] }))).status,
      ).toBe(200);
      expect(
        (
          await post(u, "/api/tasks/dispatch", {
            schema_version: 1,
            operator: "test",
            tasks: [{ task_id: taskId, required_capability: `only-${i}`, payload: { runner: "noop" } }],
          })
        ).status,
      ).toBe(201);
      const claimed = await eventually(async () => {
        const r = await post(u, "/api/tasks/claim", { worker_id: worker, limit: 5, lease_seconds: 60 });
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        return r.body.tasks.length > 0 && r.body.tasks;
      }, "the claim");
      expect(claimed.map((t: Json) => t.task_id)).toEqual([taskId]);
      expect((await post(u, "/api/tasks/start", { worker_id: worker, task_id: taskId })).body).toMatchObject({
        new_state: "running",
      });
      const up = await fetch(`${u}/api/results/upload`, {
        method: "POST",
        headers: { "content-type": "application/zip", "x-task-id": taskId, "x-worker-id": worker },
        body: await result(taskId),
      });
      expect(up.status).toBe(201);
      const done = await post(u, "/api/tasks/complete", {
        worker_id: worker,
        task_id: taskId,
        result: {},
        upload: await up.json(),
      });
      expect(done.status, JSON.stringify(done.body)).toBe(200);
      // Another replica sees the outcome.
      const other = hubs[(i + 1) % 3].url;
      await eventually(
        async () => (await get(other, `/api/tasks?task_id=${taskId}`)).body.tasks[0]?.state === "clean",
        "the state on another replica",
      );
    });
  }

  it("the replicas' Events carry an etcd lease of the Event TTL: etcd drops them, no GC pass lists them", async () => {
    const store = hubs[0].store as EtcdStore;
    expect(store.expires("Event")).toBe(true);
    const from = `${prefix}/objects/Event/`;
    const keys = await eventually(async () => {
      const r = await store.etcd.kv.range({
        key: Buffer.from(from),
        range_end: Buffer.from(`${prefix}/objects/Event0`),
      });
      return r.kvs.length > 0 && r.kvs;
    }, "the smoke tests' Events");
    const leases = new Set(keys.map((kv) => kv.lease));
    expect(leases.has("0")).toBe(false);
    for (const id of leases) {
      const ttl = await store.etcd.leaseClient.leaseTimeToLive({ ID: id });
      expect(Number(ttl.grantedTTL)).toBe(EVENT_TTL_SECONDS + 60);
    }
  });

  it("each of three replicas refills an Event reason at a third of the fleet's rate, and keeps the whole burst", async () => {
    const h = hubs[1];
    // The replica counts the live replicas as its claims' stripes do.
    await eventually(async () => h.scheduler.ctx.stripe.count === 3, "three live replicas");
    const { burst, perSecond } = DEFAULT_EVENT_BUDGET;
    const reason = `BudgetProbe${process.pid}`;
    const object = { apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name: "budget-probe" } };
    /** Record n Events of the probe's reason; how many the budget let through. */
    const record = (n: number, at: string) =>
      Array.from({ length: n }, (_, i) =>
        h.events.record({ object, type: "Normal", reason, message: `${at} ${i}` }),
      ).filter(Boolean).length;
    expect(record(burst + 100, "first")).toBe(burst);
    const emptied = performance.now();
    await new Promise((r) => setTimeout(r, 1500));
    const refilled = record(2 * perSecond, "later");
    const seconds = (performance.now() - emptied) / 1000;
    // A third of the rate over the wait (the whole rate would give three times as many).
    expect(refilled).toBeGreaterThanOrEqual(Math.floor((perSecond / 3) * seconds * 0.9));
    expect(refilled).toBeLessThanOrEqual(Math.ceil((perSecond / 3) * (seconds + 0.1)));
  });

  it("claims for one tight worker sent through all replicas at once never over-reserve it", async () => {
    const rec = new InvariantRecorder();
    await rec.start(hubs[2].store, await hubs[2].store.revision());
    // 2 CPUs: two 1-CPU tasks fit at a time, whatever max_concurrency allows.
    await post(
      hubs[0].url,
      "/api/workers/register",
      registerBody("tight", {
        capabilities: ["tight"],
        max_concurrency: 8,
        initial_concurrency: 8,
        health: { hostname: "tight", resources: { cpu_count: 2, mem_available_mb: 8192, disk_available_mb: 50_000 } },
      }),
    );
    const tasks = Array.from({ length: 12 }, (_, i) => ({
      task_id: `tight-${i}`,
      required_capability: "tight",
      payload: { runner: "noop" },
      execution_profile: { placement: "shared", resources: { cpu_millis: 1000 } },
    }));
    expect(
      (await post(hubs[1].url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks })).status,
    ).toBe(201);
    const claimed = new Map<string, number>();
    for (let round = 0; round < 6; round++) {
      // Every replica's informer must know the worker and tasks before it can admit anything.
      const replies = await Promise.all(
        hubs.flatMap((h) =>
          [0, 1].map(() => post(h.url, "/api/tasks/claim", { worker_id: "tight", limit: 4, lease_seconds: 60 })),
        ),
      );
      for (const r of replies) {
        // A claim that loses every race answers 200 with what it won, possibly nothing: never a Conflict.
        expect(r.status, JSON.stringify(r.body)).toBe(200);
        for (const t of r.body.tasks ?? []) claimed.set(t.task_id, (claimed.get(t.task_id) ?? 0) + 1);
      }
      const held = [...claimed.keys()];
      // Complete what is held so the next round can claim again.
      for (const id of held) {
        await post(hubs[round % 3].url, "/api/tasks/complete", { worker_id: "tight", task_id: id, result: {} });
        claimed.delete(id);
      }
    }
    const head = await hubs[0].store.revision();
    await eventually(() => rec.revision >= head, "the recorder to catch up");
    rec.stop();
    expect(rec.violations).toEqual([]);
    expect(rec.maxActiveSeen).toBe(2);
  });

  it("a v1 dispatch of 500 tasks on a stock etcd (128 ops per Txn) is created whole, and a resend is idempotent", async () => {
    const tasks = Array.from({ length: 500 }, (_, i) => ({
      task_id: `stock-${String(i).padStart(3, "0")}`,
      required_capability: "stock",
      payload: { runner: "noop" },
    }));
    const first = await post(hubs[1].url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
    expect(first.status, JSON.stringify(first.body).slice(0, 300)).toBe(201);
    expect(first.body.created).toHaveLength(500);
    const again = await post(hubs[2].url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
    expect(again.status, JSON.stringify(again.body).slice(0, 300)).toBe(200);
    expect(again.body.existing).toHaveLength(500);
    const listed = (await hubs[0].store.list("Task")).items.filter((t) => t.metadata.name.startsWith("stock-"));
    expect(listed).toHaveLength(500);
  });

  it("a nomination the leader stores holds its worker for claims served by every replica", async () => {
    const leader = await eventually(() => hubs.find((h) => h.controllers), "a leader running the conditions pass");
    const others = hubs.filter((h) => h !== leader);
    // The worker calls the leader too, so the leader's pass counts it Ready.
    expect(
      (
        await post(
          leader.url,
          "/api/workers/register",
          registerBody("held", { capabilities: ["held"], max_concurrency: 2, initial_concurrency: 2 }),
        )
      ).status,
    ).toBe(200);
    const dispatch = (tasks: Json[]) =>
      post(others[0].url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
    expect(
      (
        await dispatch([
          { task_id: "held-low", required_capability: "held", payload: { runner: "noop", timeout_seconds: 30 } },
        ])
      ).status,
    ).toBe(201);
    /** A claim for the worker through `h`; undefined while it grants nothing (the replica's informer may lag). */
    const claimOn = async (h: Hub, limit: number) => {
      const t = (await post(h.url, "/api/tasks/claim", { worker_id: "held", limit, lease_seconds: 60 })).body.tasks as
        Json[] | undefined;
      return t?.length ? t : undefined;
    };
    const first = await eventually(() => claimOn(others[0], 1), "held-low claimed");
    expect(first.map((t: Json) => t.task_id)).toEqual(["held-low"]);
    // It outranks held-low, so it nominates at once (the Hub's threshold is 60 s).
    expect(
      (
        await dispatch([
          {
            task_id: "held-urgent",
            priority: 3,
            required_capability: "held",
            execution_profile: { placement: "exclusive", resources: {} },
            payload: { runner: "noop", timeout_seconds: 30 },
          },
        ])
      ).status,
    ).toBe(201);
    for (const h of hubs)
      await eventually(
        () => (h.cache.get("Task", "held-urgent") as Json | undefined)?.status?.nominated_worker === "held",
        `replica ${hubs.indexOf(h)} sees the nomination`,
      );
    // Work that would delay the nominee is refused through every replica that does not lead.
    expect(
      (
        await dispatch([
          { task_id: "held-filler", required_capability: "held", payload: { runner: "noop", timeout_seconds: 600 } },
        ])
      ).status,
    ).toBe(201);
    for (const h of others) {
      await eventually(() => h.cache.get("Task", "held-filler"), "the filler is known");
      expect(await claimOn(h, 2)).toBeUndefined();
    }
    expect(
      (await post(others[1].url, "/api/tasks/complete", { worker_id: "held", task_id: "held-low", result: {} })).status,
    ).toBe(200);
    const next = await eventually(() => claimOn(others[1], 2), "the nominee claimed");
    expect(next.map((t: Json) => t.task_id)).toEqual(["held-urgent"]);
  });
});
