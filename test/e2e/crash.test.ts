// Crash safety at scale (issue 10): `loom hub` is SIGKILLed again and again while 32 Runner
// clients claim, start, upload, complete and fail, and an operator keeps dispatching. After
// every kill the store, read directly, must show:
//   - no dispatched task missing (every dispatch answered 2xx is stored);
//   - no task holding two leases (no lease epoch of a task answered to two clients);
//   - no reservation over capacity, no exclusive lease sharing its worker;
//   - every lease answered to a client in the store (as the current lease or in the history).
// The normal suite kills 3 times; LOOM_LONG=1 kills 20 times.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeZip } from "../../src/results/zip.ts";
import type { Task, Worker } from "../../src/resources/types.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { invariantViolations } from "../support/invariants.ts";

const ROOT = join(import.meta.dirname, "..", "..");
const LONG = process.env.LOOM_LONG === "1";
const KILLS = LONG ? 20 : 3;
const CLIENTS = 32;
const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

let child: ChildProcess | undefined;
let dir = "";
afterAll(async () => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
  if (dir) await rm(dir, { recursive: true, force: true });
});

function startHub(port: number): Promise<ChildProcess> {
  const c = spawn(
    process.execPath,
    ["bin/loom.mjs", "hub", "--data-dir", dir, "--port", String(port), "--log-level", "silent"],
    { cwd: ROOT, stdio: ["ignore", "ignore", "pipe"] },
  );
  let err = "";
  return new Promise((resolve, reject) => {
    c.stderr.on("data", (d) => {
      err += d;
      if (err.includes("listening on")) resolve(c);
    });
    c.once("exit", (code) => reject(new Error(`loom hub exited (${code}): ${err}`)));
  });
}

async function call(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
  raw?: Buffer,
): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": raw ? "application/zip" : "application/json", ...headers },
    body: raw ?? JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe(`loom hub SIGKILLed ${KILLS} times during a ${CLIENTS}-Runner storm`, () => {
  it(
    "keeps every dispatched task, every answered lease, and the admission invariants",
    async () => {
      dir = await mkdtemp(join(tmpdir(), "loom-crash-"));
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      child = await startHub(port);

      const dispatched = new Set<string>();
      /** "task@epoch" -> the worker it was answered to. */
      const answered = new Map<string, string>();
      const doubles: string[] = [];
      let stop = false;
      let n = 0;
      const zip = await writeZip([{ name: "worker-result.json", data: JSON.stringify({ exit_code: 0 }) }]);

      const operator = async () => {
        while (!stop) {
          const tasks = Array.from({ length: 8 }, () => {
            const i = n++;
            const exclusive = i % 9 === 0;
            return {
              task_id: `crash-${i}`,
              required_capability: "",
              payload: { runner: "noop" },
              execution_profile: {
                placement: exclusive ? "exclusive" : "shared",
                resources: { cpu_millis: 500 + (i % 4) * 500, memory_mb: 256 * (1 + (i % 3)) },
              },
            };
          });
          try {
            const r = await call(url, "/api/tasks/dispatch", { schema_version: 1, tasks });
            if (r.status === 201 || r.status === 200) for (const t of tasks) dispatched.add(t.task_id);
          } catch {
            await sleep(50); // the Hub is down
          }
          await sleep(100);
        }
      };

      const runner = async (c: number) => {
        const worker = `crash-w${c}`;
        let registered = false;
        while (!stop) {
          try {
            if (!registered) {
              const r = await call(url, "/api/workers/register", {
                worker_id: worker,
                runner_api_version: 1,
                capabilities: ["*"],
                max_concurrency: 2,
                initial_concurrency: 2,
                resource_capacity: { cpu_millis: 2000, memory_mb: 1024, disk_mb: 1000, gpu_count: 0 },
              });
              registered = r.status === 200;
              continue;
            }
            const claim = await call(url, "/api/tasks/claim", { worker_id: worker, limit: 2, lease_seconds: 300 });
            const got: { task_id: string; attempt_no: number }[] = claim.status === 200 ? claim.body.tasks : [];
            for (const t of got) {
              const key = `${t.task_id}@${t.attempt_no}`;
              const prev = answered.get(key);
              if (prev !== undefined && prev !== worker) doubles.push(`${key}: ${prev} and ${worker}`);
              answered.set(key, worker);
            }
            if (!got.length) await sleep(20);
            for (const t of got) {
              const fenced = { worker_id: worker, task_id: t.task_id, attempt_no: t.attempt_no };
              await call(url, "/api/tasks/start", fenced);
              const roll = (t.task_id.length + t.attempt_no + c) % 4;
              if (roll === 0)
                await call(url, "/api/tasks/fail", { ...fenced, error: { type: "run_error", detail: "storm" } });
              else if (roll === 1) await call(url, "/api/tasks/complete", { ...fenced, result: {}, upload: {} });
              else
                await call(
                  url,
                  "/api/results/upload",
                  undefined,
                  { "x-task-id": t.task_id, "x-worker-id": worker },
                  zip,
                );
            }
          } catch {
            await sleep(50); // the Hub is down or restarting
          }
        }
      };

      const storm = [operator(), ...Array.from({ length: CLIENTS }, (_, c) => runner(c))];
      let checkedLeases = 0;
      for (let k = 0; k < KILLS; k++) {
        // Kill mid-storm once this life of the Hub has done some work (progress, not a timer, decides).
        const [d0, l0] = [dispatched.size, answered.size];
        const deadline = Date.now() + 90_000;
        while ((dispatched.size < d0 + 16 || answered.size < l0 + 8) && Date.now() < deadline) await sleep(20);
        await sleep((k * 137) % 300);
        const dead = new Promise((r) => child!.once("exit", r));
        child.kill("SIGKILL");
        await dead;
        // What was answered before the kill is fixed now; read the store as the next Hub will.
        const want = new Set(dispatched);
        const leases = new Map(answered);
        const store = openSqliteStore(join(dir, "loom.db"));
        try {
          const tasks = (await store.list("Task")).items as unknown as Task[];
          const workers = (await store.list("Worker")).items as unknown as Worker[];
          const byName = new Map(tasks.map((t) => [t.metadata.name, t]));
          expect(
            [...want].filter((id) => !byName.has(id)),
            "dispatched tasks missing after kill " + (k + 1),
          ).toEqual([]);
          expect(doubles, "a lease epoch answered to two clients").toEqual([]);
          expect(invariantViolations(workers, tasks), `invariants after kill ${k + 1}`).toEqual([]);
          const lost = [...leases].filter(([key, worker]) => {
            const [id, epoch] = [key.slice(0, key.lastIndexOf("@")), Number(key.slice(key.lastIndexOf("@") + 1))];
            const st = byName.get(id)?.status;
            if (st?.lease?.epoch === epoch && st.lease.worker === worker) return false;
            return !(st?.attempts ?? []).some((a) => a.attempt === epoch && a.worker === worker);
          });
          expect(lost, `answered leases not in the store after kill ${k + 1}`).toEqual([]);
          checkedLeases = leases.size;
        } finally {
          await store.close();
        }
        child = await startHub(port);
      }
      stop = true;
      await Promise.all(storm);
      // The storm did real work: the checks above were not vacuous.
      expect(dispatched.size).toBeGreaterThanOrEqual(16 * KILLS);
      expect(checkedLeases).toBeGreaterThanOrEqual(8 * KILLS);
    },
    LONG ? 1_200_000 : 240_000,
  );
});
