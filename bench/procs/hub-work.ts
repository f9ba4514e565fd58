// One run of the Hub-work measurement (bench/lib/hub-work.ts) in a process of its own, so
// that no run inherits another's compiled code or heap: prints one RESULT line.
import { measureHubWork } from "../lib/hub-work.ts";

const cfg = JSON.parse(process.env.LOOM_BENCH_HUB_WORK!) as Parameters<typeof measureHubWork>[0];
const r = await measureHubWork(cfg);
process.stdout.write(`RESULT ${JSON.stringify(r)}\n`);
