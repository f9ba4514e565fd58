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
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-validate-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe("loom validate", () => {
  it("passes every file under examples/", async () => {
    const r = await loom(["validate", "-f", "examples"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^valid: .*Campaigns?.*Workers?/m);
  });

  it("prints every error with its file and field path and exits 1", async () => {
    const bad = join(dir, "campaign.json");
    await writeFile(
      bad,
      JSON.stringify({
        schema_version: 1,
        campaign_id: "c",
        defaults: { setting_id: "s", run_id: "1", payload: { runner: "noop" } },
        cases: [
          { case_id: "a", execution_profile: { placement: "dedicated" } },
          { case_id: "b", execution_profile: { resources: { gpu_types: ["a100"] } } },
        ],
      }),
    );
    const r = await loom(["validate", "-f", bad]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`${bad}`);
    expect(r.stderr).toMatch(/cases\[0\].*execution_profile\.placement: must be one of: shared, exclusive/);
    expect(r.stderr).toMatch(/cases\[1\].*execution_profile\.resources\.gpu_types: requires a positive gpu_count/);
    expect(r.stderr).toContain("2 error(s)");
  });

  it("a v1 inventory field neither v1 nor Loom knows is an error with a did-you-mean hint; a field v1 knew stays a note", async () => {
    const inv = join(dir, "inventory.json");
    const worker = {
      worker_id: "evaluation-01",
      host: "h",
      max_concurency: 4,
      initial_concurrency: 1,
      labels: { rack: "r1" },
    };
    await writeFile(inv, JSON.stringify({ inventory_version: 1, workers: [worker] }));
    const r = await loom(["validate", "-f", inv]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain(
      "workers[0] (evaluation-01).max_concurency: unknown field: neither v1 nor Loom reads it; did you mean `max_concurrency`?",
    );
    expect(r.stderr).toContain("1 error(s)");
    const { max_concurency: _typo, ...fixed } = worker;
    await writeFile(inv, JSON.stringify({ inventory_version: 1, workers: [{ ...fixed, max_concurrency: 4 }] }));
    const ok = await loom(["validate", "-f", inv]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(ok.stderr).toContain("workers[0] (evaluation-01).labels: not used by Loom; kept on the Worker");
  });

  it("loom apply refuses the same typo before sending anything", async () => {
    const inv = join(dir, "typo.json");
    await writeFile(
      inv,
      JSON.stringify({
        inventory_version: 1,
        workers: [{ worker_id: "w1", max_concurency: 4, initial_concurrency: 1 }],
      }),
    );
    // An address nothing listens on: the file is refused before any request is made.
    const r = await loom(["apply", "-f", inv, "--controller", "http://127.0.0.1:9"]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("did you mean `max_concurrency`?");
    expect(r.stderr).not.toMatch(/unreachable|ECONNREFUSED/i);
  });

  it("is a usage error (exit 2) without -f", async () => {
    const r = await loom(["validate"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--filename");
  });
});
