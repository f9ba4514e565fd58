// Three Hub replicas on one etcd, raced for a while: operator verbs, Runner calls and GitOps
// edits through every replica at once, while the leader's controllers rewrite the same
// Workers and Tasks. A read-modify-write the Hub makes on its own behalf retries on Conflict,
// so none of these callers (who sent no resourceVersion) ever gets a 409 Conflict or a 5xx.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Hub } from "../../src/hub.ts";
import { writeZip } from "../../src/results/zip.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";
import { eventually, get, post, registerBody } from "../support/hub.ts";

type Json = Record<string, any>;
const STORM_MS = process.env.LOOM_LONG ? 60_000 : 12_000;
/** Every kind of call the storm must have made more than MIN_CALLS times, through the replicas. */
const CHECKED = [
  "/api/tasks/claim",
  "/api/admin/set-worker-concurrency",
  "/api/admin/block-worker",
  "/api/admin/cancel-task",
  "/api/admin/retry-task",
  "/api/admin/register-worker-hosts",
  "/api/tasks/start",
  "/api/results/upload",
  "/api/tasks/complete",
  "/api/tasks/fail",
];
const MIN_CALLS = 10;
const WORKERS = ["race-0", "race-1", "race-2", "race-3"];

describe.skipIf(etcdMissing)("replicas never answer a Conflict the caller did not cause", () => {
  let etcd: EtcdCluster;
  let dir: string;
  let inventory: string;
  const hubs: Hub[] = [];
  const prefix = `/loom-race-${process.pid}`;

  const writeInventory = (rev: number) =>
    writeFile(
      inventory,
      JSON.stringify({
        inventory_version: 1,
        workers: WORKERS.map((id, i) => ({
          worker_id: id,
          host: "127.0.0.1",
          connection_mode: "prestarted",
          max_concurrency: 4 + ((rev + i) % 3),
          initial_concurrency: 2,
          capabilities: ["linux", `rev-${rev}`],
        })),
      }),
    );

  beforeAll(async () => {
    etcd = await startEtcd();
    dir = await mkdtemp(join(tmpdir(), "loom-race-"));
    inventory = join(dir, "inventory.json");
    await writeInventory(0);
    for (const id of ["a", "b", "c"]) {
      hubs.push(
        await Hub.start({
          dataDir: dir,
          port: 0,
          logLevel: "silent",
          backend: { kind: "etcd", etcd: { endpoints: etcd.endpoints, prefix }, replicaId: id },
          gitopsPaths: [inventory],
          gitopsDebounceMs: 20,
        }),
      );
    }
  }, 60_000);
  afterAll(async () => {
    for (const h of hubs) await h.close();
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it(
    "admin verbs, Runner calls and GitOps edits race the leader's controllers: no 409 Conflict, no 5xx",
    async () => {
      const leader = await eventually(() => hubs.find((h) => h.controllers), "a leader", 30_000);
      for (const h of hubs)
        await eventually(
          () => WORKERS.every((w) => h.cache.get("Worker", w)),
          "every replica sees the declared workers",
          20_000,
        );
      for (const [i, w] of WORKERS.entries())
        expect((await post(hubs[i % 3].url, "/api/workers/register", registerBody(w))).status).toBe(200);
      let seq = 0;
      const dispatchSome = async (h: Hub, n: number) => {
        const tasks = Array.from({ length: n }, () => ({
          task_id: `race-t${String(seq++).padStart(5, "0")}`,
          required_capability: "linux",
          payload: { runner: "noop" },
        }));
        return post(h.url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks });
      };
      for (const h of hubs) expect((await dispatchSome(h, 60)).status).toBe(201);

      const seen: { replica: number; path: string; status: number; body: Json }[] = [];
      const counts = new Map<string, number>();
      const call = async (replica: number, path: string, body: unknown, raw?: () => Promise<Response>) => {
        let status: number;
        let out: Json;
        if (raw) {
          const res = await raw();
          status = res.status;
          out = (await res.json().catch(() => ({}))) as Json;
        } else ({ status, body: out } = await post(hubs[replica].url, path, body));
        counts.set(path, (counts.get(path) ?? 0) + 1);
        if (status >= 300) seen.push({ replica, path, status, body: out });
        return { status, body: out };
      };
      // The storm lasts STORM_MS, and on a loaded machine longer (up to as long again), until
      // every kind of call checked below has been made often enough to mean a race.
      const deadline = Date.now() + STORM_MS;
      let rev = 0; // inventory edits made
      const enough = () => CHECKED.every((p) => (counts.get(p) ?? 0) > MIN_CALLS) && rev > MIN_CALLS;
      const running = () => Date.now() < deadline || (Date.now() < deadline + STORM_MS && !enough());
      const pick = <T>(xs: T[]) => xs[Math.floor(Math.random() * xs.length)];
      const zip = (taskId: string) =>
        writeZip([
          { name: "task.json", data: JSON.stringify({ task_id: taskId }) },
          { name: "worker-result.json", data: JSON.stringify({ task_id: taskId, exit_code: 0 }) },
          { name: "stdout.txt", data: "" },
          { name: "stderr.txt", data: "" },
        ]);

      // One Runner per worker, each on its own replica: heartbeat, claim, start, then upload, complete or fail.
      const runner = async (worker: string, replica: number) => {
        let n = 0;
        while (running()) {
          await call(replica, "/api/workers/heartbeat", { worker_id: worker, current_runs: [] });
          const claimed = await call(replica, "/api/tasks/claim", { worker_id: worker, limit: 2, lease_seconds: 120 });
          for (const t of (claimed.body.tasks ?? []) as Json[]) {
            const id = t.task_id as string;
            await call(replica, "/api/tasks/start", { worker_id: worker, task_id: id, attempt_no: t.attempt_no });
            const how = n++ % 3;
            if (how === 0) {
              const body = await zip(id);
              await call(replica, "/api/results/upload", undefined, () =>
                fetch(`${hubs[replica].url}/api/results/upload`, {
                  method: "POST",
                  headers: { "content-type": "application/zip", "x-task-id": id, "x-worker-id": worker },
                  body,
                }),
              );
            } else if (how === 1)
              await call(replica, "/api/tasks/complete", {
                worker_id: worker,
                task_id: id,
                attempt_no: t.attempt_no,
                result: {},
              });
            else
              await call(replica, "/api/tasks/fail", {
                worker_id: worker,
                task_id: id,
                attempt_no: t.attempt_no,
                error: { type: "run_error" },
              });
          }
          if (!claimed.body.tasks?.length) await new Promise((r) => setTimeout(r, 20));
        }
      };
      // An operator per replica, doing whatever comes to hand.
      const operator = async (replica: number) => {
        while (running()) {
          const w = pick(WORKERS);
          const tasks = hubs[replica].cache.list("Task") as Json[];
          const task = pick(tasks)?.metadata.name as string | undefined;
          switch (Math.floor(Math.random() * 6)) {
            case 0:
              await call(replica, "/api/admin/set-worker-concurrency", {
                worker_id: w,
                desired_concurrency: 1 + Math.floor(Math.random() * 4),
                reason: "race",
              });
              break;
            case 1:
              await call(replica, "/api/admin/block-worker", { worker_id: w });
              await call(replica, "/api/admin/unblock-worker", { worker_id: w });
              break;
            case 2:
              if (task) await call(replica, "/api/admin/cancel-task", { task_id: task });
              break;
            case 3:
              if (task) await call(replica, "/api/admin/retry-task", { task_id: task });
              break;
            case 4:
              await call(replica, "/api/admin/register-worker-hosts", {
                operator: "race",
                hosts: [
                  {
                    worker_id: w,
                    host: "127.0.0.1",
                    connection_mode: "prestarted",
                    max_concurrency: 4,
                    initial_concurrency: 2,
                    capabilities: ["linux"],
                  },
                ],
              });
              break;
            default:
              await call(replica, "/api/tasks/dispatch", {
                schema_version: 1,
                operator: "test",
                tasks: [
                  {
                    task_id: `race-t${String(seq++).padStart(5, "0")}`,
                    required_capability: "linux",
                    payload: { runner: "noop" },
                  },
                ],
              });
          }
        }
      };
      const gitops = async () => {
        while (running()) {
          await writeInventory(++rev);
          await new Promise((r) => setTimeout(r, 150));
        }
      };
      await Promise.all([...WORKERS.map((w, i) => runner(w, i % 3)), ...[0, 1, 2].map(operator), gitops()]);

      const storeConflict = (s: (typeof seen)[number]) => s.status === 409 && s.body.error === "conflict";
      // Claims too: one that loses every race answers 200 with what it won, possibly nothing.
      const refused = seen.filter((s) => storeConflict(s) || s.status >= 500);
      const adminRefused = seen.filter((s) => s.path.startsWith("/api/admin/") && s.status >= 400);
      const tally = (xs: typeof seen) =>
        JSON.stringify(
          xs.reduce<Record<string, number>>(
            (m, s) => (
              (m[`${s.path} ${s.status} ${s.body.error}`] = (m[`${s.path} ${s.status} ${s.body.error}`] ?? 0) + 1),
              m
            ),
            {},
          ),
        );
      expect(refused, `${tally(refused)} ${JSON.stringify(refused.slice(0, 3))}`).toEqual([]);
      expect(adminRefused, JSON.stringify(adminRefused.slice(0, 5))).toEqual([]);
      // The race was real: every kind of call was made many times, through every replica.
      for (const p of CHECKED) expect(counts.get(p) ?? 0, p).toBeGreaterThan(MIN_CALLS);
      expect(rev).toBeGreaterThan(MIN_CALLS);
      // GitOps applied the last edit (a failed apply would wait for the next change or a resync).
      await eventually(
        async () => {
          const w = (await get(leader.url, `/apis/loom.dev/v1alpha1/workers/${WORKERS[0]}`)).body as Json;
          return w.spec?.capabilities?.includes(`rev-${rev}`);
        },
        "the last inventory edit applied",
        15_000,
      );
    },
    2 * STORM_MS + 90_000,
  );
});
