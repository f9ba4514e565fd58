// High availability: three `loom hub --store etcd` child processes on one etcd, 32 Runner
// clients spread across them, and the leader killed with SIGKILL mid-run. Nothing may be
// leased twice, no worker over-reserved at any revision, nothing lost, and the run must
// finish. The takeover time is printed. LOOM_LONG=1 runs a bigger campaign on a three-member
// etcd cluster and also kills one etcd member mid-run.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeZip } from "../../src/results/zip.ts";
import { openEtcdStore, type EtcdStore } from "../../src/store/etcd.ts";
import { etcdMissing, freePort, startEtcd, type EtcdCluster } from "../support/etcd.ts";
import { eventually, registerBody } from "../support/hub.ts";
import { InvariantRecorder } from "../support/invariant.ts";

type Json = Record<string, any>;
const LONG = process.env.LOOM_LONG === "1";
const TASKS = LONG ? 1000 : 120;
const RUNNERS = 32;
const ROOT = resolve(import.meta.dirname, "../..");
const LOOM = join(ROOT, "bin/loom.mjs");
const PREFIX = "/loom-ha";

type Replica = { id: string; url: string; proc: ChildProcess; log: string[] };

describe.skipIf(etcdMissing)("HA: three Hub replicas on etcd, the leader killed mid-run", () => {
  let etcd: EtcdCluster;
  let dir: string;
  const replicas: Replica[] = [];
  let observer: EtcdStore;

  beforeAll(async () => {
    etcd = await startEtcd(LONG ? 3 : 1);
    dir = await mkdtemp(join(tmpdir(), "loom-ha-"));
    for (const id of ["h1", "h2", "h3"]) {
      const port = await freePort();
      const args = [
        LOOM,
        "hub",
        "--store",
        "etcd",
        "--etcd-endpoints",
        etcd.endpoints.join(","),
        "--etcd-prefix",
        PREFIX,
        "--replica-id",
        id,
        "--port",
        String(port),
        "--data-dir",
        dir,
        "--log-level",
        "warn",
      ];
      const proc = spawn(process.execPath, args, {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LOOM_HUB_TOKEN: "" },
      });
      const log: string[] = [];
      for (const s of [proc.stdout, proc.stderr]) s.on("data", (d: Buffer) => log.push(d.toString()));
      replicas.push({ id, url: `http://127.0.0.1:${port}`, proc, log });
    }
    for (const r of replicas)
      await eventually(
        async () => (await fetch(`${r.url}/api/healthz`)).ok,
        `${r.id} to serve (${r.log.join("")})`,
        90_000,
      );
    observer = await openEtcdStore({ endpoints: etcd.endpoints, prefix: PREFIX });
  }, 120_000);

  afterAll(async () => {
    for (const r of replicas)
      if (r.proc.exitCode === null && r.proc.signalCode === null) {
        const exited = new Promise((res) => r.proc.once("exit", res));
        process.kill(r.proc.pid!, "SIGTERM");
        const late = setTimeout(() => process.kill(r.proc.pid!, "SIGKILL"), 15_000);
        await exited;
        clearTimeout(late);
      }
    await observer?.close();
    await etcd?.stop();
    await rm(dir, { recursive: true, force: true });
  }, 60_000);

  const alive = () => replicas.filter((r) => r.proc.exitCode === null && r.proc.signalCode === null);

  /** A request to the Runner's home replica, moving on to the next live one when it is down. */
  async function call(
    home: { i: number },
    method: string,
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: any }> {
    for (let tries = 0; ; tries++) {
      const r = replicas[home.i % replicas.length];
      try {
        const isZip = Buffer.isBuffer(body);
        const res = await fetch(r.url + path, {
          method,
          headers: {
            ...(isZip
              ? { "content-type": "application/zip" }
              : body === undefined
                ? {}
                : { "content-type": "application/json" }),
            ...headers,
          },
          body: isZip ? body : body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : undefined };
      } catch (e) {
        if (tries > 20) throw e;
        home.i++; // that replica is gone: a Runner behind a load balancer lands on another
        await new Promise((res) => setTimeout(res, 100));
      }
    }
  }

  it(
    `runs ${TASKS} tasks on ${RUNNERS} Runners to the end across a leader SIGKILL`,
    async () => {
      const rec = new InvariantRecorder();
      await rec.start(observer, await observer.revision());
      const leases = new Map<string, string>(); // task#attempt -> worker, from claim replies
      const doubles: string[] = [];
      const finished = new Map<string, number>();
      const unsure: string[] = [];
      let stop = false;

      const tasks = Array.from({ length: TASKS }, (_, i) => ({
        task_id: `ha-${i}`,
        campaign_id: "ha",
        payload: { runner: "noop" },
        execution_profile: { placement: "shared", resources: { cpu_millis: 1000 } },
      }));
      for (let i = 0; i < tasks.length; i += 200)
        expect(
          (
            await call({ i: 0 }, "POST", "/api/tasks/dispatch", {
              schema_version: 1,
              operator: "ha",
              tasks: tasks.slice(i, i + 200),
            })
          ).status,
        ).toBe(201);

      const runner = async (n: number) => {
        const worker = `runner-${n}`;
        const home = { i: n };
        const reg = await call(
          home,
          "POST",
          "/api/workers/register",
          registerBody(worker, {
            max_concurrency: 2,
            initial_concurrency: 2,
            health: {
              hostname: worker,
              resources: { cpu_count: 2, mem_available_mb: 4096, disk_available_mb: 10_000 },
            },
          }),
        );
        expect(reg.status, JSON.stringify(reg.body)).toBe(200);
        while (!stop) {
          const c = await call(home, "POST", "/api/tasks/claim", {
            worker_id: worker,
            limit: 2,
            lease_seconds: 60,
            wait_seconds: 0,
          });
          const claimed: Json[] = c.status === 200 ? c.body.tasks : [];
          if (!claimed.length) {
            await new Promise((res) => setTimeout(res, 50));
            continue;
          }
          await Promise.all(
            claimed.map(async (t) => {
              const key = `${t.task_id}#${t.attempt_no}`;
              if (leases.has(key)) doubles.push(`${key}: ${leases.get(key)} and ${worker}`);
              leases.set(key, worker);
              await call(home, "POST", "/api/tasks/start", { worker_id: worker, task_id: t.task_id });
              await new Promise((res) => setTimeout(res, 400)); // the run itself, so the kill lands mid-run
              const zip = await writeZip([
                { name: "task.json", data: JSON.stringify({ task_id: t.task_id }) },
                { name: "worker-result.json", data: JSON.stringify({ task_id: t.task_id, exit_code: 0 }) },
                { name: "stdout.txt", data: "" },
                { name: "stderr.txt", data: "" },
              ]);
              const up = await call(home, "POST", "/api/results/upload", zip, {
                "x-task-id": t.task_id,
                "x-worker-id": worker,
              });
              const done = await call(home, "POST", "/api/tasks/complete", {
                worker_id: worker,
                task_id: t.task_id,
                result: {},
                upload: up.body,
              });
              if (up.status === 201 && done.status === 200) finished.set(t.task_id, (finished.get(t.task_id) ?? 0) + 1);
              else if (up.status !== 201) unsure.push(`${t.task_id}: upload ${up.status} ${JSON.stringify(up.body)}`);
            }),
          );
        }
      };
      const running = Array.from({ length: RUNNERS }, (_, n) => runner(n));

      // Kill the leader once a third of the work is done.
      await eventually(() => finished.size >= TASKS / 3, "a third of the tasks", 120_000);
      const hz = await Promise.all(
        replicas.map(async (r) => (await (await fetch(`${r.url}/api/healthz`)).json()) as Json),
      );
      const leader = replicas[hz.findIndex((h) => h.leading)];
      expect(leader, "a leader before the kill").toBeDefined();
      const killedAt = Date.now();
      process.kill(leader.proc.pid!, "SIGKILL");
      if (LONG) await etcd.members[2].stop("SIGKILL"); // a quorum of two members remains
      const next = await eventually(
        async () => {
          for (const r of alive()) {
            const h = (await (await fetch(`${r.url}/api/healthz`)).json()) as Json;
            if (h.leading && h.replica !== leader.id) return h.replica as string;
          }
          return undefined;
        },
        "a new leader",
        30_000,
      );
      const takeoverMs = Date.now() - killedAt;
      console.log(
        `HA: killed leader ${leader.id}; ${next} took over in ${takeoverMs} ms (${finished.size}/${TASKS} tasks done at the kill)`,
      );

      // The store is the judge of "finished": a reply lost with the killed replica leaves the
      // Runner unsure (its retry is fenced with 409), while the task itself is done.
      const notClean = async () =>
        (await observer.list("Task")).items
          .filter((t) => (t.status as Json)?.state !== "clean")
          .map((t) => `${t.metadata.name}:${(t.status as Json)?.state}@${(t.status as Json)?.lease?.worker ?? "-"}`);
      try {
        await eventually(async () => (await notClean()).length === 0, "every task clean", LONG ? 600_000 : 90_000);
      } catch (e) {
        throw new Error(
          `${(e as Error).message}; not clean: ${(await notClean()).join(" ")}; logs: ${alive()
            .map((r) => r.log.join("").slice(-2000))
            .join("\n")}`,
          { cause: e },
        );
      }
      stop = true;
      await Promise.all(running);

      // The store agrees: every task clean, no lease left, no revision over-reserved.
      const { items } = await observer.list("Task");
      expect(items.filter((t) => t.metadata.name.startsWith("ha-"))).toHaveLength(TASKS);
      expect(
        items
          .filter((t) => (t.status as Json)?.state !== "clean")
          .map((t) => `${t.metadata.name}:${(t.status as Json)?.state}`),
      ).toEqual([]);
      const head = await observer.revision();
      await eventually(() => rec.revision >= head, "the recorder to catch up");
      rec.stop();
      expect(doubles).toEqual([]);
      expect(rec.violations).toEqual([]);
      expect(rec.maxActiveSeen).toBe(2);
      // Each task's result was accepted once; the only uploads refused are retries of one whose
      // reply was lost when its replica was killed (fenced, since the task was already clean).
      expect([...finished.values()].every((n) => n === 1)).toBe(true);
      expect(finished.size + unsure.length).toBeGreaterThanOrEqual(TASKS);
      for (const u of unsure) expect(u).toMatch(/: upload 409 /);
      expect(takeoverMs).toBeGreaterThan(0);
    },
    LONG ? 900_000 : 300_000,
  );
});
