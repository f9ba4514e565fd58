// The contract's verbs (RESOURCE_ADMISSION.md), with its flags: worker-capacity,
// task-admission and dispatch-repo-run. `-o json` prints the data API's answer unchanged.
import { Command, Option } from "commander";
import { CliError } from "./client.ts";
import {
  clientOf,
  collect,
  forScripts,
  intFlag,
  keyValueFlag,
  listFlag,
  out,
  outputOption,
  withController,
} from "./common.ts";
import type { CapacityEntry, DispatchReply, TaskAdmission, WorkerCapacityReply } from "../protocol/types.gen.ts";
import {
  DIMENSIONS,
  formatObject,
  formatRequests,
  formatShortfalls,
  formatTable,
  NONE,
  ratio,
  type Column,
  visibleColumns,
} from "./printers.ts";

type Format = "wide" | "json" | "yaml" | "table";

export const capacityColumns: Column<CapacityEntry>[] = [
  { name: "WORKER", priority: 0, cell: (w) => w.worker_id },
  { name: "STATUS", priority: 0, cell: (w) => w.status ?? NONE },
  { name: "ACTIVE/LIMIT", priority: 0, cell: (w) => ratio(w.active_count, w.effective_limit) },
  ...DIMENSIONS.map((d): Column<CapacityEntry> => ({
    name: d.label,
    priority: 0,
    cell: (w) => ratio(w.reserved?.[d.field], w.capacity?.[d.field], d.unit),
  })),
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
    .description(
      "every worker's capacity, reserved resources, available headroom and active/limit (GET /api/data/worker-capacity); JSON when piped",
    )
    .addOption(outputOption(["table", "wide", "json", "yaml"]))
    .action(async (o: { output?: Format }, cmd: Command) => {
      const body = await clientOf(cmd).get<WorkerCapacityReply>("/api/data/worker-capacity");
      const output = forScripts(o.output);
      if (output === "json" || output === "yaml") return out(formatObject(body, output));
      if (!body.workers.length) return void process.stderr.write("No workers.\n");
      out(formatTable(visibleColumns(capacityColumns, o.output === "wide"), body.workers, new Date()));
    });
}

export const admissionColumns: Column<TaskAdmission["workers"][number]>[] = [
  { name: "WORKER", priority: 0, cell: (w) => w.worker_id },
  { name: "OK", priority: 0, cell: (w) => String(w.ok) },
  { name: "REASONS", priority: 0, cell: (w) => (w.reasons?.length ? w.reasons.join(",") : (w.reason ?? NONE)) },
  {
    name: "ACTIVE/LIMIT",
    priority: 0,
    cell: (w) => ratio(w.concurrency?.active_count, w.concurrency?.effective_limit),
  },
  { name: "SHORTFALLS (NEED/FREE)", priority: 0, cell: (w) => formatShortfalls(w.shortfalls) },
  { name: "EXPLANATION", priority: 1, cell: (w) => w.explanation ?? NONE },
];

export function taskAdmissionCommand(): Command {
  return withController(new Command("task-admission"))
    .description("explain why a task can or cannot land on each worker (GET /api/data/task-admission); JSON when piped")
    .requiredOption("--task-id <id>", "the task to explain")
    .addOption(outputOption(["table", "wide", "json", "yaml"]))
    .action(async (o: { taskId: string; output?: Format }, cmd: Command) => {
      const body = await clientOf(cmd).get<TaskAdmission>("/api/data/task-admission", { task_id: o.taskId });
      const output = forScripts(o.output);
      if (output === "json" || output === "yaml") return out(formatObject(body, output));
      const profile = body.execution_profile;
      out(`${body.summary ?? NONE}\n`);
      out(
        `task ${body.task_id}: state ${body.state ?? NONE}, placement ${profile?.placement ?? "shared"}, requests ${formatRequests(profile?.resources)}${body.unsatisfiable ? ", unsatisfiable" : ""}\n\n`,
      );
      if (body.workers.length)
        out(formatTable(visibleColumns(admissionColumns, o.output === "wide"), body.workers, new Date()));
    });
}

type DispatchFlags = {
  repoUrl: string;
  command: string[];
  commit?: string;
  ref?: string;
  depth?: number;
  sourceTokenEnv?: string;
  placement?: string;
  cpuMillis?: number;
  memoryMb?: number;
  diskMb?: number;
  gpuCount?: number;
  gpuType?: string[];
  gpuTypes?: string[];
  taskId?: string;
  packageId?: string;
  campaignId?: string;
  caseId?: string;
  settingId?: string;
  runId?: string;
  requiredCapability?: string;
  priority?: number;
  timeoutSeconds?: number;
  materializeTimeoutSeconds?: number;
  continueOnError?: boolean;
  env?: Record<string, string>;
  artifact?: string[];
  operator?: string;
  output?: "json" | "yaml" | "table";
};

/** The flags as the dispatch-repo-run body: snake_case, only what was given; several --command flags are steps. */
export function repoRunBody(o: DispatchFlags): Record<string, unknown> {
  const map: [keyof DispatchFlags, string][] = [
    ["repoUrl", "repo_url"],
    ["commit", "commit"],
    ["ref", "ref"],
    ["depth", "depth"],
    ["sourceTokenEnv", "source_token_env"],
    ["placement", "placement"],
    ["cpuMillis", "cpu_millis"],
    ["memoryMb", "memory_mb"],
    ["diskMb", "disk_mb"],
    ["gpuCount", "gpu_count"],
    ["taskId", "task_id"],
    ["packageId", "package_id"],
    ["campaignId", "campaign_id"],
    ["caseId", "case_id"],
    ["settingId", "setting_id"],
    ["runId", "run_id"],
    ["requiredCapability", "required_capability"],
    ["priority", "priority"],
    ["timeoutSeconds", "timeout_seconds"],
    ["materializeTimeoutSeconds", "materialize_timeout_seconds"],
    ["continueOnError", "continue_on_error"],
    ["env", "env"],
    ["artifact", "artifact_paths"],
    ["operator", "operator"],
  ];
  const body = Object.fromEntries(map.filter(([k]) => o[k] !== undefined).map(([k, f]) => [f, o[k]]));
  const gpuTypes = [...(o.gpuTypes ?? []), ...(o.gpuType ?? [])];
  if (gpuTypes.length) body.gpu_types = gpuTypes;
  if (o.command.length === 1) body.command = o.command[0];
  else body.commands = o.command;
  return body;
}

export function dispatchRepoRunCommand(): Command {
  return withController(new Command("dispatch-repo-run"))
    .description(
      "dispatch one repository task with an execution profile, no manifest needed (POST /api/tasks/dispatch-repo-run); JSON when piped",
    )
    .requiredOption("--repo-url <url>", "git repository to run")
    .requiredOption(
      "--command <command>",
      "shell command to run in the checkout; repeat for several steps, run in order",
      collect,
    )
    .option("--commit <sha>", "commit to check out")
    .option("--ref <ref>", "branch or tag to check out")
    .option("--depth <n>", "clone depth", intFlag("--depth", 1))
    .option("--source-token-env <name>", "environment variable on the worker holding a token for a private repository")
    .addOption(new Option("--placement <placement>", "shared (default) or exclusive").choices(["shared", "exclusive"]))
    .option("--cpu-millis <n>", "CPU reservation in millicores", intFlag("--cpu-millis"))
    .option("--memory-mb <n>", "memory reservation in MB", intFlag("--memory-mb"))
    .option("--disk-mb <n>", "ephemeral disk reservation in MB", intFlag("--disk-mb"))
    .option("--gpu-count <n>", "accelerators required", intFlag("--gpu-count"))
    .option("--gpu-type <type>", "an acceptable accelerator type; repeat for several (needs --gpu-count > 0)", collect)
    .option("--gpu-types <a,b>", "acceptable accelerator types as one list", listFlag("--gpu-types"))
    .option(
      "--env <KEY=VALUE>",
      "environment for the steps; repeat for several (no long-lived secrets)",
      keyValueFlag("--env"),
    )
    .option("--artifact <path>", "a path or glob to keep in the result; repeat for several", collect)
    .option("--task-id <id>", "task id; an id that exists already is a conflict (default: a fresh uuid-based id)")
    .option("--package-id <id>", "package id (default: pkg-TASK)")
    .option("--campaign-id <id>", "campaign id (default: dispatch)")
    .option("--case-id <id>", "case id (default: repo-run)")
    .option("--setting-id <id>", "setting id (default: default)")
    .option("--run-id <id>", "run id (default: a fresh uuid)")
    .option("--required-capability <name>", "capability a worker must offer (default: linux)")
    .option("--priority <n>", "higher is claimed first", intFlag("--priority", -(2 ** 31)))
    .option("--timeout-seconds <n>", "timeout of each step", intFlag("--timeout-seconds", 1))
    .option("--materialize-timeout-seconds <n>", "timeout of the checkout", intFlag("--materialize-timeout-seconds", 1))
    .option("--continue-on-error", "run the later steps after a step fails")
    .option("--operator <name>", "who dispatched it, recorded in the task's events")
    .addOption(outputOption(["table", "json", "yaml"]))
    .action(async (o: DispatchFlags, cmd: Command) => {
      const body = await clientOf(cmd).post<DispatchReply>("/api/tasks/dispatch-repo-run", repoRunBody(o));
      const output = forScripts(o.output);
      if (output === "json" || output === "yaml") out(formatObject(body, output));
      else for (const t of body.created) out(`task/${t.task_id} created\n`);
      // An id given twice is a mistake a script must see: nothing new was dispatched.
      const again = body.existing[0];
      if (again)
        throw new CliError(
          `task "${again.task_id}" already exists (${again.state ?? "queued"}); nothing was dispatched. Omit --task-id for a fresh id, or choose another`,
          1,
          "task_id_conflict",
        );
    });
}
