// `loom validate -f`: the real binary, no Hub.
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const loom = (args: string[]) =>
  run(process.execPath, ["bin/loom.mjs", ...args], { cwd: join(import.meta.dirname, "..", "..") })
    .then((r) => ({ code: 0, ...r }))
    .catch((e) => ({ code: e.code as number, stdout: e.stdout as string, stderr: e.stderr as string }));

let dir = "";
beforeAll(async () => { dir = await mkdtemp(join(tmpdir(), "loom-validate-")); });
afterAll(async () => { await rm(dir, { recursive: true, force: true }); });

describe("loom validate", () => {
  it("passes every file under examples/", async () => {
    const r = await loom(["validate", "-f", "examples"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^valid: .*Campaigns?.*Workers?/m);
  });

  it("prints every error with its file and field path and exits 1", async () => {
    const bad = join(dir, "campaign.json");
    await writeFile(bad, JSON.stringify({
      schema_version: 1, campaign_id: "c",
      defaults: { setting_id: "s", run_id: "1", payload: { runner: "noop" } },
      cases: [
        { case_id: "a", execution_profile: { placement: "dedicated" } },
        { case_id: "b", execution_profile: { resources: { gpu_types: ["a100"] } } },
      ],
    }));
    const r = await loom(["validate", "-f", bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${bad}`);
    expect(r.stderr).toMatch(/cases\[0\].*execution_profile\.placement: must be one of: shared, exclusive/);
    expect(r.stderr).toMatch(/cases\[1\].*execution_profile\.resources\.gpu_types: requires a positive gpu_count/);
    expect(r.stderr).toContain("2 error(s)");
  });

  it("is a usage error (exit 2) without -f", async () => {
    const r = await loom(["validate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--filename");
  });
});
