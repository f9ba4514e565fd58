// Fair share across queues, measured on a real Hub over loopback HTTP: fake fast Runners
// claim and complete as quickly as they can, two queues with unbounded work share the fleet,
// and the leases they get follow their weights. Then the same with a decayed share on an
// injected clock: a queue that has just run alone yields for about a half-life.
import { describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { countedAttempts } from "../../src/scheduler/reclaim.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const API = "loom.dev/v1alpha1";

async function createQueue(h: TestHub, name: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(h.url + API_PREFIX + "/queues", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ apiVersion: API, kind: "Queue", metadata: { name }, spec }),
  });
  expect(res.status, await res.text()).toBe(201);
}

async function dispatch(h: TestHub, queue: string, n: number, cpu = 1000, prefix = queue): Promise<void> {
  for (let i = 0; i < n; i += 200) {
    const tasks = Array.from({ length: Math.min(200, n - i) }, (_, j) => ({
      task_id: `${prefix}-${i + j}`,
      queue,
      required_capability: "linux",
      execution_profile: { resources: { cpu_millis: cpu } },
      payload: { runner: "noop" },
    }));
    const r = await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
}

async function register(h: TestHub, workers: number, slots = 4): Promise<void> {
  for (let w = 0; w < workers; w++) {
    const r = await post(
      h.url,
      "/api/workers/register",
      registerBody(`w${w}`, {
        max_concurrency: slots,
        initial_concurrency: slots,
        resource_capacity: { cpu_millis: 4000, memory_mb: 8192, disk_mb: 0, gpu_count: 0 },
      }),
    );
    expect(r.status).toBe(200);
  }
}

/** One fake Runner per worker: claim what fits, hold each lease `holdMs`, complete, until `stop()` says so. */
async function runFleet(
  h: TestHub,
  workers: number,
  slots: number,
  holdMs: number,
  onLease: (task: string) => void,
  stop: () => boolean,
): Promise<void> {
  const loop = async (worker: string) => {
    const running = new Set<Promise<void>>();
    while (!stop()) {
      const r = await post(h.url, "/api/tasks/claim", { worker_id: worker, limit: slots });
      expect(r.status, JSON.stringify(r.body)).toBe(200);
      for (const t of r.body.tasks as { task_id: string }[]) {
        onLease(t.task_id);
        const p = new Promise<void>((res) => setTimeout(res, holdMs * (0.5 + Math.random())))
          .then(() => post(h.url, "/api/tasks/complete", { worker_id: worker, task_id: t.task_id, result: {} }))
          .then((c) => void expect(c.status, JSON.stringify(c.body)).toBe(200));
        running.add(p);
        void p.finally(() => running.delete(p));
      }
      if (!r.body.tasks.length) await (running.size ? Promise.race(running) : new Promise((res) => setTimeout(res, 5)));
    }
    await Promise.all(running);
  };
  await Promise.all(Array.from({ length: workers }, (_, w) => loop(`w${w}`)));
}

describe("fair share across queues", () => {
  it("two queues with weights 1:2 and unbounded work get leases 1:2, within 10%, over 600 leases", async () => {
    const h = await startHub({ heartbeatGraceSeconds: 3600 });
    try {
      await createQueue(h, "team-a", { weight: 1 });
      await createQueue(h, "team-b", { weight: 2 });
      await register(h, 4, 16);
      // team-a's work arrives first: by arrival alone it would take the whole fleet.
      await dispatch(h, "team-a", 800, 250);
      await dispatch(h, "team-b", 800, 250);
      const leases: string[] = [];
      await runFleet(
        h,
        4,
        16,
        20,
        (t) => leases.push(t),
        () => leases.length >= 700,
      );
      const window = leases.slice(100, 700); // past the first fill of the fleet (64 slots)
      const a = window.filter((t) => t.startsWith("team-a-")).length;
      const b = window.filter((t) => t.startsWith("team-b-")).length;
      expect(a + b).toBe(600);
      console.log(`fair share 1:2 -> leases ${a}:${b} (${(b / a).toFixed(2)})`);
      expect(b / a).toBeGreaterThan(2 * 0.9);
      expect(b / a).toBeLessThan(2 * 1.1);
    } finally {
      await h.close();
    }
  }, 120_000);

  it("without Queue objects, claims follow priority then arrival, as before", async () => {
    const h = await startHub({ heartbeatGraceSeconds: 3600 });
    try {
      await register(h, 1);
      await dispatch(h, "team-a", 8);
      await dispatch(h, "team-b", 8);
      const r = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 4 });
      expect(r.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual([
        "team-a-0",
        "team-a-1",
        "team-a-2",
        "team-a-3",
      ]);
      // The replies are what they were: no queue section, no quota reason.
      const adm = await get(h.url, "/api/data/task-admission?task_id=team-b-0");
      expect(adm.body).not.toHaveProperty("queue");
      expect(adm.body.workers[0].reasons).toEqual(["resource_reservation_unavailable", "worker_concurrency_reached"]);
    } finally {
      await h.close();
    }
  });

  it("with a half-life, a queue that has just run alone yields to one that has not, for about a half-life", async () => {
    let clock = Date.parse("2026-06-01T00:00:00Z");
    const halfLife = 600;
    const h = await startHub({ heartbeatGraceSeconds: 1e9, fairShareHalfLifeSeconds: halfLife, now: () => clock });
    try {
      await createQueue(h, "night", {});
      await createQueue(h, "day", {});
      await register(h, 1);
      // `night` holds the whole worker for ten half-lives: its decayed usage is its usage.
      await dispatch(h, "night", 40);
      const first = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 4, lease_seconds: 86_400 });
      expect(first.body.tasks).toHaveLength(4);
      clock += 10 * halfLife * 1000;
      for (const t of first.body.tasks)
        expect(
          (await post(h.url, "/api/tasks/complete", { worker_id: "w0", task_id: t.task_id, result: {} })).status,
        ).toBe(200);
      await dispatch(h, "day", 40);
      // From now on each claim fills the worker for one minute (a tenth of the half-life).
      // night's decayed share falls as 2^(-t/h) and day's rises as 1 - 2^(-t/h): they cross,
      // and night is claimed from again, after one half-life.
      const winners: string[] = [];
      const started = clock;
      let yieldedFor = -1;
      for (let i = 0; i < 40 && yieldedFor < 0; i++) {
        const r = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 4, lease_seconds: 86_400 });
        const ids = (r.body.tasks as { task_id: string }[]).map((t) => t.task_id);
        expect(ids).toHaveLength(4);
        winners.push(...ids);
        if (ids.some((t) => t.startsWith("night-"))) yieldedFor = (clock - started) / 1000;
        clock += 60_000;
        for (const t of ids)
          await eventually(
            async () =>
              (await post(h.url, "/api/tasks/complete", { worker_id: "w0", task_id: t, result: {} })).status === 200,
            "complete",
          );
      }
      console.log(`decay: night yielded for ${yieldedFor} s at a half-life of ${halfLife} s`);
      expect(winners[0]).toMatch(/^day-/);
      expect(yieldedFor).toBeGreaterThanOrEqual(0.9 * halfLife);
      expect(yieldedFor).toBeLessThanOrEqual(1.2 * halfLife);
    } finally {
      await h.close();
    }
  }, 60_000);

  it("reclaim: preempt gives a lender below its quota its share back within seconds; the victim's attempt is not counted", async () => {
    const h = await startHub({ heartbeatGraceSeconds: 3600 });
    try {
      await createQueue(h, "lender", { quota: { cpu_millis: 2000 }, reclaim: "preempt" });
      await createQueue(h, "borrower", { quota: { cpu_millis: 2000 }, borrowing_limit: { cpu_millis: 2000 } });
      await register(h, 1, 8);
      await dispatch(h, "borrower", 6);
      const first = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
      // 2000 of its own and 2000 borrowed from the idle lender: the worker is full.
      expect(first.body.tasks).toHaveLength(4);
      const started = Date.now();
      await dispatch(h, "lender", 1);
      const got = await eventually(
        async () => {
          const r = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
          return r.body.tasks.length ? r.body.tasks : undefined;
        },
        "the lender's task leased",
        10_000,
      );
      expect(got.map((t: { task_id: string }) => t.task_id)).toEqual(["lender-0"]);
      const waited = Date.now() - started;
      console.log(`reclaim: preempt leased the lender's task ${waited} ms after dispatch`);
      expect(waited).toBeLessThan(5000);
      // The youngest borrowed lease (claim order: borrower-3 was leased last in its batch) went back to the queue.
      const victims = h.hub.cache
        .list("Task")
        .filter((t) => t.status?.attempts?.some((a) => a.outcome === "reclaimed"));
      expect(victims.map((t) => t.metadata.name)).toEqual(["borrower-3"]);
      const v = victims[0];
      expect(v.status?.state).toBe("retry_queued");
      expect(v.status?.attempt).toBe(2); // the epoch moves on (fencing) ...
      expect(countedAttempts(v.status)).toBe(1); // ... but max_attempts does not see it
      // The old holder is fenced off: its renew is refused, so its Runner stops the run.
      const renew = await post(h.url, "/api/tasks/renew", { worker_id: "w0", task_id: "borrower-3", attempt_no: 1 });
      expect(renew.status).toBe(409);
      const ev = await eventually(
        async () =>
          (await get(h.url, `${API_PREFIX}/events?fieldSelector=involvedObject.name=borrower-3`)).body.items.find(
            (e: { reason: string }) => e.reason === "Reclaimed",
          ),
        "Reclaimed event",
      );
      expect(ev.message).toContain(
        "queue borrower had borrowed it; queue lender is below its quota (cpu_millis 0 used of 2000 nominal)",
      );
      // While the lender waits nothing new is lent: the borrower cannot take the lease back.
      const again = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
      expect(again.body.tasks).toEqual([]);
    } finally {
      await h.close();
    }
  }, 30_000);

  it("reclaim: wait stops new borrowing while the lender waits, and gives it the first lease that ends", async () => {
    const h = await startHub({ heartbeatGraceSeconds: 3600 });
    try {
      await createQueue(h, "lender", { quota: { cpu_millis: 2000 } });
      await createQueue(h, "borrower", { quota: { cpu_millis: 2000 }, borrowing_limit: { cpu_millis: 2000 } });
      await register(h, 1, 8);
      await dispatch(h, "borrower", 6);
      expect((await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 })).body.tasks).toHaveLength(4);
      await dispatch(h, "lender", 1);
      expect((await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 })).body.tasks).toEqual([]);
      const adm = await get(h.url, "/api/data/task-admission?task_id=borrower-4");
      expect(adm.body.summary).toContain(
        "queue borrower: cpu_millis 4000 used + 1000 requested > 2000 nominal + 1000 borrowable",
      );
      // The lender's task says which borrowed leases it waits on (none declares a run time: no "until").
      const mine = await get(h.url, "/api/data/task-admission?task_id=lender-0");
      expect(mine.body.queue.waits_on_borrowed).toEqual([
        { worker: "w0", leases: [{ task: expect.stringMatching(/^borrower-[0-3]$/), queue: "borrower" }] },
      ]);
      // A borrowed lease ends: its room goes to the lender, not back to the borrower.
      expect(
        (await post(h.url, "/api/tasks/complete", { worker_id: "w0", task_id: "borrower-0", result: {} })).status,
      ).toBe(200);
      const next = await post(h.url, "/api/tasks/claim", { worker_id: "w0", limit: 8 });
      expect(next.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["lender-0"]);
    } finally {
      await h.close();
    }
  }, 30_000);
});
