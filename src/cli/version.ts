// `loom version`: this CLI's version and, when the Hub answers, the Hub's (as kubectl version).
import { Command } from "commander";
import { PRODUCT_VERSION } from "../version.ts";
import { CliError } from "./client.ts";
import { clientOf, out, withController } from "./common.ts";

export function versionCommand(): Command {
  return withController(new Command("version"))
    .description("print the CLI's version and the Hub's")
    .option("--client", "only the CLI's version; do not ask the Hub")
    .action(async (o: { client?: boolean }, cmd: Command) => {
      out(`Client Version: ${PRODUCT_VERSION} (node ${process.versions.node})\n`);
      if (o.client) return;
      const client = clientOf(cmd);
      try {
        const meta = await client.get<{ product_version?: string; hub_api_version?: number; store?: string }>(
          "/api/meta",
        );
        out(
          `Hub Version: ${meta.product_version ?? "unknown"} (hub API ${meta.hub_api_version ?? "?"}, store ${meta.store ?? "?"}) at ${client.conn.controller}\n`,
        );
      } catch (e) {
        if (!(e instanceof CliError)) throw e;
        throw new CliError(`the Hub's version is unknown: ${e.message}`, 1, e.reason);
      }
    });
}
