// The `loom` command. Each verb group lives in its own module and adds itself here.
import { Command, CommanderError } from "commander";
import { CliError } from "./client.ts";
import { CA_HELP, CONTROLLER_HELP } from "./common.ts";
import { PRODUCT_VERSION } from "../version.ts";

/**
 * Every verb and the module that defines it, in help order. A run imports only the module of
 * the verb it names (the Hub's and the Runner's pull in fastify and SQLite, most of a start-up);
 * help, --version and unknown verbs load them all.
 */
const VERBS: [names: string[], load: () => Promise<Command[]>][] = [
  [["hub"], async () => [(await import("./hub.ts")).hubCommand()]],
  [["quickstart"], async () => [(await import("./quickstart.ts")).quickstartCommand()]],
  [["runner"], async () => [(await import("../runner/command.ts")).runnerCommand()]],
  [["validate"], async () => [(await import("./validate.ts")).validateCommand()]],
  [["get"], async () => [(await import("./get.ts")).getCommand()]],
  [["describe"], async () => [(await import("./describe.ts")).describeCommand()]],
  [
    ["apply", "delete"],
    async () => {
      const m = await import("./apply.ts");
      return [m.applyCommand(), m.deleteCommand()];
    },
  ],
  [
    ["cordon", "uncordon", "cancel", "retry", "set-concurrency"],
    async () => {
      const m = await import("./admin.ts");
      return [m.cordonCommand(), m.uncordonCommand(), m.cancelCommand(), m.retryCommand(), m.setConcurrencyCommand()];
    },
  ],
  [
    ["worker-capacity", "task-admission", "dispatch-repo-run"],
    async () => {
      const m = await import("./contract.ts");
      return [m.workerCapacityCommand(), m.taskAdmissionCommand(), m.dispatchRepoRunCommand()];
    },
  ],
  // v1's Hub CLI verbs that Loom names differently or lacked (src/cli/v1.ts keeps the list).
  [
    [
      "dispatch-smoke",
      "dispatch-spec",
      "dispatch-oracle",
      "summary",
      "worker-cache",
      "capabilities",
      "set-worker-concurrency",
      "register-worker-hosts",
      "retry-task",
      "push-task",
    ],
    async () => (await import("./v1.ts")).v1Commands(),
  ],
  [["simulate"], async () => [(await import("./simulate.ts")).simulateCommand()]],
  [["top"], async () => [(await import("./top.ts")).topCommand()]],
  [["kubeconfig"], async () => [(await import("./kubeconfig.ts")).kubeconfigCommand()]],
  [["certs"], async () => [(await import("./certs.ts")).certsCommand()]],
  [
    ["logs", "result"],
    async () => {
      const m = await import("./results.ts");
      return [m.logsCommand(), m.resultCommand()];
    },
  ],
  [["version"], async () => [(await import("./version.ts")).versionCommand()]],
  [["completion"], async () => [(await import("./completion.ts")).completionCommand(buildProgram)]],
];

/** The verb an argv names: the first word that is not a program option (or its value). */
export function verbOf(argv: string[]): string | undefined {
  const args = argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--controller" || args[i] === "--controller-token-env" || args[i] === "--certificate-authority")
      i++;
    else if (!args[i].startsWith("-")) return args[i];
  }
  return undefined;
}

export async function buildProgram(argv: string[] = process.argv): Promise<Command> {
  const program = new Command("loom")
    .description("Loom: admit tasks onto the hosts you own, under resource admission")
    .version(PRODUCT_VERSION)
    .showHelpAfterError("see 'loom --help'")
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) })
    // Program options only before the verb, so a verb's own --controller (the Runner's) stays its own.
    .enablePositionalOptions()
    .option("--controller <url>", CONTROLLER_HELP)
    .option("--certificate-authority <file>", CA_HELP);
  const verb = verbOf(argv);
  const named = VERBS.filter(([names]) => verb !== undefined && names.includes(verb));
  for (const [, load] of named.length ? named : VERBS) for (const cmd of await load()) program.addCommand(cmd);
  return withUsageExits(program);
}

/** "certs create" for a nested command, as a user types it. */
function commandPath(c: Command): string {
  const names: string[] = [];
  for (let x: Command | null = c; x && x.parent; x = x.parent) names.unshift(x.name());
  return names.join(" ");
}

/** addCommand() does not pass settings down: every verb throws usage errors (exit 2) instead of exiting itself. */
function withUsageExits(cmd: Command): Command {
  for (const sub of cmd.commands) {
    sub
      .exitOverride()
      .showHelpAfterError(`see 'loom ${commandPath(sub)} --help'`)
      .configureOutput({ writeErr: (s) => process.stderr.write(s) });
    withUsageExits(sub);
  }
  return cmd;
}

export async function main(argv: string[]): Promise<void> {
  // `loom get ... | head` closes stdout early: that ends the command, it is not a crash.
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code !== "EPIPE") throw e;
    process.exit(0);
  });
  const program = await buildProgram(argv);
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version exit 0; usage errors exit 2, as kubectl does
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    if (e instanceof CliError) {
      process.stderr.write(e.render());
      process.exitCode = e.exitCode;
      return;
    }
    process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
