#!/usr/bin/env node
// Entry point for the `loom` command: TypeScript sources are loaded through tsx,
// so the installed command always runs the code in src/ as it is.
import { register } from "tsx/esm/api";

register();
const { main } = await import("../src/cli/main.ts");
await main(process.argv);
