#!/usr/bin/env node
// Entry point for the `loom` command. It runs the compiled JavaScript in dist/ (`npm run
// build`, which `npm ci` and `npm pack` run through `prepare`). In a checkout, where src/ is
// beside it, dist/ is used only while it is newer than every source file: after an edit the
// sources run through tsx (a development dependency) until the next build, so a change is
// never silently ignored. LOOM_RUN_FROM=src or =dist chooses without looking.
import { existsSync, readdirSync, statSync } from "node:fs";

const root = new URL("..", import.meta.url);
const built = new URL("dist/cli/main.js", root);
const src = new URL("src/", root);

/** The newest modification time under a folder, in ms. */
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true }))
    if (e.isFile()) t = Math.max(t, statSync(`${e.parentPath ?? e.path}/${e.name}`).mtimeMs);
  return t;
}

function fromSource() {
  const want = process.env.LOOM_RUN_FROM;
  if (want === "src" || want === "dist") return want === "src";
  if (!existsSync(built)) return true;
  return existsSync(src) && newest(src) > statSync(built).mtimeMs;
}

let entry = built;
if (fromSource()) {
  let register;
  try {
    ({ register } = await import("tsx/esm/api"));
  } catch {
    process.stderr.write(
      `loom: ${existsSync(built) ? "dist/ is older than src/" : "dist/ is not built"} and tsx is not installed; run: npm run build\n`,
    );
    process.exit(1);
  }
  register();
  entry = new URL("src/cli/main.ts", root);
}
const { main } = await import(entry.href);
await main(process.argv);
