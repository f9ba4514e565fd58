// Results from the CLI: `loom logs TASK` prints an attempt's stdout and stderr from its result
// ZIP, `loom get results` lists the ZIPs, `loom result download ID -o FILE` saves one.
import { writeFile } from "node:fs/promises";
import { Command } from "commander";
import { readZip } from "../results/zip.ts";
import { CliError, type Client } from "./client.ts";
import { clientOf, err, intFlag, out, withController } from "./common.ts";
import { list, selectors, watchLoop } from "./list-watch.ts";
import { resolveKind } from "./kinds.ts";
import { age, formatTable } from "./printers.ts";

export type ResultRow = {
  result_id: string;
  task_id: string;
  attempt_no: number;
  worker_id: string | null;
  verdict: string;
  bytes: number;
  issues: string[];
  uploaded_at: string;
};
type TaskObj = { status?: { state?: string; attempt?: number; error?: unknown } };

export const resultsOf = async (client: Client, taskId?: string) =>
  (await client.get<{ results: ResultRow[] }>("/api/results", { task_id: taskId })).results;

export async function download(client: Client, id: string): Promise<Buffer> {
  const res = await client.fetch("GET", `/api/results/${encodeURIComponent(id)}`);
  return Buffer.from(await res.arrayBuffer());
}

/** stdout.txt, stderr.txt and the exit code of a result ZIP (entries may sit under an attempt folder). */
export async function attemptOutput(zip: Buffer): Promise<{ stdout: string; stderr: string; exitCode?: number }> {
  const entries = await readZip(zip);
  const find = (suffix: string) =>
    [...entries].find(([n]) => n === suffix || n.endsWith(`/${suffix}`))?.[1]?.toString("utf8");
  let exitCode: number | undefined;
  try {
    const wr = JSON.parse(find("worker-result.json") ?? "{}") as { exit_code?: unknown };
    if (typeof wr.exit_code === "number") exitCode = wr.exit_code;
  } catch {
    // a result without a readable worker-result.json has no exit code to show
  }
  return { stdout: find("stdout.txt") ?? "", stderr: find("stderr.txt") ?? "", exitCode };
}

export function logsCommand(): Command {
  return withController(new Command("logs"))
    .description("print an attempt's stdout and stderr from its result (the latest attempt unless --attempt)")
    .argument("<task>", "task name")
    .option("--attempt <n>", "attempt number", intFlag("--attempt", 1))
    .option("-f, --follow", "wait for the attempt's result if it has none yet (Ctrl-C ends)")
    .action(async (task: string, o: { attempt?: number; follow?: boolean }, cmd: Command) => {
      const client = clientOf(cmd);
      const t = await client.get<TaskObj>(`/apis/loom.dev/v1alpha1/tasks/${encodeURIComponent(task)}`);
      // Listed before the results are read: a result uploaded after this revision changes the task after it too.
      const since = o.follow ? await list(client, tasksKind(), selectors(tasksKind(), {}, task)) : undefined;
      const results = await resultsOf(client, task);
      const attempt =
        o.attempt ??
        (results.length && !o.follow ? Math.max(...results.map((r) => r.attempt_no)) : (t.status?.attempt ?? 1));
      let r = latestOf(results, attempt);
      if (!r) {
        if (!since)
          throw new CliError(
            `attempt ${attempt} of task ${task} has no result yet (state ${t.status?.state ?? "queued"}); -f waits for it`,
            1,
            "NotFound",
          );
        err(`waiting for the result of ${task} attempt ${attempt}...\n`);
        r = await awaitResult(client, task, attempt, since);
      }
      const { stdout, stderr, exitCode } = await attemptOutput(await download(client, r.result_id));
      out(stdout);
      out(stderr);
      err(
        `--- ${task} attempt ${attempt} on ${r.worker_id ?? "?"}: ${r.verdict}${exitCode === undefined ? "" : `, exit code ${exitCode}`}${r.issues.length ? ` (${r.issues.join(", ")})` : ""}\n`,
      );
    });
}

const tasksKind = () => resolveKind("tasks");
const latestOf = (results: ResultRow[], attempt: number) => results.filter((x) => x.attempt_no === attempt).at(-1);

/**
 * Follow the task's watch from `since` until the attempt has a result. A result is written in
 * the same transaction as the task's status, so every upload arrives as a change to the task;
 * each change reads the result list again, one read at a time.
 */
async function awaitResult(
  client: Client,
  task: string,
  attempt: number,
  since: Awaited<ReturnType<typeof list>>,
): Promise<ResultRow> {
  const ac = new AbortController();
  let found: ResultRow | undefined;
  let failed: { error: unknown } | undefined;
  let reads = Promise.resolve();
  const reread = () => {
    reads = reads.then(async () => {
      if (ac.signal.aborted) return;
      try {
        found = latestOf(await resultsOf(client, task), attempt);
      } catch (error) {
        failed = { error };
      }
      if (found || failed) ac.abort();
    });
  };
  try {
    await watchLoop(client, tasksKind(), selectors(tasksKind(), {}, task), since, {
      show: reread,
      log: (l) => err(`${l}\n`),
      signal: ac.signal,
    });
  } catch (e) {
    if (!ac.signal.aborted) throw e;
  }
  await reads;
  if (failed) throw failed.error;
  return found!;
}

export function getResultsTable(rows: ResultRow[], now = new Date()): string {
  return formatTable(
    [
      { name: "RESULT", priority: 0, cell: (r: ResultRow) => r.result_id },
      { name: "TASK", priority: 0, cell: (r) => r.task_id },
      { name: "ATTEMPT", priority: 0, cell: (r) => String(r.attempt_no) },
      { name: "WORKER", priority: 0, cell: (r) => r.worker_id ?? "<none>" },
      { name: "VERDICT", priority: 0, cell: (r) => r.verdict },
      { name: "ISSUES", priority: 0, cell: (r) => r.issues.join(",") || "<none>" },
      { name: "BYTES", priority: 0, cell: (r) => String(r.bytes) },
      { name: "AGE", priority: 0, cell: (r, n) => age(r.uploaded_at, n) },
    ],
    rows,
    now,
  );
}

export function resultCommand(): Command {
  const result = new Command("result").description("result ZIPs");
  withController(result.command("download"))
    .description("save a result ZIP")
    .argument("<id>", "result id (loom get results)")
    .requiredOption("-o, --output <file>", "file to write")
    .action(async (id: string, o: { output: string }, cmd: Command) => {
      const zip = await download(clientOf(cmd), id);
      await writeFile(o.output, zip);
      out(`${o.output}: ${zip.length} bytes\n`);
    });
  return result;
}
