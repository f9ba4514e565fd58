// The CLI as an operator uses it on day one: kubectl's -o jsonpath and custom-columns,
// `loom version`, shell completion, short usage errors that exit 2, `apply -f -`.
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { post, startHub, type TestHub } from "../support/hub.ts";

const ROOT = join(import.meta.dirname, "..", "..");
type Run = { code: number; stdout: string; stderr: string };
let h: TestHub;
let dir: string;

function loom(args: string[], input?: string): Promise<Run> {
  return new Promise((resolve) => {
    const env: NodeJS.ProcessEnv = { ...process.env, LOOM_CONTROLLER: h.url };
    delete env.LOOM_HUB_TOKEN;
    delete env.LOOM_CA_FILE;
    const child = execFile(
      process.execPath,
      ["bin/loom.mjs", ...args],
      { cwd: ROOT, env, timeout: 30_000 },
      (e, stdout, stderr) => resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr }),
    );
    child.stdin!.end(input ?? "");
  });
}

beforeAll(async () => {
  h = await startHub();
  dir = await mkdtemp(join(tmpdir(), "loom-cli-ops-"));
  const tasks = ["t-a", "t-b"].map((task_id, i) => ({
    task_id,
    required_capability: "",
    priority: i,
    payload: { runner: "noop" },
  }));
  expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks })).status).toBe(201);
});
afterAll(async () => {
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("loom get -o jsonpath= and custom-columns=", () => {
  it("prints what the template selects, from the List for a list and from the object for one", async () => {
    const [names, ranged, one, cols, noHeaders] = await Promise.all([
      loom(["get", "tasks", "-o", "jsonpath={.items[*].metadata.name}"]),
      loom(["get", "tasks", "-o", 'jsonpath={range .items[*]}{.metadata.name}{"\\t"}{.spec.priority}{"\\n"}{end}']),
      loom(["get", "task", "t-b", "-o", "jsonpath={.spec.priority}"]),
      loom([
        "get",
        "tasks",
        "-o",
        "custom-columns=NAME:.metadata.name,PRIO:.spec.priority,WORKER:.status.lease.worker",
      ]),
      loom(["get", "tasks", "--no-headers", "-o", "custom-columns=NAME:.metadata.name"]),
    ]);
    expect(names).toMatchObject({ code: 0, stdout: "t-a t-b" });
    expect(ranged).toMatchObject({ code: 0, stdout: "t-a\t0\nt-b\t1\n" });
    expect(one).toMatchObject({ code: 0, stdout: "1" });
    expect(cols.stdout.split("\n").map((l) => l.trim().split(/\s+/))).toEqual([
      ["NAME", "PRIO", "WORKER"],
      ["t-a", "0", "<none>"],
      ["t-b", "1", "<none>"],
      [""],
    ]);
    expect(noHeaders.stdout).toBe("t-a\nt-b\n");
  }, 60_000);

  it("a bad template is a usage error naming it", async () => {
    const [unclosed, badCols, unknown] = await Promise.all([
      loom(["get", "tasks", "-o", "jsonpath={.items"]),
      loom(["get", "tasks", "-o", "custom-columns=NAME"]),
      loom(["get", "tasks", "-o", "tabular"]),
    ]);
    expect(unclosed.code).toBe(2);
    expect(unclosed.stderr).toContain('jsonpath: unclosed "{"');
    expect(badCols.code).toBe(2);
    expect(badCols.stderr).toContain("custom-columns: expected HEADER:EXPRESSION");
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("jsonpath=TEMPLATE");
  }, 60_000);
});

describe("version, completion and usage errors", () => {
  it("loom version names the CLI and the Hub; --client asks no Hub", async () => {
    const [both, client] = await Promise.all([
      loom(["version"]),
      loom(["version", "--client", "--controller", "http://127.0.0.1:9"]),
    ]);
    expect(both.code, both.stderr).toBe(0);
    expect(both.stdout).toMatch(
      /^Client Version: 0\.1\.0 \(node [\d.]+\)\nHub Version: 0\.1\.0 \(hub API 1, store sqlite\) at http:\/\/127\.0\.0\.1:\d+\n$/,
    );
    expect(client).toMatchObject({ code: 0 });
    expect(client.stdout).not.toContain("Hub Version");
  }, 60_000);

  it("loom completion bash completes verbs, kinds and flags in a real bash; zsh gets a script too", async () => {
    const [bash, zsh, fish] = await Promise.all([
      loom(["completion", "bash"]),
      loom(["completion", "zsh"]),
      loom(["completion", "fish"]),
    ]);
    expect(bash.code).toBe(0);
    expect(zsh.stdout).toMatch(/^#compdef loom\n/);
    expect(fish.code).toBe(2);
    const script = join(dir, "loom.bash");
    await writeFile(script, bash.stdout);
    const ask = (words: string[]) =>
      `COMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _loom; echo "\${COMPREPLY[*]}"`;
    const out = await new Promise<string>((resolve, reject) => {
      const b = spawn("/bin/bash", [
        "-c",
        `source ${script}\n${ask(["loom", "ver"])}\n${ask(["loom", "get", "wor"])}\n${ask(["loom", "certs", "create", "--o"])}\n${ask(["loom", "get", "tasks", "--sel"])}`,
      ]);
      let s = "";
      b.stdout.on("data", (d) => (s += d));
      b.on("exit", (c) => (c === 0 ? resolve(s) : reject(new Error(`bash exited ${c}`))));
    });
    expect(out.split("\n")).toEqual(["version", "workers worker", "--out", "--selector", ""]);
  }, 60_000);

  it("a usage error prints the problem and where to look, not the whole help, and exits 2", async () => {
    const file = join(dir, "not-a-dir");
    await writeFile(file, "x");
    const [port, dataDir, inventory, missingArg] = await Promise.all([
      loom(["hub", "--port", "99999"]),
      loom(["hub", "--data-dir", file]),
      loom(["hub", "--inventory", join(dir, "nope.json")]),
      loom(["get"]),
    ]);
    for (const r of [port, dataDir, inventory, missingArg]) {
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr).not.toContain("Options:");
      expect(r.stderr.trim().split("\n")).toHaveLength(2);
    }
    expect(port.stderr).toContain("--port must be an integer from 0 to 65535");
    expect(port.stderr).toContain("see 'loom hub --help'");
    expect(dataDir.stderr).toContain(`${file} is a file, not a directory`);
    expect(inventory.stderr).toContain("nope.json does not exist (--inventory takes an existing file or folder)");
    expect(missingArg.stderr).toContain("see 'loom get --help'");
    expect(existsSync(join(dir, "nope.json"))).toBe(false);
  }, 60_000);
});

describe("loom apply -f -", () => {
  it("reads the objects from standard input", async () => {
    const yaml =
      "apiVersion: loom.dev/v1alpha1\nkind: Worker\nmetadata: {name: from-stdin}\nspec: {max_concurrency: 1}\n";
    const r = await loom(["apply", "-f", "-"], yaml);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("worker/from-stdin created");
    const bad = await loom(["apply", "-f", "-"], "kind: Worker\nmetadata: {name: x}\n");
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("<stdin>");
  }, 60_000);
});
