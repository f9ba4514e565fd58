// The contract's verbs (RESOURCE_ADMISSION.md), with its flags: worker-capacity,
// task-admission and dispatch-repo-run. `-o json` prints the data API's answer unchanged.
import { Command, Option } from "commander";
import { clientOf, intFlag, listFlag, out, outputOption, withController } from "./common.ts";
import type { CapacityEntry, TaskAdmission } from "./data-api.ts";
import { DIMENSIONS, formatObject, formatRequests, formatShortfalls, formatTable, NONE, ratio, type Column, visibleColumns } from "./printers.ts";

type Format = "wide" | "json" | "yaml";

export const capacityColumns: Column<CapacityEntry>[] = [
  { name: "WORKER", priority: 0, cell: (w) => w.worker_id },
  { name: "STATUS", priority: 0, cell: (w) => w.status ?? NONE },
  { name: "ACTIVE/LIMIT", priority: 0, cell: (w) => ratio(w.active_count, w.effective_limit) },
  ...DIMENSIONS.map((d): Column<CapacityEntry> => ({ name: d.label, priority: 0, cell: (w) => ratio(w.reserved?.[d.field], w.capacity?.[d.field], d.unit) })),
  { name: "AVAILABLE", priority: 0, cell: (w) => availableText(w) },
  { name: "GPU TYPES", priority: 1, cell: (w) => w.capacity?.gpu_types?.join(",") || NONE },
  { name: "EXCLUSIVE", priority: 1, cell: (w) => String(Boolean(w.exclusive_active)) },
  { name: "ACTIVE TASKS", priority: 1, cell: (w) => w.active_task_ids?.join(",") || NONE },
];

/** `cpu=3250m,mem=4608Mi,disk=27952Mi,gpu=0`: every dimension, zeros included (headroom of 0 is news). */
function availableText(w: CapacityEntry): string {
  const a = w.available;
  if (!a) return NONE;
  return DIMENSIONS.map((d) => `${d.label.toLowerCase()}=${a[d.field] ?? 0}${d.unit}`).join(",");
}

export function workerCapacityCommand(): Command {
  return withController(new Command("worker-capacity"))
    .description("every worker's capacity, reserved resources, available headroom and active/limit (GET /api/data/worker-capacity)")
    .addOption(outputOption(["wide", "json", "yaml"]))
    .action(async (o: { output?: Format }, cmd: Command) => {
      const body = await clientOf(cmd).get<{ workers: CapacityEntry[] }>("/api/data/worker-capacity");
      if (o.output === "json" || o.output === "yaml") return out(formatObject(body, o.output));
      if (!body.workers.length) return void process.stderr.write("No workers.\n");
      out(formatTable(visibleColumns(capacityColumns, o.output === "wide"), body.workers, new Date()));
    });
}

export const admissionColumns: Column<TaskAdmission["workers"][number]>[] = [
  { name: "WORKER", priority: 0, cell: (w) => w.worker_id },
  { name: "OK", priority: 0, cell: (w) => String(w.ok) },
  { name: "REASONS", priority: 0, cell: (w) => (w.reasons?.length ? w.reasons.join(",") : (w.reason ?? NONE)) },
  { name: "ACTIVE/LIMIT", priority: 0, cell: (w) => ratio(w.concurrency?.active_count, w.concurrency?.effective_limit) },
  { name: "SHORTFALLS (NEED/FREE)", priority: 0, cell: (w) => formatShortfalls(w.shortfalls) },
  { name: "EXPLANATION", priority: 1, cell: (w) => w.explanation ?? NONE },
];

export function taskAdmissionCommand(): Command {
  return withController(new Command("task-admission"))
    .description("explain why a task can or cannot land on each worker (GET /api/data/task-admission)")
    .requiredOption("--task-id <id>", "the task to explain")
    .addOption(outputOption(["wide", "json", "yaml"]))
    .action(async (o: { taskId: string; output?: Format }, cmd: Command) => {
      const body = await clientOf(cmd).get<TaskAdmission>("/api/data/task-admission", { task_id: o.taskId });
      if (o.output === "json" || o.output === "yaml") return out(formatObject(body, o.output));
      const profile = body.execution_profile;
      out(`${body.summary ?? NONE}\n`);
      out(`task ${body.task_id}: state ${body.state ?? NONE}, placement ${profile?.placement ?? "shared"}, requests ${formatRequests(profile?.resources)}${body.unsatisfiable ? ", unsatisfiable" : ""}\n\n`);
      if (body.workers.length) out(formatTable(visibleColumns(admissionColumns, o.output === "wide"), body.workers, new Date()));
    });
}

type DispatchFlags = {
  repoUrl: string;
  command: string;
  commit?: string;
  ref?: string;
  placement?: string;
  cpuMillis?: number;
  memoryMb?: number;
  diskMb?: number;
  gpuCount?: number;
  gpuTypes?: string[];
  taskId?: string;
  campaignId?: string;
  caseId?: string;
  settingId?: string;
  runId?: string;
  requiredCapability?: string;
  priority?: number;
  timeoutSeconds?: number;
  output?: "json" | "yaml";
};

/** The flags as the dispatch-repo-run body: snake_case, only what was given. */
export function repoRunBody(o: DispatchFlags): Record<string, unknown> {
  const map: [keyof DispatchFlags, string][] = [
    ["repoUrl", "repo_url"], ["command", "command"], ["commit", "commit"], ["ref", "ref"], ["placement", "placement"],
    ["cpuMillis", "cpu_millis"], ["memoryMb", "memory_mb"], ["diskMb", "disk_mb"], ["gpuCount", "gpu_count"], ["gpuTypes", "gpu_types"],
    ["taskId", "task_id"], ["campaignId", "campaign_id"], ["caseId", "case_id"], ["settingId", "setting_id"], ["runId", "run_id"],
    ["requiredCapability", "required_capability"], ["priority", "priority"], ["timeoutSeconds", "timeout_seconds"],
  ];
  return Object.fromEntries(map.filter(([k]) => o[k] !== undefined).map(([k, f]) => [f, o[k]]));
}

export function dispatchRepoRunCommand(): Command {
  return withController(new Command("dispatch-repo-run"))
    .description("dispatch one repository task with an execution profile, no manifest needed (POST /api/tasks/dispatch-repo-run)")
    .requiredOption("--repo-url <url>", "git repository to run")
    .requiredOption("--command <command>", "shell command to run in the checkout")
    .option("--commit <sha>", "commit to check out")
    .option("--ref <ref>", "branch or tag to check out")
    .addOption(new Option("--placement <placement>", "shared (default) or exclusive").choices(["shared", "exclusive"]))
    .option("--cpu-millis <n>", "CPU reservation in millicores", intFlag("--cpu-millis"))
    .option("--memory-mb <n>", "memory reservation in MB", intFlag("--memory-mb"))
    .option("--disk-mb <n>", "ephemeral disk reservation in MB", intFlag("--disk-mb"))
    .option("--gpu-count <n>", "accelerators required", intFlag("--gpu-count"))
    .option("--gpu-types <a,b>", "acceptable accelerator types (needs --gpu-count > 0)", listFlag("--gpu-types"))
    .option("--task-id <id>", "task id (default: campaign__case__setting__run-RUN)")
    .option("--campaign-id <id>", "campaign id (default: dispatch)")
    .option("--case-id <id>", "case id (default: repo-run)")
    .option("--setting-id <id>", "setting id (default: default)")
    .option("--run-id <id>", "run id (default: a timestamp)")
    .option("--required-capability <name>", "capability a worker must offer (default: linux)")
    .option("--priority <n>", "higher is claimed first", intFlag("--priority", -(2 ** 31)))
    .option("--timeout-seconds <n>", "command timeout", intFlag("--timeout-seconds", 1))
    .addOption(outputOption(["json", "yaml"]))
    .action(async (o: DispatchFlags, cmd: Command) => {
      const body = await clientOf(cmd).post<{ created: { task_id: string; state?: string }[]; existing: { task_id: string; state?: string }[] }>("/api/tasks/dispatch-repo-run", repoRunBody(o));
      if (o.output) return out(formatObject(body, o.output));
      for (const t of body.created) out(`task/${t.task_id} created\n`);
      for (const t of body.existing) out(`task/${t.task_id} unchanged (exists, ${t.state ?? "queued"})\n`);
    });
}
