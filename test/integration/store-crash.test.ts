// Group commit loses nothing it acknowledged: a writer process is killed with SIGKILL in the
// middle of a stream of concurrent writes, and every write it reported as acknowledged is in
// the store when it is opened again (several rounds on the same file).
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/store/sqlite.ts";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

function killAfter(file: string, round: number, acks: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["--import", "tsx", join(import.meta.dirname, "../support/store-writer.ts"), file, String(round)],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    const seen: string[] = [];
    let buf = "";
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (chunk: string) => {
      buf += chunk;
      const lines = buf.split("\n");
      buf = lines.pop()!;
      seen.push(...lines);
      if (seen.length >= acks && !child.killed) child.kill("SIGKILL");
    });
    child.on("error", reject);
    child.on("exit", (code, signal) =>
      signal === "SIGKILL" ? resolve(seen) : reject(new Error(`writer exited with ${code ?? signal}`)),
    );
  });
}

describe("group commit under SIGKILL", () => {
  it("every acknowledged write survives, round after round", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-crash-"));
    dirs.push(dir);
    const file = join(dir, "loom.db");
    const acked = new Set<string>();
    for (let round = 0; round < 3; round++) {
      for (const n of await killAfter(file, round, 300 + round * 200)) acked.add(n);
      const store = openSqliteStore(file);
      const names = new Set((await store.list("Task")).items.map((t) => t.metadata.name));
      const rev = await store.revision();
      await store.close();
      const lost = [...acked].filter((n) => !names.has(n));
      expect(lost, `round ${round}: acknowledged writes missing after SIGKILL`).toEqual([]);
      expect(rev).toBeGreaterThanOrEqual(acked.size);
    }
  }, 120_000);
});
