// What an existing v1 installation still tripped on, driven the way v1's clients drive it,
// and compared with what v1 itself answered for the same requests. Those answers are data
// in test/fixtures/v1-recorded.json: they were recorded by running v1's own Hub, Runner and
// manifest normaliser (Str1ckl4nd/loom at ac2c655, python3 3.11) on loopback.
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { join } from "node:path";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { convertManifest } from "../../src/resources/manifest.ts";
import { claimParams } from "../../src/scheduler/claim-params.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Json = Record<string, any>;
const V1 = JSON.parse(readFileSync(join(import.meta.dirname, "..", "fixtures", "v1-recorded.json"), "utf8")) as Json;
const FIXTURES = join(import.meta.dirname, "..", "fixtures", "v1");
const RUNNER_TOKEN = "v1-runner-token-0123456789";

/** A resource vector with v1's zeros filled in, for comparing a Loom profile with v1's. */
const full = (p: Json) => ({
  placement: p.placement ?? "shared",
  resources: { cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0, gpu_types: [], ...p.resources },
});

async function raw(
  url: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; body: any }> {
  const res = await fetch(
    url + path,
    body === undefined
      ? {}
      : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) },
  );
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

const events = async (h: TestHub, name: string, reason: string) => {
  await h.hub.events.flush();
  const list = (await get(h.url, `${API_PREFIX}/events?fieldSelector=involvedObject.name=${name}`)).body
    .items as Json[];
  return list.filter((e) => e.reason === reason);
};

describe("an idle v1 Direct Runner (it heartbeats only at registration and after each push)", () => {
  /**
   * A Direct Runner that behaves as v1's: it registers once, serves GET /api/healthz and
   * POST /api/tasks/execute (202, then runs the task), and heartbeats only after a push ends.
   */
  class V1DirectRunner {
    probes = 0;
    heartbeats = 0;
    /** What went wrong inside the Runner (a Hub call that failed), for the test to show. */
    errors: string[] = [];
    private server?: Server;
    url = "";
    hub = "";
    constructor(readonly workerId: string) {}
    async listen(): Promise<void> {
      this.server = createServer(
        (req, res) => void this.serve(req, res).catch((e: Error) => this.errors.push(e.message)),
      );
      await new Promise<void>((r) => this.server!.listen(0, "127.0.0.1", () => r()));
      this.url = `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
    }
    async register(): Promise<void> {
      expect(
        (
          await post(
            this.hub,
            "/api/workers/register",
            registerBody(this.workerId, { max_concurrency: 2, initial_concurrency: 2 }),
          )
        ).status,
      ).toBe(200);
    }
    private async serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
      const chunks: Buffer[] = [];
      for await (const c of req) chunks.push(c as Buffer);
      const send = (status: number, body: unknown) =>
        void res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
      if (req.headers.authorization !== `Bearer ${RUNNER_TOKEN}`) return send(401, { error: "unauthorized" });
      if (req.method === "GET" && req.url === "/api/healthz") {
        this.probes++;
        return send(200, {
          ok: true,
          worker_id: this.workerId,
          mode: "direct-api",
          core_preview_version: "0.4.0",
          runner_api_version: 1,
          running: false,
          active_pushes: [],
          last_result: {},
        });
      }
      if (req.method === "POST" && req.url === "/api/tasks/execute") {
        const task = JSON.parse(Buffer.concat(chunks).toString()).task as Json;
        send(202, { ok: true, state: "accepted", task_id: task.task_id, worker_id: this.workerId });
        // Run it (nothing to do), finish without an upload, and heartbeat once, as v1 does after a push.
        for (const [path, body] of [
          ["/api/tasks/start", { worker_id: this.workerId, task_id: task.task_id }],
          ["/api/tasks/complete", { worker_id: this.workerId, task_id: task.task_id, result: {}, upload: {} }],
          ["/api/workers/heartbeat", { worker_id: this.workerId, current_runs: [], health: { phase: "completed" } }],
        ] as const) {
          const r = await post(this.hub, path, body);
          if (r.status !== 200) this.errors.push(`${path} ${r.status} ${JSON.stringify(r.body)}`);
        }
        this.heartbeats++;
        return;
      }
      send(404, { error: "not_found", path: req.url });
    }
    close(): Promise<void> {
      return new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
    }
  }

  let dir: string;
  let h: TestHub | undefined;
  const runner = new V1DirectRunner("wd");
  let clock = Date.now();
  const startAt = async () => {
    h = await startHub(
      { now: () => clock, heartbeatGraceSeconds: 120, env: { ...process.env, LOOM_RUNNER_TOKEN: RUNNER_TOKEN } },
      dir,
    );
    runner.hub = h.url;
    return h;
  };
  const push = (task: string) =>
    post(h!.url, "/api/admin/push-task", { task_id: task, worker_id: "wd", operator: "ops" });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-v1-direct-"));
    await runner.listen();
  });
  afterAll(async () => {
    await h?.close();
    await runner.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("is pushed to after 150 s idle, and after a Hub restart, as v1 pushes to it", async () => {
    const hub = await startAt();
    expect(
      (
        await post(hub.url, "/api/admin/register-worker-hosts", {
          operator: "ops",
          hosts: [
            {
              worker_id: "wd",
              connection_mode: "direct-worker-api",
              worker_url: runner.url,
              max_concurrency: 2,
              initial_concurrency: 2,
            },
          ],
        })
      ).status,
    ).toBe(200);
    await runner.register();
    const tasks = ["push-1", "push-2", "push-3"].map((task_id) => ({
      task_id,
      required_capability: "linux",
      payload: { runner: "noop" },
    }));
    expect((await post(hub.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);

    // 150 s without a call: past the 120 s grace. v1 delivers; so does Loom, having asked the Runner.
    clock += 150_000;
    const idle = await push("push-1");
    expect({ status: idle.status, runner_state: idle.body.runner?.state }).toEqual({
      status: V1.direct_runner.push_after_idle.status,
      runner_state: V1.direct_runner.push_after_idle.runner_state,
    });
    expect(runner.probes).toBe(1);
    expect((await events(hub, "wd", "RunnerAnswered")).length).toBe(1);
    await eventually(
      () => runner.heartbeats === 1 && hub.hub.scheduler.ctx.task("push-1")?.status?.state === "returned",
      `the push to finish (${runner.errors})`,
    );
    // The worker shows what the Hub now knows, written with its status.
    await eventually(
      () => hub.hub.scheduler.ctx.worker("wd")?.status?.conditions?.find((c) => c.type === "Ready")?.status === "True",
      "wd Ready",
    );
    await eventually(
      () => hub.hub.scheduler.ctx.worker("wd")?.status?.last_heartbeat_at === new Date(clock).toISOString(),
      "the last call stored",
    );

    // A restart within the grace period: what the Hub knew carries over, no probe needed.
    await hub.close();
    clock += 10_000;
    const again = await startAt();
    const restarted = await push("push-2");
    expect({ status: restarted.status, runner_state: restarted.body.runner?.state }).toEqual({
      status: V1.direct_runner.push_after_restart.status,
      runner_state: V1.direct_runner.push_after_restart.runner_state,
    });
    expect(runner.probes).toBe(1);
    await eventually(() => runner.heartbeats === 2, `the second push to finish (${runner.errors})`);

    // A restart long after: nothing carries over, and the Runner is asked again.
    await again.close();
    clock += 600_000;
    const later = await startAt();
    expect((await push("push-3")).status).toBe(202);
    expect(runner.probes).toBe(2);
    await eventually(() => runner.heartbeats === 3, `the third push to finish (${runner.errors})`);
    expect(runner.errors).toEqual([]);
    expect(later.hub.scheduler.ctx.task("push-3")?.status?.state).toBe("returned");

    // A push that names no worker asks every quiet Direct Runner it could choose.
    clock += 150_000;
    expect(
      (
        await post(later.url, "/api/tasks/dispatch", {
          schema_version: 1,
          tasks: [{ task_id: "push-4", required_capability: "linux", payload: { runner: "noop" } }],
        })
      ).status,
    ).toBe(201);
    const auto = await post(later.url, "/api/admin/push-task", { task_id: "push-4" });
    expect(auto).toMatchObject({ status: 202, body: { worker_id: "wd", selection: { mode: "cache-affine-auto" } } });
    expect(runner.probes).toBe(3);
    await eventually(() => runner.heartbeats === 4, `the fourth push to finish (${runner.errors})`);
    expect(runner.errors).toEqual([]);
  }, 30_000);

  it("in push mode, the Hub's own dispatcher asks a quiet Runner and pushes to it", async () => {
    const hub = h!;
    const pusher = new V1DirectRunner("wp");
    await pusher.listen();
    pusher.hub = hub.url;
    try {
      expect(
        (
          await post(hub.url, "/api/admin/register-worker-hosts", {
            operator: "ops",
            hosts: [
              {
                worker_id: "wp",
                connection_mode: "direct-worker-api",
                direct_api_dispatch_mode: "push",
                worker_url: pusher.url,
                capabilities: ["pushed"],
                max_concurrency: 2,
                initial_concurrency: 2,
              },
            ],
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await post(
            hub.url,
            "/api/workers/register",
            registerBody("wp", { capabilities: ["pushed"], max_concurrency: 2, initial_concurrency: 2 }),
          )
        ).status,
      ).toBe(200);
      // (a dispatcher pass may ask once while the registration is landing; count from here)
      await eventually(() => hub.hub.scheduler.ctx.liveness.get("wp"), "wp's registration seen");
      // An answer that lands after the clock moves would count as a call made just now.
      await eventually(
        async () => (await events(hub, "wp", "RunnerAnswered")).length === pusher.probes,
        "every probe so far answered",
      );
      clock += 150_000;
      pusher.probes = 0;
      expect(
        (
          await post(hub.url, "/api/tasks/dispatch", {
            schema_version: 1,
            tasks: [{ task_id: "pushed-1", required_capability: "pushed", payload: { runner: "noop" } }],
          })
        ).status,
      ).toBe(201);
      await eventually(() => pusher.heartbeats === 1, `the dispatcher's push to finish (${pusher.errors})`);
      expect(pusher.probes).toBe(1);
      expect(hub.hub.scheduler.ctx.task("pushed-1")?.status?.attempts?.at(-1)).toMatchObject({
        worker: "wp",
        mode: "push",
      });
      expect(pusher.errors).toEqual([]);
    } finally {
      await pusher.close();
    }
  });

  it("is not taken as alive when its address answers as another worker", async () => {
    const other = new V1DirectRunner("someone-else");
    await other.listen();
    try {
      const hub = h!;
      expect(
        (
          await post(hub.url, "/api/admin/register-worker-hosts", {
            operator: "ops",
            hosts: [
              {
                worker_id: "wx",
                connection_mode: "direct-worker-api",
                worker_url: other.url,
                max_concurrency: 1,
                initial_concurrency: 1,
              },
            ],
          })
        ).status,
      ).toBe(200);
      expect(
        (
          await post(
            hub.url,
            "/api/workers/register",
            registerBody("wx", { max_concurrency: 1, initial_concurrency: 1 }),
          )
        ).status,
      ).toBe(200);
      expect(
        (
          await post(hub.url, "/api/tasks/dispatch", {
            schema_version: 1,
            tasks: [{ task_id: "push-x", required_capability: "linux", payload: { runner: "noop" } }],
          })
        ).status,
      ).toBe(201);
      clock += 150_000;
      const r = await post(hub.url, "/api/admin/push-task", { task_id: "push-x", worker_id: "wx" });
      expect(r.status).toBe(409);
      expect(r.body.reasons).toContain("worker_not_ready");
      expect(other.probes).toBe(1);
      expect(hub.hub.scheduler.ctx.task("push-x")?.status?.state).toBe("queued");
    } finally {
      await other.close();
    }
  });
});

describe("v1's Hub API on one Hub", () => {
  let h: TestHub;
  beforeAll(async () => {
    // The fixture inventory names its Direct Runner token LAB_RUNNER_TOKEN, as a v1 lab does.
    h = await startHub({ directTokenEnv: ["LOOM_DIRECT_TOKEN_*", "LAB_RUNNER_TOKEN"] });
  });
  afterAll(async () => {
    await h.close();
  });

  describe("claim parameters are clamped as v1 clamps them, and the reply says so", () => {
    it("limit 0, limit 2000 and wait_seconds 100 are served; the reply has v1's shape, active_count before the claim", async () => {
      const v1 = V1.claim;
      expect(
        (
          await post(
            h.url,
            "/api/workers/register",
            registerBody("w1", { capabilities: ["linux"], max_concurrency: 2, initial_concurrency: 2 }),
          )
        ).status,
      ).toBe(200);
      const shape = (r: { status: number; body: Json }) => ({
        status: r.status,
        keys: Object.keys(r.body),
        active_count: r.body.active_count,
        task_ids: r.body.tasks.map((t: Json) => t.task_id),
        ...(r.body.tasks.length
          ? {
              components: r.body.tasks[0].components,
              active_count_at_claim: r.body.tasks[0].controller_concurrency.active_count_at_claim,
            }
          : {}),
      });
      const empty = await raw(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 0 });
      expect(shape(empty)).toEqual(v1.empty_limit0);
      expect(empty.headers.get("x-loom-clamped")).toBe("limit=1 (asked 0)");

      const tasks = ["c-1", "c-2", "c-3", "c-4"].map((task_id) => ({
        task_id,
        required_capability: "linux",
        payload: { runner: "noop" },
      }));
      expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
      expect(shape(await raw(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 0 }))).toEqual(v1.limit0);
      const big = await raw(h.url, "/api/tasks/claim", {
        worker_id: "w1",
        limit: 2000,
        wait_seconds: 100,
        lease_seconds: 5,
      });
      expect(shape(big)).toEqual(v1.limit2000_wait100);
      expect(big.headers.get("x-loom-clamped")).toBe(
        "limit=1024 (asked 2000), wait_seconds=60 (asked 100), lease_seconds=30 (asked 5)",
      );
      // Full: no resource fields, as v1 and the protocol have it.
      const fullReply = await raw(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 5 });
      expect(shape(fullReply)).toEqual(v1.full);
      expect(fullReply.headers.get("x-loom-clamped")).toBeNull();
      // Not a number at all is still a 400 naming the field (v1: a 500).
      const bad = await raw(h.url, "/api/tasks/claim", { worker_id: "w1", limit: "many" });
      expect(bad).toMatchObject({ status: 400, body: { error: "invalid_limit", field: "limit" } });
    });

    it("wait_seconds above 60 waits 60 s, as v1 waited 60.0 s for 100", () => {
      expect(claimParams({ wait_seconds: 100 }).waitMs).toBe(V1.claim.wait100_nothing_to_claim_seconds * 1000);
      expect(claimParams({ wait_seconds: -3 }).waitMs).toBe(0);
      expect(claimParams({ limit: 2.7 }).limit).toBe(2);
    });

    it("/api/tasks?limit=1000 is clamped to 500, limit=0 to 1 and a negative offset to 0", async () => {
      const all = await raw(h.url, "/api/tasks?limit=1000");
      expect(all.status).toBe(200);
      expect(all.headers.get("x-loom-clamped")).toBe("limit=500 (asked 1000)");
      expect({
        rows: all.body.tasks.length,
        total: all.body.total,
        offset: all.body.offset,
        next_offset: all.body.next_offset,
      }).toEqual(V1.tasks_list.limit1000);
      const one = await raw(h.url, "/api/tasks?limit=0&offset=-3");
      expect(one.headers.get("x-loom-clamped")).toBe("limit=1 (asked 0), offset=0 (asked -3)");
      expect({
        rows: one.body.tasks.length,
        total: one.body.total,
        offset: one.body.offset,
        next_offset: one.body.next_offset,
      }).toEqual(V1.tasks_list["limit0_offset-3"]);
    });

    it("in a batch, every task's active_count_at_claim is the count before the claim; its admission counts the batch so far", async () => {
      const v1 = V1.claim.batch_of_three;
      expect(
        (
          await post(
            h.url,
            "/api/workers/register",
            registerBody("wb", { capabilities: ["batch"], max_concurrency: 3, initial_concurrency: 3 }),
          )
        ).status,
      ).toBe(200);
      const tasks = ["b-1", "b-2", "b-3"].map((task_id) => ({
        task_id,
        required_capability: "batch",
        payload: { runner: "noop" },
      }));
      expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
      const r = (await post(h.url, "/api/tasks/claim", { worker_id: "wb", limit: 3 })).body;
      expect({
        active_count: r.active_count,
        tasks: r.tasks.map((t: Json) => ({
          task_id: t.task_id,
          active_count_at_claim: t.controller_concurrency.active_count_at_claim,
          admission_active_count: t.controller_concurrency.resource_admission.concurrency.active_count,
        })),
      }).toEqual({ active_count: v1.active_count, tasks: v1.tasks });
    });
  });

  describe("override-state goes through the status write", () => {
    it("leased -> clean answers as v1 and releases the reservation; v1's refusals keep their codes", async () => {
      const cap = async () =>
        (await get(h.url, "/api/data/worker-capacity")).body.workers.find((w: Json) => w.worker_id === "w1")
          .active_task_ids;
      expect(await cap()).toEqual(V1.override.active_task_ids_before);
      const r = await post(h.url, "/api/admin/override-state", {
        target_type: "task",
        target_id: "c-1",
        state: "clean",
        reason: "probe",
      });
      expect([r.status, r.body]).toEqual(V1.override.leased_to_clean);
      expect(await cap()).toEqual(V1.override.active_task_ids_after);
      const t = h.hub.scheduler.ctx.task("c-1")!;
      expect(t.status?.lease).toBeUndefined();
      expect(t.status?.attempts?.at(-1)).toMatchObject({ worker: "w1", outcome: "overridden" });
      expect((await events(h, "c-1", "StateOverridden"))[0].message).toBe(
        "leased -> clean by local-admin: probe; lease on w1 ended, reservation released",
      );

      for (const [body, v1] of [
        [{ target_type: "task", target_id: "c-3", state: "clean" }, V1.override.no_reason],
        [{ target_type: "task", target_id: "nope", state: "clean", reason: "x" }, V1.override.unknown_task],
        [{ target_type: "worker", target_id: "w1", state: "clean", reason: "x" }, V1.override.worker_target],
      ]) {
        const got = await post(h.url, "/api/admin/override-state", body);
        expect(got.status).toBe(v1[0]);
        expect(got.body.error).toBe(v1[1].error);
      }
    });

    it("a state Loom does not have, or an active state without a lease, is refused and nothing changes", async () => {
      // v1 stores any string (it answered new_state "bogus"); Loom's states are its schema's.
      expect(V1.override.any_state[1].new_state).toBe("bogus");
      const bogus = await post(h.url, "/api/admin/override-state", {
        target_type: "task",
        target_id: "c-3",
        state: "bogus",
        reason: "x",
      });
      expect(bogus).toMatchObject({ status: 400, body: { error: "invalid_state", field: "state" } });
      const running = await post(h.url, "/api/admin/override-state", {
        target_type: "task",
        target_id: "c-3",
        state: "running",
        reason: "x",
      });
      expect(running).toMatchObject({ status: 409, body: { error: "override_needs_lease" } });
      expect(h.hub.scheduler.ctx.task("c-3")?.status?.state).toBe("queued");
      // Back from a final state to the queue: no longer finished, and claimable again.
      const back = await post(h.url, "/api/admin/override-state", {
        target_id: "c-1",
        state: "queued",
        reason: "again",
      });
      expect(back.body).toEqual({ ok: true, task_id: "c-1", old_state: "clean", new_state: "queued" });
      expect(h.hub.scheduler.ctx.task("c-1")?.status?.finished_at).toBeUndefined();
    });
  });

  describe("dispatched execution profiles", () => {
    it("a float is truncated (with an Event), and a task's profile replaces the payload's whole", async () => {
      const tasks = [
        {
          task_id: "float-1",
          execution_profile: { resources: { cpu_millis: 250.9, memory_mb: 100.5 } },
          payload: { runner: "noop" },
        },
        {
          task_id: "prec-1",
          execution_profile: { resources: { cpu_millis: 250 } },
          payload: {
            runner: "noop",
            execution_profile: { placement: "exclusive", resources: { cpu_millis: 100, memory_mb: 512 } },
          },
        },
        {
          task_id: "prec-2",
          payload: { runner: "noop", execution_profile: { placement: "exclusive", resources: { memory_mb: 512 } } },
        },
      ];
      expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
      for (const id of ["float-1", "prec-1", "prec-2"]) {
        const t = h.hub.scheduler.ctx.task(id)!;
        expect(full(t.spec.execution_profile as Json), id).toEqual(V1.profiles[id]);
        expect(full((t.spec.payload as Json).execution_profile), id).toEqual(V1.profiles[id]);
        // What admission would reserve is what v1 would.
        const adm = (await get(h.url, `/api/data/task-admission?task_id=${id}`)).body;
        expect({ ...adm.workers[0].requested }, id).toEqual(V1.profiles[id].resources);
      }
      expect((await events(h, "float-1", "ResourceTruncated"))[0].message).toBe(
        "whole units only: tasks[0].execution_profile.resources.cpu_millis 250.9 -> 250, tasks[0].execution_profile.resources.memory_mb 100.5 -> 100",
      );
      // The same request again is the same task.
      expect(
        (await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks: [tasks[0]] })).body.existing,
      ).toEqual([expect.objectContaining({ task_id: "float-1" })]);
    });
  });

  describe("manifest normalisation", () => {
    it("ids are slugged as v1 slugs them, {case_id} expands to the slug, package_id has one separator, source_index starts at 1", async () => {
      const { campaign, errors } = convertManifest(V1.manifest.input);
      expect(errors).toEqual([]);
      expect((await post(h.url, `${API_PREFIX}/campaigns`, campaign)).status).toBe(201);
      for (const v1 of V1.manifest.normalized.tasks as Json[]) {
        const t = await eventually(() => h.hub.scheduler.ctx.task(v1.task_id), `task ${v1.task_id}`);
        const p = t.spec.payload as Json;
        expect({
          case_id: t.spec.case_id,
          run_id: t.spec.run_id,
          setting_id: t.spec.setting_id,
          case_version: t.spec.case_version,
          scenario_id: t.spec.scenario_id,
          package_id: t.spec.package_id,
          required_capability: t.spec.required_capability,
          priority: t.spec.priority,
        }).toEqual({
          case_id: v1.case_id,
          run_id: v1.run_id,
          setting_id: v1.setting_id,
          case_version: v1.case_version,
          scenario_id: v1.scenario_id,
          package_id: v1.package_id,
          required_capability: v1.required_capability,
          priority: v1.priority,
        });
        expect(t.spec.campaign_id).toBe(V1.manifest.normalized.campaign_id);
        expect(p.normalized).toEqual(v1.payload.normalized);
        expect(p.command).toBe(v1.payload.command);
      }
    });

    it("the same manifest sent again in v1's normalised form through dispatch-spec is idempotent, as in v1", async () => {
      const spec = V1.manifest.normalized;
      expect(V1.manifest.dispatch_spec_again.out.existing.map((e: Json) => e.task_id)).toEqual(
        spec.tasks.map((t: Json) => t.task_id),
      );
      for (let i = 0; i < 2; i++) {
        const r = await post(h.url, "/api/tasks/dispatch", spec);
        expect(r.status).toBe(200);
        expect(r.body).toEqual({
          created: [],
          existing: V1.manifest.dispatch_spec_again.out.existing.map((e: Json) => ({ ...e, task_kind: "execution" })),
        });
      }
      // A repo manifest too: v1 spells phases and the source descriptor its own way.
      const repo = V1.manifest_repo.normalized;
      const { campaign } = convertManifest(
        JSON.parse(readFileSync(join(FIXTURES, "repo-phases.manifest.json"), "utf8")),
      );
      expect((await post(h.url, `${API_PREFIX}/campaigns`, campaign)).status).toBe(201);
      for (const t of repo.tasks as Json[])
        await eventually(() => h.hub.scheduler.ctx.task(t.task_id), `task ${t.task_id}`);
      const resent = await post(h.url, "/api/tasks/dispatch", repo);
      expect(resent.status).toBe(200);
      expect(resent.body.existing.map((e: Json) => e.task_id)).toEqual(repo.tasks.map((t: Json) => t.task_id));
      // A different request under the same id is still a conflict.
      const changed = {
        ...spec,
        tasks: [{ ...spec.tasks[0], payload: { ...spec.tasks[0].payload, command: "echo other" } }],
      };
      expect((await post(h.url, "/api/tasks/dispatch", changed)).status).toBe(409);
    });
  });

  describe("reply shapes", () => {
    it("/api/meta and /api/healthz list v1's capability names as well as Loom's, with v1's version fields", async () => {
      const meta = (await get(h.url, "/api/meta")).body;
      const health = (await get(h.url, "/api/healthz")).body;
      for (const k of Object.keys(V1.meta)) if (k !== "capabilities") expect(meta[k], k).toEqual(V1.meta[k]);
      expect(meta.capabilities.slice(0, V1.meta.capabilities.length)).toEqual(V1.meta.capabilities);
      expect(meta.capabilities).toContain("task-claim-long-poll");
      for (const k of Object.keys(V1.healthz)) if (k !== "capabilities") expect(health[k], k).toEqual(V1.healthz[k]);
      expect(health.capabilities.slice(0, V1.healthz.capabilities.length)).toEqual(V1.healthz.capabilities);
    });

    it("register-worker-hosts answers each host in v1's shape, endpoint an object", async () => {
      const inventory = JSON.parse(readFileSync(join(FIXTURES, "inventory.json"), "utf8"));
      const r = await post(h.url, "/api/admin/register-worker-hosts", { operator: "ops", inventory });
      expect(r.status).toBe(200);
      const v1Keys = (x: Json) => Object.fromEntries(Object.keys(V1.register_worker_hosts[0]).map((k) => [k, x[k]]));
      expect(r.body.registered.map(v1Keys)).toEqual(V1.register_worker_hosts);
      expect(r.body.registered.map((x: Json) => x.push_url)).toEqual([null, null, "http://172.16.0.23:9877"]);
    });
  });
});
