import { runnerCommand } from "/work/main/src/runner/command.ts";
const cmd = runnerCommand();
try { await cmd.parseAsync(process.argv.slice(2), { from: "user" }); } catch (e: any) { process.exitCode = e.exitCode === 0 ? 0 : 2; }
