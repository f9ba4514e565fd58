// `loom quickstart` (npm start): a Hub on the embedded store that syncs the example
// inventory and campaign from examples/, plus one local `loom runner` process for each
// example worker, so `loom get tasks -w` shows real admission at once. The example tasks
// work in steps of a second, eight steps each, and there are more of them than the workers
// hold at once: for about half a minute tasks wait on memory, on concurrency and on an
// exclusive host, then lease, run and finish.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, rmSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Command } from "commander";
import { Hub } from "../hub.ts";
import { loadPaths } from "../resources/load.ts";
import { isKind } from "../resources/types.ts";
import { intArg, logFormatOption } from "./hub.ts";
import { stopSignal } from "./common.ts";
import { EXIT_WITH_PARENT_ENV } from "../runner/process.ts";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const BIN = join(ROOT, "bin", "loom.mjs");

export function quickstartCommand(): Command {
  return new Command("quickstart")
    .description("start a Hub with the examples and local Runners for the example workers")
    .option("--port <port>", "Hub port", intArg("--port", 0, 65535), 8765)
    .option("--data-dir <dir>", "where the Hub and Runners keep their state", ".loom/quickstart")
    .option("--inventory <path>", "inventory to sync", join(ROOT, "examples", "inventory.json"))
    .option(
      "--manifests <path>",
      "campaign manifests to sync",
      join(ROOT, "examples", "loom-resource-admission.manifest.json"),
    )
    .option("--no-runners", "start only the Hub")
    .option(
      "--step-ms <ms>",
      "how long each step of an example task takes (LOOM_EXAMPLE_STEP_SECONDS for the Runners)",
      intArg("--step-ms", 0, 60_000),
      1000,
    )
    .addOption(logFormatOption())
    .option("--reset", "start clean: remove the data dir's store, results and Runner state first")
    .action(async (o) => {
      // A signal to any process of the group stops it all: npm, stopped, does not pass the signal on, so the quick start also stops once its parent is gone.
      const stopRequested = stopSignal({ withParent: true }); // before start-up prints anything
      const dataDir = resolve(o.dataDir);
      // Only the quick start's own folders go, so a --data-dir pointed somewhere odd loses nothing else.
      if (o.reset) for (const sub of ["hub", "runners"]) rmSync(join(dataDir, sub), { recursive: true, force: true });
      const loaded = loadPaths([o.inventory]);
      if (loaded.errors.length)
        throw new Error(`${o.inventory} does not validate; run loom validate -f ${o.inventory}`);
      const workers = loaded.resources.filter((r) => isKind(r, "Worker"));
      const hub = await Hub.start({
        dataDir: join(dataDir, "hub"),
        port: o.port,
        logLevel: "warn",
        logFormat: o.logFormat,
        gitopsPaths: [o.inventory, o.manifests],
      });
      const say = (s: string) => process.stderr.write(`${s}\n`);
      say(`loom hub listening on ${hub.url} (embedded store in ${join(dataDir, "hub")})`);
      say(`web view: ${hub.url}/ui/`);
      say(`syncing ${o.inventory} and ${o.manifests}; edit them and the Hub follows`);
      const children: ChildProcess[] = [];
      if (o.runners) {
        for (const w of workers) {
          const s = w.spec;
          const args = [
            BIN,
            "runner",
            "--controller",
            hub.url,
            "--worker-id",
            w.metadata.name,
            "--max-concurrency",
            String(s.max_concurrency ?? 1),
            "--initial-concurrency",
            String(s.initial_concurrency ?? s.max_concurrency ?? 1),
            "--connection-mode",
            "long-poll",
            "--work-dir",
            join(dataDir, "runners", w.metadata.name),
            ...(s.capabilities ?? []).flatMap((c) => ["--capability", c]),
            ...(s.resource_capacity ? ["--resource-capacity-json", JSON.stringify(s.resource_capacity)] : []),
          ];
          mkdirSync(join(dataDir, "runners", w.metadata.name), { recursive: true });
          // Own process group: a terminal's Ctrl-C reaches the quickstart, which stops each Runner once, gracefully.
          const child = spawn(process.execPath, args, {
            stdio: ["ignore", "inherit", "inherit"],
            env: {
              ...process.env,
              LOOM_EXAMPLE_STEP_SECONDS: String(o.stepMs / 1000),
              [EXIT_WITH_PARENT_ENV]: String(process.pid),
            },
            detached: true,
          });
          children.push(child);
          say(`runner ${w.metadata.name} started (pid ${child.pid})`);
        }
      }
      // If the quickstart itself dies, its Runners go with it.
      process.once("exit", () => {
        for (const c of children) if (c.exitCode === null) c.kill("SIGKILL");
      });
      const cli = `node ${relative(process.cwd(), BIN) || BIN}`;
      say(
        `\nthe CLI: ${cli} (or \`npm link\` once, then \`loom\`); outside this folder \`npx loom\` is another package`,
      );
      say(
        `try:  ${cli} get workers\n      ${cli} get tasks -w\n      ${cli} describe task loom-resource-admission__oversized__baseline__run-001\n      ${cli} logs -f loom-resource-admission__full-host__baseline__run-001\n      ${cli} worker-capacity\nstart clean next time with: npm start -- --reset\nCtrl-C stops everything.\n`,
      );
      await stopRequested;
      say("stopping runners and the hub");
      await Promise.all(
        children.map(
          (c) =>
            new Promise<void>((res) => {
              if (c.exitCode !== null || c.signalCode !== null) return res();
              c.once("exit", () => res());
              c.kill("SIGTERM");
              setTimeout(() => c.kill("SIGKILL"), 15_000).unref();
            }),
        ),
      );
      await hub.close();
    });
}
