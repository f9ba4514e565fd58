// The `loom` command. Each verb group lives in its own module and adds itself here.
import { Command, CommanderError } from "commander";
import { validateCommand } from "./validate.ts";
import { hubCommand } from "./hub.ts";
import { quickstartCommand } from "./quickstart.ts";
import { runnerCommand } from "../runner/command.ts";

export function buildProgram(): Command {
  const program = new Command("loom")
    .description("Loom: admit tasks onto the hosts you own, under resource admission")
    .version("0.1.0")
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s) });
  program.addCommand(hubCommand());
  program.addCommand(quickstartCommand());
  program.addCommand(runnerCommand());
  program.addCommand(validateCommand());
  return withUsageExits(program);
}

/** addCommand() does not pass settings down: every verb throws usage errors (exit 2) instead of exiting itself. */
function withUsageExits(cmd: Command): Command {
  for (const sub of cmd.commands) {
    sub.exitOverride().showHelpAfterError().configureOutput({ writeErr: (s) => process.stderr.write(s) });
    withUsageExits(sub);
  }
  return cmd;
}

export async function main(argv: string[]): Promise<void> {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version exit 0; usage errors exit 2, as kubectl does
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    process.stderr.write(`error: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  }
}
