// Queues end to end on a real Hub over loopback: a quota stops claims at nominal, and every
// reader says why in the same words (task-admission, the Admitted condition, the Queue's
// status, /metrics, the server-side Table kubectl prints, `loom describe`).
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { Client } from "../../src/cli/client.ts";
import { describe as describeObject } from "../../src/cli/describe.ts";
import { kindByName, resolveKind } from "../../src/cli/kinds.ts";
import { list } from "../../src/cli/get.ts";
import { formatTable, visibleColumns } from "../../src/cli/printers.ts";
import type { InformerEvent } from "../../src/store/cache.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const API = "loom.dev/v1alpha1";
let h: TestHub;

const send = (path: string, method: string, body: unknown, type = "application/json") =>
  fetch(h.url + API_PREFIX + path, { method, headers: { "content-type": type }, body: JSON.stringify(body) }).then(
    async (r) => ({ status: r.status, body: await r.json() }),
  );

beforeAll(async () => {
  h = await startHub({ heartbeatGraceSeconds: 3600 });
  expect(
    (
      await send("/queues", "POST", {
        apiVersion: API,
        kind: "Queue",
        metadata: { name: "team-a" },
        spec: { quota: { cpu_millis: 2000 }, weight: 1 },
      })
    ).status,
  ).toBe(201);
  expect(
    (
      await send("/queues", "POST", {
        apiVersion: API,
        kind: "Queue",
        metadata: { name: "team-b" },
        spec: { quota: { cpu_millis: 8000 }, weight: 2 },
      })
    ).status,
  ).toBe(201);
  expect(
    (
      await post(
        h.url,
        "/api/workers/register",
        registerBody("w0", {
          max_concurrency: 8,
          initial_concurrency: 8,
          resource_capacity: { cpu_millis: 8000, memory_mb: 8192, disk_mb: 0, gpu_count: 0 },
        }),
      )
    ).status,
  ).toBe(200);
  const tasks = [0, 1, 2, 3].map((i) => ({
    task_id: `a${i}`,
    queue: "team-a",
    required_capability: "linux",
    execution_profile: { resources: { cpu_millis: 1000 } },
    payload: { runner: "noop" },
  }));
  expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
}, 30_000);
afterAll(async () => {
  await h?.close();
});

describe("a queue's quota, through every door", () => {
  it("a claim stops at the queue's nominal quota, though the worker has room", async () => {
    const r = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
    expect(r.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["a0", "a1"]);
  });

  it("task-admission names the queue, the dimension and the numbers, and the task's standing", async () => {
    const r = await get(h.url, "/api/data/task-admission?task_id=a3");
    expect(r.status).toBe(200);
    expect(r.body.workers[0].reasons).toEqual(["queue_quota_exhausted"]);
    expect(r.body.workers[0].reason).toBe("resource_reservation_unavailable"); // what a v1 client sees
    expect(r.body.summary).toBe(
      "0/1 workers admit: 1 queue_quota_exhausted (queue team-a: cpu_millis 2000 used + 1000 requested > 2000 nominal + 0 borrowable)",
    );
    expect(r.body.queue).toMatchObject({
      name: "team-a",
      limited: true,
      position: 2, // a2 is ahead of it in team-a
      quota: [
        { dimension: "cpu_millis", used: 2000, requested: 1000, nominal: 2000, borrowing_limit: 0, borrowable: 0 },
      ],
      share: 0.25,
      standing: "team-a has share 0.25",
    });
  });

  it("the Admitted condition carries the queue's reason", async () => {
    await eventually(
      () =>
        h.hub.cache.get("Task", "a3")?.status?.conditions?.find((c) => c.type === "Admitted")?.reason ===
        "queue_quota_exhausted",
      "Admitted=False queue_quota_exhausted",
    );
  });

  it("the Queue's status is written by its controller from the leases", async () => {
    const q = await eventually(() => {
      const o = h.hub.cache.get("Queue", "team-a");
      return o?.kind === "Queue" && o.status?.admitted === 2 && o.status.pending === 2 ? o : undefined;
    }, "team-a status");
    expect(q.status).toMatchObject({ used: { cpu_millis: 2000 }, borrowed: "-", share: 0.25 });
    expect(q.status?.conditions?.find((c) => c.type === "QuotaExhausted")).toMatchObject({
      status: "True",
      message: "all of its nominal cpu_millis is in use",
    });
  });

  it("/metrics carries per-queue usage, quota and counts", async () => {
    const text = await (await fetch(h.url + "/metrics")).text();
    expect(text).toContain('loom_queue_used{queue="team-a",dimension="cpu_millis"} 2000');
    expect(text).toContain('loom_queue_quota{queue="team-a",dimension="cpu_millis"} 2000');
    expect(text).toContain('loom_queue_pending{queue="team-a"} 2');
    expect(text).toContain('loom_queue_admitted{queue="team-a"} 2');
  });

  it("kubectl's server-side Table shows USED/QUOTA, BORROWED, PENDING, ADMITTED and SHARE", async () => {
    await eventually(() => h.hub.cache.get("Queue", "team-a")?.status?.admitted === 2, "status");
    const res = await fetch(h.url + API_PREFIX + "/queues", {
      headers: { accept: "application/json;as=Table;v=v1;g=meta.k8s.io" },
    });
    const t = (await res.json()) as { columnDefinitions: { name: string }[]; rows: { cells: string[] }[] };
    expect(t.columnDefinitions.map((c: { name: string }) => c.name)).toEqual([
      "NAME",
      "WEIGHT",
      "CPU",
      "MEM",
      "GPU",
      "BORROWED",
      "PENDING",
      "ADMITTED",
      "SHARE",
      "RECLAIM",
      "AGE",
    ]);
    const row = t.rows.find((r: { cells: string[] }) => r.cells[0] === "team-a");
    expect(row?.cells.slice(0, 9)).toEqual(["team-a", "1", "2000m/2000m", "0Mi/-", "0/-", "-", "2", "2", "0.25"]);
  });

  it("loom get queues prints the same cells", async () => {
    const client = new Client({ controller: h.url });
    const k = resolveKind("lq");
    const l = await list(client, k, {});
    const text = formatTable(visibleColumns(k.columns, false), l.items, new Date());
    expect(text.split("\n")[0]).toMatch(
      /^NAME\s+WEIGHT\s+CPU\s+MEM\s+GPU\s+BORROWED\s+PENDING\s+ADMITTED\s+SHARE\s+AGE$/,
    );
    expect(text).toMatch(/team-a\s+1\s+2000m\/2000m\s+0Mi\/-\s+0\/-\s+-\s+2\s+2\s+0.25\s+/);
  });

  it("loom describe queue and describe task explain usage and fair share", async () => {
    const client = new Client({ controller: h.url });
    const q = await describeObject(client, kindByName("Queue")!, "team-a");
    expect(q).toMatch(/cpu_millis\s+2000\s+2000\s+0\s+2000/);
    expect(q).toMatch(/Pending:\s+2/);
    expect(q).toContain("team-a has share 0.25");
    const t = await describeObject(client, kindByName("Task")!, "a3");
    expect(t).toMatch(/Queue:\s+team-a, position 2 in it/);
    expect(t).toMatch(
      /cpu_millis:\s+2000 used \+ 1000 requested of 2000 nominal \+ 0 borrowable \(borrowing limit 0\)/,
    );
    expect(t).toMatch(/Fair Share:\s+team-a has share 0.25/);
  });

  it("raising the quota admits the next task at once", async () => {
    const r = await fetch(h.url + API_PREFIX + "/queues/team-a", {
      method: "PATCH",
      headers: { "content-type": "application/merge-patch+json" },
      body: JSON.stringify({ spec: { quota: { cpu_millis: 3000 } } }),
    });
    expect(r.status).toBe(200);
    await eventually(
      () =>
        (h.hub.cache.get("Queue", "team-a") as { spec?: { quota?: { cpu_millis?: number } } })?.spec?.quota
          ?.cpu_millis === 3000,
      "quota edit seen",
    );
    const c = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
    expect(c.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["a2"]);
  });

  it("loom simulate takes queue changes: a new quota, a new queue, a bad weight named by field", async () => {
    const sim = await post(h.url, "/api/simulate", { queues: { "team-a": { quota: { cpu_millis: 4000 } } } });
    expect(sim.status, JSON.stringify(sim.body)).toBe(200);
    expect(sim.body).toMatchObject({
      admitted: [{ order: 1, task: "a3", worker: "w0" }],
      baseline_admitted: 0,
      still_queued: 0,
    });
    const tighter = await post(h.url, "/api/simulate", { queues: { "team-a": { quota: { cpu_millis: 1000 } } } });
    expect(tighter.body).toMatchObject({ admitted: [], baseline_admitted: 0 });
    const badWeight = await post(h.url, "/api/simulate", { queues: { "team-a": { weight: 0 } } });
    expect(badWeight.status).toBe(400);
    expect(badWeight.body).toMatchObject({ error: "invalid_simulation", field: "queues.team-a.weight" });
    // Nothing was written.
    expect(
      (h.hub.cache.get("Queue", "team-a") as { spec?: { quota?: { cpu_millis?: number } } }).spec?.quota?.cpu_millis,
    ).toBe(3000);
  });

  it("a Queue's status written alone keeps the claims' book and wakes no queue pass; a new Queue does both", async () => {
    const ledger = h.hub.scheduler.controllers.queues;
    const reclaim = h.hub.controllers!.reclaim;
    // Which informer event each reclaim wake-up came from: the manager's handler and the
    // reclaim controller's enqueue, spied on and called through. Other wake-ups (a worker's
    // liveness, a Worker status write) may come at any time on a busy machine; only the
    // Queue events' own are looked at.
    const manager = h.hub.controllers! as unknown as { onChange(ev: InformerEvent): void };
    const onChange = manager.onChange;
    const enqueue = reclaim.enqueue;
    let handling: InformerEvent | undefined;
    const wokenBy: InformerEvent[] = [];
    const books: { ev: InformerEvent; same: boolean }[] = [];
    const spies = [
      vi.spyOn(manager, "onChange").mockImplementation(function (this: unknown, ev: InformerEvent) {
        handling = ev;
        try {
          onChange.call(this, ev);
        } finally {
          handling = undefined;
        }
      }),
      vi.spyOn(reclaim, "enqueue").mockImplementation(function (this: unknown, ...a: Parameters<typeof enqueue>) {
        if (handling) wokenBy.push(handling);
        enqueue.apply(this, a);
      }),
    ];
    // Whether each Queue event left the book as the event before it did: read by a handler of
    // the informer's own, which runs after the ledger's.
    let last = ledger.book();
    const off = h.hub.cache.on((ev) => {
      const now = ledger.book();
      if (ev.object.kind === "Queue") books.push({ ev, same: now === last });
      last = now;
    });
    const fromQueue = (name: string) => (ev: InformerEvent) =>
      ev.object.kind === "Queue" && ev.object.metadata.name === name;
    try {
      // A status write, as the queue controller makes them (here with a wrong count).
      const q = h.hub.cache.get("Queue", "team-b")!;
      const written = await h.hub.store.updateStatus({ ...q, status: { ...q.status, pending: 7 } });
      await eventually(
        () => h.hub.cache.revision >= Number(written.metadata.resourceVersion),
        "the status write in the informer",
      );
      // The queue controller writes its own figures back after the coalescing delay.
      await eventually(
        () => (h.hub.cache.get("Queue", "team-b") as { status?: { pending?: number } }).status?.pending !== 7,
        "team-b's status from the leases again",
      );
      // Neither status write woke a reclaim pass, nor rebuilt the book.
      const statusWrites = books.filter((b) => fromQueue("team-b")(b.ev));
      expect(statusWrites.length).toBeGreaterThanOrEqual(2);
      expect(statusWrites.every((b) => b.same)).toBe(true);
      expect(wokenBy.filter(fromQueue("team-b"))).toEqual([]);
      const created = await send("/queues", "POST", {
        apiVersion: API,
        kind: "Queue",
        metadata: { name: "team-c" },
        spec: { quota: { cpu_millis: 1000 } },
      });
      expect(created.status).toBe(201);
      // A new Queue wakes a reclaim pass and rebuilds the book, in the informer's handling of it.
      await eventually(() => books.some((b) => fromQueue("team-c")(b.ev)), "team-c in the informer");
      expect(wokenBy.filter(fromQueue("team-c")).length).toBeGreaterThan(0);
      expect(books.find((b) => fromQueue("team-c")(b.ev))!.same).toBe(false);
    } finally {
      off();
      for (const spy of spies) spy.mockRestore();
    }
  });
});
