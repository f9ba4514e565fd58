// `loom validate -f FILE...`: validate inventories, manifests and resource YAML without a Hub.
import { Command } from "commander";

export function validateCommand(): Command {
  return new Command("validate")
    .description(
      "validate inventory, campaign manifest or resource files without a Hub; prints every error with its field path",
    )
    .requiredOption("-f, --filename <path...>", "files or directories to validate")
    .action(async (opts: { filename: string[] }) => {
      const { loadPaths } = await import("../resources/load.ts");
      const { formatInputError } = await import("../resources/input-errors.ts");
      const res = loadPaths(opts.filename);
      for (const n of res.notes) process.stderr.write(`note: ${formatInputError(n)}\n`);
      for (const e of res.errors) process.stderr.write(`${formatInputError(e)}\n`);
      if (res.errors.length) {
        process.stderr.write(`${res.errors.length} error(s)\n`);
        process.exitCode = 1;
        return;
      }
      const counts = new Map<string, number>();
      for (const r of res.resources) counts.set(r.kind, (counts.get(r.kind) ?? 0) + 1);
      const tasks = res.tasks?.length ?? 0;
      const parts = [...counts].map(([k, n]) => `${n} ${k}${n === 1 ? "" : "s"}`);
      if (tasks) parts.push(`${tasks} Task${tasks === 1 ? "" : "s"} from campaigns`);
      process.stdout.write(`valid: ${parts.join(", ") || "nothing to validate"}\n`);
    });
}
