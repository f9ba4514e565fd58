// Fair share across queues, measured on a real Hub over loopback HTTP: fake fast Runners
// claim and complete as quickly as they can, two queues with unbounded work share the fleet,
// and the leases they get follow their weights. Then the same with a decayed share on an
// injected clock: a queue that has just run alone yields for about a half-life.
import { describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { eventually, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const API = "loom.dev/v1alpha1";

async function createQueue(h: TestHub, name: string, spec: Record<string, unknown>): Promise<void> {
  const res = await fetch(h.url + API_PREFIX + "/queues", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ apiVersion: API, kind: "Queue", metadata: { name }, spec }) });
  expect(res.status, await res.text()).toBe(201);
}

async function dispatch(h: TestHub, queue: string, n: number, cpu = 1000, prefix = queue): Promise<void> {
  for (let i = 0; i < n; i += 200) {
    const tasks = Array.from({ length: Math.min(200, n - i) }, (_, j) => ({ task_id: `${prefix}-${i + j}`, queue, required_capability: "linux", execution_profile: { resources: { cpu_millis: cpu } }, payload: { runner: "noop" } }));
    const r = await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
  }
}

async function register(h: TestHub, workers: number, slots = 4): Promise<void> {
  for (let w = 0; w < workers; w++) {
    const r = await post(h.url, "/api/workers/register", registerBody(`w${w}`, { max_concurrency: slots, initial_concurrency: slots, resource_capacity: { cpu_millis: 4000, memory_mb: 8192, disk_mb: 0, gpu_count: 0 } }));
    expect(r.status).toBe(200);
  }
}

/** One fake Runner per worker: claim what fits, hold each lease `holdMs`, complete, until `stop()` says so. */
async function runFleet(h: TestHub, workers: number, slots: number, holdMs: number, onLease: (task: string) => void, stop: () => boolean): Promise<void> {
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
      await runFleet(h, 4, 16, 20, (t) => leases.push(t), () => leases.length >= 700);
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
      expect(r.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["team-a-0", "team-a-1", "team-a-2", "team-a-3"]);
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
      for (const t of first.body.tasks) expect((await post(h.url, "/api/tasks/complete", { worker_id: "w0", task_id: t.task_id, result: {} })).status).toBe(200);
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
        for (const t of ids) await eventually(async () => (await post(h.url, "/api/tasks/complete", { worker_id: "w0", task_id: t, result: {} })).status === 200, "complete");
      }
      console.log(`decay: night yielded for ${yieldedFor} s at a half-life of ${halfLife} s`);
      expect(winners[0]).toMatch(/^day-/);
      expect(yieldedFor).toBeGreaterThanOrEqual(0.9 * halfLife);
      expect(yieldedFor).toBeLessThanOrEqual(1.2 * halfLife);
    } finally {
      await h.close();
    }
  }, 60_000);
});
