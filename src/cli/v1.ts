// The verbs of v1's Hub CLI that Loom names differently or had not had, with v1's flags.
// Each is a thin mapping onto the Hub API Loom already serves and prints the Hub's JSON
// answer, as v1 did, so a script that parses it keeps working. `--operator` is recorded
// with the action where the Hub records one.
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { inventoryToWorkers } from "../resources/inventory.ts";
import { formatInputError, isPlainObject } from "../resources/input-errors.ts";
import { UsageError } from "./client.ts";
import { clientOf, err, intFlag, printJson, withController } from "./common.ts";

type Json = Record<string, unknown>;

const DISPATCH_SCHEMA_VERSION = 1;

/** A JSON file, or stdin for "-"; the error names the argument. */
function readJson(path: string, what: string): unknown {
  let text: string;
  try {
    text = path === "-" ? readFileSync(0, "utf8") : readFileSync(path, "utf8");
  } catch (e) {
    throw new UsageError(`${what}: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return JSON.parse(text.replace(/^\uFEFF/, ""));
  } catch (e) {
    throw new UsageError(`${what}: ${path} is not JSON: ${(e as Error).message}`);
  }
}

/** A v1 verb: its name, what it maps to, and an action whose answer is printed as JSON. */
function v1Verb(
  name: string,
  description: string,
  run: (o: any, cmd: Command, ...args: any[]) => Promise<unknown>,
): Command {
  return withController(new Command(name))
    .description(description)
    .action(async (...args: unknown[]) => {
      const cmd = args.at(-1) as Command;
      const o = args.at(-2);
      printJson(await run(o, cmd, ...args.slice(0, -2)));
    });
}

export function dispatchSmokeCommand(): Command {
  return v1Verb(
    "dispatch-smoke",
    "dispatch COUNT shell tasks that run one command, to check a Hub and its Runners (POST /api/tasks/dispatch)",
    (o, cmd) => {
      const tasks = Array.from({ length: o.count }, (_, i) => ({
        task_id: `${o.prefix}-${i + 1}`,
        required_capability: o.requiredCapability,
        package_id: `${o.prefix}-package`,
        payload: { runner: "shell", command: o.command, timeout_seconds: o.timeoutSeconds },
      }));
      return clientOf(cmd).post("/api/tasks/dispatch", {
        schema_version: DISPATCH_SCHEMA_VERSION,
        operator: o.operator,
        tasks,
      });
    },
  )
    .option("--count <n>", "how many tasks", intFlag("--count", 1), 1)
    .option("--prefix <text>", "task ids are PREFIX-1, PREFIX-2, ...", "smoke-task")
    .option("--required-capability <name>", "capability a worker must offer", "linux")
    .option("--operator <name>", "who dispatched them", "local-smoke")
    .option("--command <command>", "the shell command each task runs", `python3 -c "print('loom smoke ok')"`)
    .option("--timeout-seconds <n>", "command timeout", intFlag("--timeout-seconds", 1), 60);
}

export function dispatchSpecCommand(): Command {
  return v1Verb(
    "dispatch-spec",
    "dispatch a v1 dispatch document (schema_version 1, tasks[]) from a file or stdin (POST /api/tasks/dispatch)",
    (o, cmd, spec: string) => {
      const body = readJson(spec, "spec");
      if (!isPlainObject(body)) throw new UsageError("spec: must be a JSON object (schema_version, tasks)");
      return clientOf(cmd).post("/api/tasks/dispatch", { operator: o.operator, ...body });
    },
  )
    .argument("<spec>", "JSON dispatch document, or - for stdin")
    .option("--operator <name>", "who dispatched it, unless the document names one", "local-operator");
}

export function dispatchOracleCommand(): Command {
  return v1Verb(
    "dispatch-oracle",
    "dispatch an Oracle for an execution result (POST /api/oracles/dispatch; Loom's Hub answers 501: it runs no Oracle children)",
    (o, cmd, oracle: string) => {
      const spec = readJson(oracle, "oracle");
      if (!isPlainObject(spec)) throw new UsageError("oracle: must be a JSON object");
      return clientOf(cmd).post("/api/oracles/dispatch", {
        schema_version: DISPATCH_SCHEMA_VERSION,
        operator: o.operator,
        execution_result_id: o.executionResultId,
        oracle: spec,
      });
    },
  )
    .argument("<oracle>", "versioned Oracle JSON object")
    .requiredOption("--execution-result-id <id>", "the result the Oracle judges")
    .option("--operator <name>", "who dispatched it", "local-operator");
}

export function summaryCommand(): Command {
  return v1Verb(
    "summary",
    "one JSON document of the Hub's state: health, hosts, workers, capacity, cache, tasks, results, error rate and log",
    async (o, cmd) => {
      const c = clientOf(cmd);
      const parts: [string, string, Json?][] = [
        ["health", "/api/healthz"],
        ["worker_hosts", "/api/data/worker-hosts"],
        ["workers", "/api/data/active-workers"],
        ["worker_capacity", "/api/data/worker-capacity"],
        ["worker_cache", "/api/data/worker-cache"],
        ["tasks", "/api/tasks", { limit: 200 }],
        ["results", "/api/data/new-results", { cursor: o.cursor, limit: 200 }],
        ["oracle_outcomes", "/api/data/oracle-outcomes", { limit: 200 }],
        ["error_rate", "/api/data/error-rate", { by: "state", window_seconds: 86400 }],
        ["control_log", "/api/data/control-log", { limit: 100 }],
      ];
      const answers = await Promise.all(parts.map(([, path, q]) => c.get(path, q as Record<string, string | number>)));
      return Object.fromEntries(parts.map(([key], i) => [key, answers[i]]));
    },
  ).option("--cursor <n>", "results after this cursor", intFlag("--cursor"), 0);
}

export function workerCacheCommand(): Command {
  return v1Verb(
    "worker-cache",
    "each worker's source cache as its Runner last reported it (GET /api/data/worker-cache)",
    (_o, cmd) => clientOf(cmd).get("/api/data/worker-cache"),
  );
}

export function capabilitiesCommand(): Command {
  return v1Verb("capabilities", "the Hub's versions and capabilities (GET /api/meta)", (_o, cmd) =>
    clientOf(cmd).get("/api/meta"),
  );
}

export function setWorkerConcurrencyCommand(): Command {
  return v1Verb(
    "set-worker-concurrency",
    "set a worker's desired concurrency, clamped to 1..max (v1 name of set-concurrency)",
    (o, cmd) =>
      clientOf(cmd).post("/api/admin/set-worker-concurrency", {
        worker_id: o.workerId,
        desired_concurrency: o.desiredConcurrency,
        operator: o.operator,
        reason: o.reason,
      }),
  )
    .requiredOption("--worker-id <id>", "the worker")
    .requiredOption("--desired-concurrency <n>", "desired concurrency", intFlag("--desired-concurrency", 1))
    .option("--operator <name>", "who changed it", "local-admin")
    .option("--reason <text>", "why, recorded in the worker's events", "manual concurrency update");
}

export function registerWorkerHostsCommand(): Command {
  return v1Verb(
    "register-worker-hosts",
    "declare the workers of a v1 inventory file on the Hub (POST /api/admin/register-worker-hosts)",
    (o, cmd, path: string) => {
      const inventory = readJson(path, "inventory");
      // Checked here first with the Hub's own reader, so a bad file names its field and sends nothing.
      const r = inventoryToWorkers(inventory);
      for (const n of r.notes) err(`note: ${path}: ${formatInputError(n)}\n`);
      if (r.errors.length)
        throw new UsageError(
          `inventory ${path} is invalid:\n${r.errors.map((e) => `  ${formatInputError(e)}`).join("\n")}`,
        );
      return clientOf(cmd).post("/api/admin/register-worker-hosts", { operator: o.operator, inventory });
    },
  )
    .argument("<inventory>", "inventory file (inventory_version 1)")
    .option("--operator <name>", "who registered them", "local-admin");
}

export function retryTaskCommand(): Command {
  return v1Verb("retry-task", "queue a task for another attempt (v1 name of retry)", (o, cmd) =>
    clientOf(cmd).post("/api/admin/retry-task", {
      task_id: o.taskId,
      operator: o.operator,
      preserve_excluded_workers: Boolean(o.preserveExcludedWorkers),
    }),
  )
    .requiredOption("--task-id <id>", "the task")
    .option("--operator <name>", "who retried it", "local-admin")
    .option("--preserve-excluded-workers", "keep the workers a different_worker retry excluded");
}

export function pushTaskCommand(): Command {
  return v1Verb(
    "push-task",
    "lease a queued task to a Direct Runner and deliver it (POST /api/admin/push-task)",
    (o, cmd) =>
      clientOf(cmd).post("/api/admin/push-task", {
        task_id: o.taskId,
        worker_id: o.workerId,
        operator: o.operator,
        lease_seconds: o.leaseSeconds,
        push_timeout_seconds: o.pushTimeoutSeconds,
      }),
  )
    .requiredOption("--task-id <id>", "the task")
    .option("--worker-id <id>", "the Direct Runner; omit to let the Hub choose, preferring a cache hit")
    .option("--operator <name>", "who pushed it", "direct-push")
    .option("--lease-seconds <n>", "lease length", intFlag("--lease-seconds", 30), 600)
    .option(
      "--push-timeout-seconds <n>",
      "how long to wait for the Runner to accept",
      intFlag("--push-timeout-seconds", 10),
      30,
    );
}

export function v1Commands(): Command[] {
  return [
    dispatchSmokeCommand(),
    dispatchSpecCommand(),
    dispatchOracleCommand(),
    summaryCommand(),
    workerCacheCommand(),
    capabilitiesCommand(),
    setWorkerConcurrencyCommand(),
    registerWorkerHostsCommand(),
    retryTaskCommand(),
    pushTaskCommand(),
  ];
}
