// The Runner and admin calls the property tests mix at random, shared so each test lists only
// the operations it adds.
import type { TestHub } from "./hub.ts";
import { post } from "./hub.ts";

/** Register `n` workers w0..w{n-1} with the same limits; every reply must be 200. */
export async function registerWorkers(url: string, n: number, maxConcurrency: number): Promise<number[]> {
  const out: number[] = [];
  for (let w = 0; w < n; w++)
    out.push(
      (
        await post(url, "/api/workers/register", {
          worker_id: `w${w}`,
          capabilities: ["linux"],
          max_concurrency: maxConcurrency,
          initial_concurrency: maxConcurrency,
          concurrency_policy: "fixed",
          resource_capacity: { cpu_millis: 2000, memory_mb: 4096, disk_mb: 0, gpu_count: 0 },
          runner_api_version: 1,
          health: {},
        })
      ).status,
    );
  return out;
}

export type TaskOp = { kind: "claim"; w: number; limit: number } | { kind: "cancel" | "retry" | "complete"; t: number };

/** Carry out one claim, cancel, retry or complete (by the task's current holder); the HTTP status. */
export async function taskOp(h: TestHub, o: TaskOp): Promise<number> {
  switch (o.kind) {
    case "claim":
      return (await post(h.url, "/api/tasks/claim", { worker_id: `w${o.w}`, limit: o.limit })).status;
    case "cancel":
      return (await post(h.url, "/api/admin/cancel-task", { task_id: `t${o.t}` })).status;
    case "retry":
      return (await post(h.url, "/api/admin/retry-task", { task_id: `t${o.t}` })).status;
    case "complete": {
      const t = h.hub.cache.get("Task", `t${o.t}`);
      return (
        await post(h.url, "/api/tasks/complete", { worker_id: t?.status?.lease?.worker ?? "w0", task_id: `t${o.t}` })
      ).status;
    }
  }
}
