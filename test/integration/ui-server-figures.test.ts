// The web view's rows (ui/src/model.ts) from what a real Hub serves: a worker's reserved
// vector, active count and limit are the figures of /api/data/worker-capacity, and the
// queue is in the order of /api/data/queue-positions.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { filterTasks, taskRow, workerObj, workerRows, type Task, type Worker } from "../../ui/src/model.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type CapacityEntry = {
  worker_id: string;
  reserved: Record<string, number>;
  active_task_ids: string[];
  active_count: number;
  effective_limit: number;
};

let h: TestHub;
beforeAll(async () => {
  h = await startHub();
  // w1's limits come from its registration alone (no inventory declares it): max 3, desired 2.
  expect(
    (await post(h.url, "/api/workers/register", registerBody("w1", { max_concurrency: 3, initial_concurrency: 2 })))
      .status,
  ).toBe(200);
  expect(
    (await post(h.url, "/api/workers/register", registerBody("w2", { max_concurrency: 1, initial_concurrency: 1 })))
      .status,
  ).toBe(200);
  const res = { cpu_millis: 1500, memory_mb: 1024 };
  const tasks = [
    { task_id: "held", priority: 9, execution_profile: { placement: "shared", resources: res } },
    // Queued behind it: priority first, then arrival (dispatched one by one below, b-low first), then name.
    ...["b-low", "a-low"].map((task_id) => ({ task_id, priority: 0 })),
    { task_id: "mid", priority: 5 },
  ];
  for (const t of tasks)
    expect(
      (await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks: [{ required_capability: "", ...t }] }))
        .status,
    ).toBe(201);
  expect(
    (await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1 })).body.tasks.map(
      (t: { task_id: string }) => t.task_id,
    ),
  ).toEqual(["held"]);
  // The Runner reports one more run than the Hub leased: the Hub counts max(reported, leased).
  expect(
    (
      await post(h.url, "/api/workers/heartbeat", {
        worker_id: "w1",
        current_runs: [{ task_id: "held" }, { task_id: "started-elsewhere" }],
      })
    ).status,
  ).toBe(200);
});
afterAll(() => h?.close());

const capacity = async () => (await get(h.url, "/api/data/worker-capacity")).body.workers as CapacityEntry[];
const rows = async () =>
  workerRows(((await get(h.url, "/apis/loom.dev/v1alpha1/workers")).body.items as Worker[]).map(workerObj));

describe("the workers page", () => {
  it("shows the Hub's reserved vector, active count and limit for every worker", async () => {
    await eventually(
      async () => (await capacity()).find((w) => w.worker_id === "w1")?.active_count === 2,
      "the Hub to count w1's reported run",
    );
    const shown = await eventually(async () => {
      const [api, page] = [await capacity(), await rows()];
      const same =
        api.length === page.length &&
        api.every((w) => {
          const r = page.find((x) => x.name === w.worker_id);
          return (
            r &&
            r.activeCount === w.active_count &&
            r.limit === w.effective_limit &&
            JSON.stringify(r.active) === JSON.stringify(w.active_task_ids) &&
            Object.entries(r.reserved).every(([k, v]) => v === (w.reserved[k] ?? 0))
          );
        });
      return same && page;
    }, "the worker rows to show what /api/data/worker-capacity says");
    const w1 = shown.find((r) => r.name === "w1")!;
    // Not what the leases alone would give (one task), nor the registration's max (3).
    expect(w1.activeCount).toBe(2);
    expect(w1.active).toEqual(["held"]);
    expect(w1.limit).toBe(2);
    expect(w1.reserved).toEqual({ cpu_millis: 1500, memory_mb: 1024, disk_mb: 0, gpu_count: 0 });
    expect(shown.find((r) => r.name === "w2")!.limit).toBe(1);
  });
});

describe("the queue page", () => {
  it("lists the queued tasks in the order of the Hub's queue positions", async () => {
    const positions = (await get(h.url, "/api/data/queue-positions")).body.positions as Record<string, number>;
    const tasks = ((await get(h.url, "/apis/loom.dev/v1alpha1/tasks")).body.items as Task[]).map(taskRow);
    const queued = filterTasks(tasks, {
      campaign: "",
      state: "pending",
      reason: "",
      worker: "",
      text: "",
      selector: () => true,
    });
    // One shape, so the positions are 1, 2, 3 in claim order: the page's order is the Hub's.
    expect(queued.map((t) => positions[t.name])).toEqual([1, 2, 3]);
    expect(queued[0].name).toBe("mid");
  });
});
