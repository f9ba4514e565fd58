// `npm run bench:ui`: what one redraw of the web view costs at 1,000 workers and 100,000
// tasks, for the derivations the page redoes after a burst of watch events (the DOM work is
// bounded by the virtualised lists: a few dozen rows whatever the count).
import {
  campaignRows,
  countBy,
  filterTasks,
  parseSelector,
  sortWorkers,
  taskRow,
  workerObj,
  workerRows,
  type Task,
  type Worker,
} from "../ui/src/model.ts";

const A = "loom.dev/v1alpha1" as const;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
function time(fn: () => void, reps = 9): number {
  const xs: number[] = [];
  for (let r = 0; r < reps; r++) {
    const t0 = performance.now();
    fn();
    xs.push(performance.now() - t0);
  }
  return median(xs);
}

const WORKERS = 1000;
const TASKS = 100_000;
const workers: Worker[] = Array.from({ length: WORKERS }, (_, i) => ({
  apiVersion: A,
  kind: "Worker",
  metadata: { name: `w${String(i).padStart(4, "0")}`, labels: { zone: `z${i % 7}`, pool: i % 10 ? "cpu" : "gpu" } },
  spec: { max_concurrency: 64 },
  status: {
    capacity: { cpu_millis: 64_000, memory_mb: 262_144, disk_mb: 1_000_000, gpu_count: i % 10 ? 0 : 2 },
    effective_limit: 64,
    registration: {},
    conditions: [{ type: "Ready", status: "True" }],
  },
}));
const STATES = ["queued", "queued", "running", "leased", "clean", "dirty"] as const;
const tasks: Task[] = Array.from({ length: TASKS }, (_, i) => {
  const state = STATES[i % STATES.length];
  const active = state === "running" || state === "leased";
  const res = { cpu_millis: 250 * (1 + (i % 4)), memory_mb: 512 };
  return {
    apiVersion: A,
    kind: "Task",
    metadata: { name: `t${String(i).padStart(7, "0")}`, labels: { "loom.dev/campaign": `c${i % 20}` } },
    spec: { campaign_id: `c${i % 20}`, priority: i % 3, execution_profile: { placement: "shared", resources: res } },
    status: {
      state,
      created_order: i,
      ...(active
        ? {
            lease: {
              worker: `w${String(i % WORKERS).padStart(4, "0")}`,
              epoch: 1,
              leased_at: "",
              lease_until: "",
              reservation: res,
            },
          }
        : {}),
      conditions: [
        { type: "Admitted", status: "False", reason: i % 2 ? "insufficient_resources" : "concurrency_limit" },
      ],
    },
  };
});

const taskRows = tasks.map(taskRow);
const workerObjs = workers.map(workerObj);
const sel = parseSelector("loom.dev/campaign=c3");
const lines: [string, number][] = [
  ["taskRow for 100,000 watched tasks (a full relist)", time(() => void tasks.map(taskRow), 5)],
  [
    "workers page: rows of 1,000 workers",
    time(() => void sortWorkers(workerRows(workerObjs), { key: "use:cpu_millis", desc: true })),
  ],
  [
    "queue page: filter and order 100,000 tasks (no filter)",
    time(
      () =>
        void filterTasks(taskRows, { campaign: "", state: "", reason: "", worker: "", text: "", selector: () => true }),
    ),
  ],
  [
    "queue page: filter 100,000 tasks by label and state",
    time(
      () =>
        void filterTasks(taskRows, {
          campaign: "",
          state: "pending",
          reason: "",
          worker: "",
          text: "",
          selector: sel.ok ? sel.match : () => true,
        }),
    ),
  ],
  [
    "queue page: the state, campaign, reason and worker menus",
    time(() => {
      for (const k of ["state", "campaign", "reason", "worker"] as const) countBy(taskRows, (t) => t[k]);
    }),
  ],
  ["campaigns page: progress of 20 campaigns over 100,000 tasks", time(() => void campaignRows([], taskRows))],
];
for (const [name, ms] of lines) console.log(`${name.padEnd(62)} ${ms.toFixed(1).padStart(8)} ms`);
