// The packed install as an operator makes it: `npm pack`, then `npm install -g` of the
// tarball into a fresh prefix, and `loom` run from a folder outside the checkout. The package
// holds compiled JavaScript (dist/), the CRDs and the examples; no TypeScript sources and no
// tsx. Slow (npm builds better-sqlite3 for the install), so it runs once, with everything in it.
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { eventually } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const mtime = (f: string) => (existsSync(f) ? statSync(f).mtimeMs : 0);
/** The newest modification time of a file under `dir`, in ms. */
const newest = (dir: string) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .reduce((t, e) => Math.max(t, statSync(join(e.parentPath, e.name)).mtimeMs), 0);
const run = promisify(execFile);
const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

let tmp = "";
let hub: ChildProcess | undefined;
afterAll(async () => {
  if (hub && hub.exitCode === null) hub.kill("SIGKILL");
  if (tmp) await rm(tmp, { recursive: true, force: true });
});

describe("npm pack, then npm install -g of the tarball", () => {
  it("gives a loom that runs compiled JavaScript outside the checkout", async () => {
    tmp = await mkdtemp(join(tmpdir(), "loom-pack-"));
    // `npm pack` would run `prepare` (the build), rewriting dist/ under the other tests that
    // run `loom` from it at the same time. The build is `npm ci`'s; it is redone here only
    // when a source is newer than it.
    if (
      newest(join(ROOT, "src")) > mtime(join(ROOT, "dist", "cli", "main.js")) ||
      newest(join(ROOT, "ui", "src")) > mtime(join(ROOT, "dist", "ui", "index.html"))
    )
      await run("npm", ["run", "build"], { cwd: ROOT, maxBuffer: 16 << 20 });
    const packed = await run("npm", ["pack", "--silent", "--ignore-scripts", "--pack-destination", tmp], {
      cwd: ROOT,
      maxBuffer: 16 << 20,
    });
    const tgz = join(tmp, packed.stdout.trim().split("\n").at(-1)!);
    expect(existsSync(tgz), packed.stdout).toBe(true);
    const listing = (await run("tar", ["tzf", tgz], { maxBuffer: 16 << 20 })).stdout.split("\n");
    expect(listing).toContain("package/dist/cli/main.js");
    expect(listing).toContain("package/dist/ui/index.html");
    expect(listing).toContain("package/crds/tasks.yaml");
    expect(listing.filter((f) => f.startsWith("package/src/") || f.endsWith(".ts"))).toEqual([]);

    const prefix = join(tmp, "prefix");
    await run("npm", ["install", "-g", "--prefix", prefix, "--prefer-offline", "--no-audit", "--no-fund", tgz], {
      cwd: tmp,
      maxBuffer: 16 << 20,
      timeout: 540_000,
    });
    const installed = join(prefix, "lib", "node_modules", "loom");
    expect(existsSync(join(installed, "node_modules", "tsx")), "tsx is a development dependency").toBe(false);
    expect(readdirSync(installed).sort()).toEqual([
      "README.md",
      "bin",
      "crds",
      "dist",
      "examples",
      "node_modules",
      "package.json",
    ]);

    const loom = join(prefix, "bin", "loom");
    const away = join(tmp, "elsewhere");
    await run("mkdir", ["-p", away]);
    expect((await run(loom, ["version", "--client"], { cwd: away })).stdout).toMatch(/^Client Version: \d+\.\d+\.\d+/);
    const valid = await run(loom, ["validate", "-f", join(installed, "examples", "inventory.json")], { cwd: away });
    expect(valid.stdout).toContain("valid");

    const port = await freePort();
    hub = spawn(
      loom,
      [
        "hub",
        "--port",
        String(port),
        "--data-dir",
        join(tmp, "hub"),
        "--inventory",
        join(installed, "examples", "inventory.json"),
      ],
      { cwd: away, stdio: ["ignore", "ignore", "pipe"] },
    );
    let said = "";
    hub.stderr!.on("data", (d) => (said += d));
    const url = `http://127.0.0.1:${port}`;
    await eventually(
      async () => (await fetch(`${url}/livez`).catch(() => undefined))?.ok === true,
      "the installed Hub to listen",
      30_000,
    );
    expect((await fetch(`${url}/ui/`)).status).toBe(200);
    const workers = await eventually(
      async () => {
        const out = (await run(loom, ["get", "workers", "--controller", url], { cwd: away })).stdout;
        return out.includes("evaluation-01") && out;
      },
      "the inventory's workers",
      30_000,
    );
    expect(workers).toMatch(/^NAME\s/);
    const exited = new Promise<number | null>((res) => hub!.once("exit", (c) => res(c)));
    hub.kill("SIGTERM");
    expect(await exited, said).toBe(0);
  }, 600_000);
});
