// Operator verbs over the admin API (RUNNER_PROTOCOL 1b): cordon / uncordon (block, unblock),
// cancel / retry a task, and a worker's desired concurrency. Each prints what it did.
import { Command } from "commander";
import { clientOf, intFlag, out, outputOption, withController } from "./common.ts";
import { formatObject } from "./printers.ts";

type Reply = Record<string, unknown>;

function adminVerb(
  name: string,
  description: string,
  arg: string,
  run: (id: string, o: any, cmd: Command) => Promise<{ reply: Reply; line: string }>,
): Command {
  return withController(new Command(name))
    .description(description)
    .argument(`<${arg}>`, arg === "worker" ? "worker id" : "task id")
    .addOption(outputOption(["json", "yaml"]))
    .action(async (id: string, o: { output?: "json" | "yaml" }, cmd: Command) => {
      const { reply, line } = await run(id, o, cmd);
      out(o.output ? formatObject(reply, o.output) : `${line}\n`);
    });
}

const post = (cmd: Command, path: string, body: Reply) => clientOf(cmd).post<Reply>(path, body);

export function cordonCommand(): Command {
  return adminVerb(
    "cordon",
    "mark a worker unschedulable: no new leases (its active leases run on)",
    "worker",
    async (id, _o, cmd) => ({
      reply: await post(cmd, "/api/admin/block-worker", { worker_id: id }),
      line: `worker/${id} cordoned`,
    }),
  );
}

export function uncordonCommand(): Command {
  return adminVerb("uncordon", "mark a worker schedulable again", "worker", async (id, _o, cmd) => ({
    reply: await post(cmd, "/api/admin/unblock-worker", { worker_id: id }),
    line: `worker/${id} uncordoned`,
  }));
}

export function cancelCommand(): Command {
  return adminVerb(
    "cancel",
    "cancel a task; an active lease is ended and its reservation released",
    "task",
    async (id, _o, cmd) => {
      const reply = await post(cmd, "/api/admin/cancel-task", { task_id: id });
      return {
        reply,
        line:
          reply.old_state === reply.new_state
            ? `task/${id} already ${reply.new_state}`
            : `task/${id} cancelled (was ${reply.old_state})`,
      };
    },
  );
}

export function retryCommand(): Command {
  return adminVerb(
    "retry",
    "queue a task for another attempt",
    "task",
    async (id, o: { preserveExcludedWorkers?: boolean }, cmd) => {
      const reply = await post(cmd, "/api/admin/retry-task", {
        task_id: id,
        preserve_excluded_workers: Boolean(o.preserveExcludedWorkers),
      });
      return {
        reply,
        line: `task/${id} ${reply.new_state ?? "retried"} (was ${reply.old_state}, attempt ${reply.attempt_no ?? "?"})`,
      };
    },
  ).option("--preserve-excluded-workers", "keep the workers a different_worker retry excluded");
}

export function setConcurrencyCommand(): Command {
  return withController(new Command("set-concurrency"))
    .description("set a worker's desired concurrency (clamped to 1..max_concurrency)")
    .argument("<worker>", "worker id")
    .argument("<n>", "desired concurrency", intFlag("N", 1))
    .option("--reason <text>", "why, recorded in the worker's events")
    .addOption(outputOption(["json", "yaml"]))
    .action(async (id: string, n: number, o: { reason?: string; output?: "json" | "yaml" }, cmd: Command) => {
      const reply = await post(cmd, "/api/admin/set-worker-concurrency", {
        worker_id: id,
        desired_concurrency: n,
        ...(o.reason ? { reason: o.reason } : {}),
      });
      out(
        o.output
          ? formatObject(reply, o.output)
          : `worker/${id} desired concurrency ${reply.desired_concurrency} (max ${reply.max_concurrency})\n`,
      );
    });
}
