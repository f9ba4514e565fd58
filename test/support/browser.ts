// Test support for the web view: Debian's chromium driven by playwright-core, in a fresh
// profile, and a dist/ui that is built from the current ui/ sources.
import { execFile } from "node:child_process";
import { readdirSync, statSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { chromium, type BrowserContext } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
const ROOT = join(import.meta.dirname, "..", "..");

export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Headless chromium with a fresh --user-data-dir (playwright passes the profile directory as that flag). */
export async function launchChromium(): Promise<{ ctx: BrowserContext; profile: string }> {
  const profile = await mkdtemp(join(tmpdir(), "loom-chromium-"));
  const ctx = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1440, height: 900 },
  });
  return { ctx, profile };
}

const newest = (dir: string): number =>
  Math.max(
    0,
    ...readdirSync(dir, { withFileTypes: true }).map((e) =>
      e.isDirectory() ? newest(join(dir, e.name)) : statSync(join(dir, e.name)).mtimeMs,
    ),
  );

/**
 * `npm ci` builds dist/ui (the prepare script); a checkout whose ui/ sources changed since
 * is built again here, so the test never runs against a stale page.
 */
export async function uiBuilt(): Promise<void> {
  let built: number;
  try {
    built = statSync(join(ROOT, "dist", "ui", "index.html")).mtimeMs;
  } catch {
    built = 0;
  }
  if (built && built >= newest(join(ROOT, "ui"))) return;
  await promisify(execFile)("npm", ["run", "build:ui"], { cwd: ROOT });
}
