// `loom simulate -f CHANGES.yaml`: ask the Hub what admission would do if the changes were
// made (POST /api/simulate). The Hub writes nothing; this prints the leases it would grant.
import { readFileSync } from "node:fs";
import { Command } from "commander";
import { parse as parseYaml } from "yaml";
import { UsageError } from "./client.ts";
import { clientOf, forScripts, out, outputOption, withController } from "./common.ts";
import { formatObject, formatTable, type Column } from "./printers.ts";

type Placed = { order: number; task: string; worker: string };
type Simulation = { admitted: Placed[]; queued_before: number; still_queued: number; baseline_admitted: number };

const columns: Column<Placed>[] = [
  { name: "ORDER", priority: 0, cell: (p) => String(p.order) },
  { name: "TASK", priority: 0, cell: (p) => p.task },
  { name: "WORKER", priority: 0, cell: (p) => p.worker },
];

function readChanges(file: string): unknown {
  let text: string;
  try {
    text = file === "-" ? readFileSync(0, "utf8") : readFileSync(file, "utf8");
  } catch (e) {
    throw new UsageError(`-f: cannot read ${file}: ${(e as Error).message}`);
  }
  try {
    return parseYaml(text) ?? {};
  } catch (e) {
    throw new UsageError(`-f: ${file} is not YAML or JSON: ${(e as Error).message}`);
  }
}

export function simulateCommand(): Command {
  return withController(new Command("simulate"))
    .description(
      "what would be admitted, where and in what order, after the changes in a file (add_workers, inventory, remove_workers, workers, cancel_tasks, tasks, queues); writes nothing",
    )
    .requiredOption("-f, --filename <file>", "the changes, YAML or JSON (- for stdin)")
    .addOption(outputOption(["table", "json", "yaml"]))
    .action(async (o: { filename: string; output?: "table" | "json" | "yaml" }, cmd: Command) => {
      const body = await clientOf(cmd).post<Simulation>("/api/simulate", readChanges(o.filename));
      const output = forScripts(o.output);
      if (output === "json" || output === "yaml") return out(formatObject(body, output));
      out(
        `${body.admitted.length} of ${body.queued_before} queued tasks would be admitted (${body.baseline_admitted} without the changes); ${body.still_queued} would stay queued\n`,
      );
      if (body.admitted.length) out(`\n${formatTable(columns, body.admitted, new Date())}`);
    });
}
