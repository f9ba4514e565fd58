// The work every Hub scenario uses: noop tasks dispatched through the v1 dispatch endpoint,
// and Runner registrations as a v1 Runner sends them.
import type { JsonClient } from "./http.ts";

export const taskName = (prefix: string, i: number) => `${prefix}-${String(i).padStart(7, "0")}`;
export const taskIndex = (name: string) => Number(name.slice(name.lastIndexOf("-") + 1));

/** A noop task as a dispatch entry; `shape` varies the requirement (0 = the common one); `queue` names its Queue. */
export function noopTask(prefix: string, i: number, shape = 0, queue?: string) {
  return {
    ...(queue !== undefined ? { queue } : {}),
    task_id: taskName(prefix, i),
    case_id: `case-${i}`,
    setting_id: "bench",
    run_id: "1",
    required_capability: "linux",
    execution_profile: { placement: "shared", resources: { cpu_millis: 250 + shape, memory_mb: 256 } },
    payload: { runner: "noop" },
  };
}

/** Dispatch tasks [from, from+count) in batches; returns how many were created. */
export async function dispatchRange(
  c: JsonClient,
  prefix: string,
  from: number,
  count: number,
  batch = 1000,
  shapeOf: (i: number) => number = () => 0,
  queueOf: (i: number) => string | undefined = () => undefined,
): Promise<number> {
  let created = 0;
  for (let i = from; i < from + count; i += batch) {
    const n = Math.min(batch, from + count - i);
    const out = await c.post<{ created: unknown[] }>("/api/tasks/dispatch", {
      schema_version: 1,
      operator: "bench",
      tasks: Array.from({ length: n }, (_, j) => noopTask(prefix, i + j, shapeOf(i + j), queueOf(i + j))),
    });
    created += out.created.length;
  }
  return created;
}

export const registerBody = (workerId: string, maxConcurrency: number) => ({
  worker_id: workerId,
  runner_api_version: 1,
  capabilities: ["linux"],
  max_concurrency: maxConcurrency,
  initial_concurrency: maxConcurrency,
  concurrency_policy: "fixed",
  resource_capacity: { cpu_millis: 64_000, memory_mb: 262_144, disk_mb: 1_000_000, gpu_count: 0 },
  health: {
    hostname: "bench",
    platform: "linux",
    resources: {
      cpu_count: 64,
      mem_total_mb: 262_144,
      mem_available_mb: 262_144,
      disk_total_mb: 1_000_000,
      disk_available_mb: 1_000_000,
    },
  },
});

/** The load generator leaves each Runner's first this many claims out of its claimP99Warm (the server's code still cold). */
export const WARM_CLAIMS = 4;
