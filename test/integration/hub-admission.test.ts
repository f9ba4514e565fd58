// The Hub's side of the contract (RESOURCE_ADMISSION.md, RUNNER_PROTOCOL §1, §3, §4, §7, §8),
// over real HTTP on loopback against a real Hub on a temp-dir SQLite store. One describe per
// rule; every request is what a v1 Runner or an operator would send with curl.
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Hub } from "../../src/hub.ts";
import { readZip, writeZip } from "../../src/results/zip.ts";
import { HubClient } from "../../src/runner/client.ts";
import { RENEWAL_KIND } from "../../src/scheduler/renewal.ts";
import { resolveConfig } from "../../src/runner/command.ts";
import { registrationBody } from "../../src/runner/pull.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Json = Record<string, any>;

let h: TestHub;
let u: string;

/** The Hub's clock runs this far ahead of the real one: how a test lets leases expire. */
let clockOffsetMs = 0;
async function useHub(opts: Parameters<typeof startHub>[0] = {}): Promise<void> {
  await h?.close();
  clockOffsetMs = 0;
  h = await startHub({ now: () => Date.now() + clockOffsetMs, ...opts });
  u = h.url;
}
beforeEach(() => useHub());
afterEach(async () => {
  await h?.close();
  h = undefined as unknown as TestHub;
});

// ---------------------------------------------------------------------------
// helpers

const vec = (cpu_millis = 0, memory_mb = 0, disk_mb = 0, gpu_count = 0, gpu_types: string[] = []) => ({
  cpu_millis,
  memory_mb,
  disk_mb,
  gpu_count,
  gpu_types,
});
const res = (r: Json, placement: "shared" | "exclusive" = "shared") => ({ placement, resources: r });

/** A raw dispatch task: noop, any capability unless said otherwise. */
const task = (task_id: string, execution_profile?: Json, extra: Json = {}) => ({
  task_id,
  required_capability: "",
  payload: { runner: "noop" },
  ...(execution_profile ? { execution_profile } : {}),
  ...extra,
});

async function dispatch(tasks: Json[], url = u, headers: Record<string, string> = {}): Promise<Json> {
  const r = await post(url, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks }, headers);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

async function register(worker: string, extra: Json = {}): Promise<Json> {
  const r = await post(u, "/api/workers/register", registerBody(worker, extra));
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

async function claim(worker: string, extra: Json = {}): Promise<Json> {
  const r = await post(u, "/api/tasks/claim", { worker_id: worker, limit: 10, lease_seconds: 60, ...extra });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}

const claimedIds = (reply: Json): string[] => reply.tasks.map((t: Json) => t.task_id).sort();

async function capacityOf(worker: string, url = u): Promise<Json> {
  const r = await get(url, "/api/data/worker-capacity");
  expect(r.status).toBe(200);
  return r.body.workers.find((w: Json) => w.worker_id === worker);
}

async function admission(taskId: string): Promise<Json> {
  const r = await get(u, `/api/data/task-admission?task_id=${encodeURIComponent(taskId)}`);
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
}
const admissionOn = async (taskId: string, worker: string): Promise<Json> =>
  (await admission(taskId)).workers.find((w: Json) => w.worker_id === worker);

async function row(taskId: string, url = u, headers: Record<string, string> = {}): Promise<Json> {
  const r = await get(url, `/api/tasks?task_id=${encodeURIComponent(taskId)}`, headers);
  expect(r.status).toBe(200);
  return r.body.tasks[0];
}

/** A result ZIP as a Runner uploads it: task.json, worker-result.json, stdout.txt, stderr.txt. */
async function resultZip(
  o: { exit_code?: number; verdict?: string; stdout?: string; stderr?: string; task_id?: string } = {},
): Promise<Buffer> {
  const wr: Json = { task_id: o.task_id ?? "t", exit_code: o.exit_code ?? 0 };
  if (o.verdict) wr.verdict = o.verdict;
  return writeZip([
    { name: "task.json", data: JSON.stringify({ task_id: o.task_id ?? "t" }) },
    { name: "worker-result.json", data: JSON.stringify(wr) },
    { name: "stdout.txt", data: o.stdout ?? "" },
    { name: "stderr.txt", data: o.stderr ?? "" },
  ]);
}

async function upload(
  taskId: string,
  worker: string | undefined,
  zip: Buffer,
  url = u,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(url + "/api/results/upload", {
    method: "POST",
    headers: {
      "content-type": "application/zip",
      "x-task-id": taskId,
      ...(worker === undefined ? {} : { "x-worker-id": worker }),
      ...headers,
    },
    body: zip,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** The Runner's end of a task: upload a result, then complete. */
async function finish(taskId: string, worker: string, zip: Parameters<typeof resultZip>[0] = {}): Promise<Json> {
  const up = await upload(taskId, worker, await resultZip({ task_id: taskId, ...zip }));
  expect(up.status, JSON.stringify(up.body)).toBe(201);
  const done = await post(u, "/api/tasks/complete", {
    worker_id: worker,
    task_id: taskId,
    result: {},
    upload: up.body,
  });
  expect(done.status, JSON.stringify(done.body)).toBe(200);
  return up.body;
}

/** Move the Hub's clock past every lease taken so far (claims here lease for 60 s), and tell the lease controller. */
function passLeases(hub: Hub): void {
  clockOffsetMs += 61_000;
  hub.controllers?.leases.resync();
}

// ---------------------------------------------------------------------------

describe("capability eligibility", () => {
  it("an empty requirement matches any worker; a named one needs the worker to list it or *", async () => {
    await register("gpu-only", { capabilities: ["gpu"] });
    await register("star", { capabilities: ["*"] });
    await dispatch([
      task("any-cap"),
      task("needs-linux", undefined, { required_capability: "linux" }),
      task("needs-gpu", undefined, { required_capability: "gpu" }),
    ]);

    const any = await admission("any-cap");
    expect(any.eligible_worker_count).toBe(2);
    const linuxOnGpu = await admissionOn("needs-linux", "gpu-only");
    expect(linuxOnGpu).toMatchObject({ ok: false, reason: "worker_not_eligible" });
    expect(linuxOnGpu.reasons).toContain("capability_missing");
    expect((await admissionOn("needs-linux", "star")).ok).toBe(true);
    expect((await admissionOn("needs-gpu", "gpu-only")).ok).toBe(true);

    // gpu-only never receives the linux task; star can take everything
    expect(claimedIds(await claim("gpu-only"))).toEqual(["any-cap", "needs-gpu"]);
    expect(claimedIds(await claim("star"))).toEqual(["needs-linux"]);
  });

  it("a Runner started without --capability advertises [linux, *] and so is eligible for any requirement", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-cap-"));
    try {
      const cfg = resolveConfig({
        controller: u,
        workerId: "plain-runner",
        capability: [],
        maxConcurrency: "2",
        initialConcurrency: "2",
        concurrencyPolicy: "fixed",
        leaseSeconds: "600",
        connectionMode: "ssh-start",
        pollSeconds: "5",
        serveHost: "127.0.0.1",
        servePort: "9876",
        authTokenEnv: "LOOM_HUB_TOKEN",
        directApiTokenEnv: "LOOM_RUNNER_TOKEN",
        shutdownGraceSeconds: "30",
        workDir: dir,
      });
      const { body } = await registrationBody({ ...cfg.pull, client: new HubClient({ baseUrl: u }), log: () => {} });
      expect(body.capabilities).toEqual(["linux", "*"]);
      expect((await post(u, "/api/workers/register", body)).status).toBe(200);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    await dispatch([
      task("odd-cap", undefined, { required_capability: "cuda-12.4" }),
      task("linux-cap", undefined, { required_capability: "linux" }),
    ]);
    expect((await admissionOn("odd-cap", "plain-runner")).ok).toBe(true);
    expect(claimedIds(await claim("plain-runner"))).toEqual(["linux-cap", "odd-cap"]);
  });
});

describe("concurrency: active < min(desired, max)", () => {
  it("counts the Hub's own leases before any heartbeat: a claim with limit 10 on max 2 gets 2, the next gets none", async () => {
    await register("w", { max_concurrency: 2, initial_concurrency: 2 });
    await dispatch(["c1", "c2", "c3", "c4", "c5"].map((id) => task(id)));
    const first = await claim("w", { limit: 10 });
    expect(first.tasks).toHaveLength(2);
    // active_count is the count before this claim, as v1 gives it
    expect(first).toMatchObject({ desired_concurrency: 2, max_concurrency: 2, active_count: 0 });
    const second = await claim("w", { limit: 10 });
    expect(second.tasks).toEqual([]);
    expect(second.active_count).toBe(2);
  });

  it("a heartbeat reporting fewer runs does not open slots while leases are active", async () => {
    await register("w", { max_concurrency: 2, initial_concurrency: 2 });
    await dispatch(["h1", "h2", "h3"].map((id) => task(id)));
    const leased = claimedIds(await claim("w"));
    expect(leased).toHaveLength(2);
    // an old Runner heartbeat that has not seen the new leases yet
    const hb = await post(u, "/api/workers/heartbeat", { worker_id: "w", current_runs: [], health: { phase: "idle" } });
    expect(hb.status).toBe(200);
    const after = await claim("w");
    expect(after.tasks).toEqual([]);
    expect(after.active_count).toBe(2);
    expect((await admissionOn("h3", "w")).concurrency).toMatchObject({
      reported_active: 0,
      leased_active: 2,
      active_count: 2,
      effective_limit: 2,
    });

    // finishing one opens exactly one slot
    await finish(leased[0], "w");
    expect(claimedIds(await claim("w"))).toEqual(["h3"]);
  });

  it("runs a Runner reports count too: active = max(reported, leased)", async () => {
    await register("w", { max_concurrency: 2, initial_concurrency: 2 });
    await post(u, "/api/workers/heartbeat", {
      worker_id: "w",
      current_runs: [
        { task_id: "ghost-1", phase: "running" },
        { task_id: "ghost-2", phase: "running" },
      ],
    });
    await dispatch([task("r1")]);
    const c = await claim("w");
    expect(c.tasks).toEqual([]);
    expect((await admissionOn("r1", "w")).reasons).toEqual(["worker_concurrency_reached"]);
    await post(u, "/api/workers/heartbeat", { worker_id: "w", current_runs: [] });
    expect(claimedIds(await claim("w"))).toEqual(["r1"]);
  });

  it("an unknown worker's heartbeat gets 200 with defaults, and its claims 403 worker_not_available", async () => {
    const hb = await post(u, "/api/workers/heartbeat", { worker_id: "stranger", current_runs: [] });
    expect(hb).toMatchObject({
      status: 200,
      body: { ok: true, worker_id: "stranger", desired_concurrency: 1, max_concurrency: 1 },
    });
    expect(await post(u, "/api/tasks/claim", { worker_id: "stranger" })).toMatchObject({
      status: 403,
      body: { error: "worker_not_available" },
    });
  });

  it("set-worker-concurrency clamps to [1, max], and claims follow the desired value", async () => {
    await register("w", { max_concurrency: 3, initial_concurrency: 3 });
    const set = (desired_concurrency: unknown) =>
      post(u, "/api/admin/set-worker-concurrency", { worker_id: "w", desired_concurrency, reason: "test" });
    expect(await set(99)).toMatchObject({
      status: 200,
      body: { ok: true, worker_id: "w", desired_concurrency: 3, max_concurrency: 3 },
    });
    expect((await set(0)).body.desired_concurrency).toBe(1);
    expect((await set(-5)).body.desired_concurrency).toBe(1);
    expect((await set("two")).status).toBe(400);
    expect(
      await post(u, "/api/admin/set-worker-concurrency", { worker_id: "nobody", desired_concurrency: 1 }),
    ).toMatchObject({ status: 404, body: { error: "worker_not_found" } });

    await dispatch(["d1", "d2", "d3"].map((id) => task(id)));
    const one = await claim("w", { limit: 10 });
    expect(one.tasks).toHaveLength(1);
    expect(one.desired_concurrency).toBe(1);
    expect((await set(2)).body.desired_concurrency).toBe(2);
    expect((await claim("w", { limit: 10 })).tasks).toHaveLength(1);
    expect((await claim("w", { limit: 10 })).tasks).toHaveLength(0);
    // the heartbeat reply carries the value a Runner clamps to
    expect((await post(u, "/api/workers/heartbeat", { worker_id: "w", current_runs: [] })).body).toMatchObject({
      desired_concurrency: 2,
      max_concurrency: 3,
    });
  });
});

describe("resource headroom: reserved + requested <= capacity in every dimension", () => {
  beforeEach(async () => {
    await register("w", { resource_capacity: { cpu_millis: 4000, memory_mb: 4096, disk_mb: 10_000, gpu_count: 0 } });
  });

  it("leases up to exactly the capacity, skipping what does not fit, and the claim reply shows reserved and available", async () => {
    await dispatch([
      task("a-big", res({ cpu_millis: 3000, memory_mb: 1000 })),
      task("b-cpu", res({ cpu_millis: 2000 })),
      task("c-rest", res({ cpu_millis: 1000, memory_mb: 3096 })),
    ]);
    const c = await claim("w");
    expect(claimedIds(c)).toEqual(["a-big", "c-rest"]);
    expect(c.resource_capacity).toEqual(vec(4000, 4096, 10_000));
    expect(c.reserved_resources).toEqual(vec(4000, 4096, 0));
    expect(c.available_resources).toEqual(vec(0, 0, 10_000));
    // the second lease of the batch was admitted against the first one's reservation
    const rest = c.tasks.find((t: Json) => t.task_id === "c-rest").controller_concurrency.resource_admission;
    expect(rest).toMatchObject({
      ok: true,
      requested: vec(1000, 3096),
      reserved_before: vec(3000, 1000),
      available_before: vec(1000, 3096, 10_000),
      available_after: vec(0, 0, 10_000),
    });

    expect(await capacityOf("w")).toMatchObject({
      capacity: vec(4000, 4096, 10_000),
      reserved: vec(4000, 4096),
      available: vec(0, 0, 10_000),
      active_task_ids: ["a-big", "c-rest"],
    });
    const b = await admissionOn("b-cpu", "w");
    expect(b).toMatchObject({
      ok: false,
      reason: "resource_reservation_unavailable",
      reasons: ["resource_reservation_unavailable"],
    });
    expect(b.shortfalls).toEqual({ cpu_millis: { capacity: 4000, reserved: 4000, requested: 2000, short: 2000 } });

    // releasing a-big makes room for b-cpu
    await finish("a-big", "w");
    expect(await capacityOf("w")).toMatchObject({ reserved: vec(1000, 3096) });
    expect(claimedIds(await claim("w"))).toEqual(["b-cpu"]);
  });

  it("claims racing each other never over-reserve: leases and reservations are one atomic write", async () => {
    await dispatch(Array.from({ length: 10 }, (_, i) => task(`r${i}`, res({ cpu_millis: 1000, memory_mb: 1000 }))));
    const replies = await Promise.all(Array.from({ length: 6 }, () => claim("w", { limit: 2 })));
    const leased = replies.flatMap(claimedIds);
    expect(new Set(leased).size).toBe(leased.length);
    expect(leased).toHaveLength(4);
    expect(await capacityOf("w")).toMatchObject({ reserved: vec(4000, 4000), available: vec(0, 96, 10_000) });
  });

  it("a task that does not fit does not block a later, smaller one (no head-of-line blocking)", async () => {
    await dispatch([task("hold", res({ cpu_millis: 2000, disk_mb: 9000 }))]);
    expect(claimedIds(await claim("w"))).toEqual(["hold"]);
    await dispatch([task("big-first", res({ cpu_millis: 3000 }), { priority: 5 })]);
    await dispatch([task("disk-heavy", res({ disk_mb: 2000 }), { priority: 3 })]);
    await dispatch([task("small-later", res({ cpu_millis: 1000, disk_mb: 1000 }))]);
    expect(claimedIds(await claim("w", { limit: 1 }))).toEqual(["small-later"]);
    expect((await row("big-first")).state).toBe("queued");
    expect((await row("disk-heavy")).state).toBe("queued");
  });
});

describe("shared and exclusive placement", () => {
  beforeEach(async () => {
    await register("w", { max_concurrency: 4, initial_concurrency: 4 });
  });

  it("exclusive waits for an empty worker; while it is leased or running no shared task lands; after it ends shared tasks land", async () => {
    await dispatch([task("s1")]);
    expect(claimedIds(await claim("w"))).toEqual(["s1"]);

    await dispatch([task("x", res({}, "exclusive"), { priority: 10 }), task("s2")]);
    expect(claimedIds(await claim("w"))).toEqual(["s2"]);
    expect(await admissionOn("x", "w")).toMatchObject({
      ok: false,
      reason: "exclusive_worker_busy",
      placement: "exclusive",
    });

    await finish("s1", "w");
    expect((await claim("w")).tasks).toEqual([]);
    await finish("s2", "w");
    const ex = await claim("w");
    expect(claimedIds(ex)).toEqual(["x"]);
    expect(ex.tasks[0].controller_concurrency.resource_admission).toMatchObject({
      ok: true,
      placement: "exclusive",
      active_task_ids: [],
    });
    expect(await capacityOf("w")).toMatchObject({ exclusive_active: true, active_task_ids: ["x"] });

    await dispatch([task("s3")]);
    expect((await claim("w")).tasks).toEqual([]);
    expect(await admissionOn("s3", "w")).toMatchObject({
      ok: false,
      reason: "worker_has_exclusive_task",
      exclusive_active: true,
    });
    expect((await post(u, "/api/tasks/start", { worker_id: "w", task_id: "x" })).body).toMatchObject({
      new_state: "running",
    });
    expect((await claim("w")).tasks).toEqual([]);

    await finish("x", "w");
    expect(await capacityOf("w")).toMatchObject({ exclusive_active: false, active_task_ids: [] });
    expect(claimedIds(await claim("w"))).toEqual(["s3"]);
  });

  it("one claim batch never puts a shared task beside an exclusive one", async () => {
    await dispatch([task("a-excl", res({}, "exclusive")), task("b-shared"), task("c-shared")]);
    expect(claimedIds(await claim("w", { limit: 4 }))).toEqual(["a-excl"]);
    await finish("a-excl", "w");
    expect(claimedIds(await claim("w", { limit: 4 }))).toEqual(["b-shared", "c-shared"]);
  });

  it("a run the worker has since uploaded stops counting: a long-poll waiting on it returns the exclusive task", async () => {
    await dispatch([task("s1")]);
    expect(claimedIds(await claim("w"))).toEqual(["s1"]);
    // the Loom Runner heartbeats its current runs right before each claim, then long-polls
    await post(u, "/api/workers/heartbeat", { worker_id: "w", current_runs: [{ task_id: "s1", phase: "running" }] });
    await dispatch([task("x", res({}, "exclusive"))]);
    const waiting = claim("w", { limit: 1, wait_seconds: 5 });
    // the same worker finishes s1 while its claim waits: the worker is empty now
    await finish("s1", "w");
    expect(claimedIds(await waiting)).toEqual(["x"]);
  });

  it("a run the Runner reports keeps an exclusive task off the worker even without a Hub lease", async () => {
    await post(u, "/api/workers/heartbeat", {
      worker_id: "w",
      current_runs: [{ task_id: "left-over", phase: "running" }],
    });
    await dispatch([task("x", res({}, "exclusive"))]);
    expect((await claim("w")).tasks).toEqual([]);
    expect((await admissionOn("x", "w")).reason).toBe("exclusive_worker_busy");
  });
});

describe("GPU count and types", () => {
  it("requested gpu_types must be a subset of the worker's; a type it lacks never fits there", async () => {
    const reg = await register("gpu", { resource_capacity: { gpu_count: 2, gpu_types: ["h100", "a100", "a100"] } });
    expect(reg.resource_capacity).toMatchObject({ gpu_count: 2, gpu_types: ["a100", "h100"] });
    await dispatch([
      task("g1-a100", res({ gpu_count: 1, gpu_types: ["a100"] })),
      task("g2-either", res({ gpu_count: 1, gpu_types: ["h100", "a100"] })),
      task("g3-l4", res({ gpu_count: 1, gpu_types: ["l4"] })),
      task("g4-three", res({ gpu_count: 3 })),
      task("g5-a100", res({ gpu_count: 1, gpu_types: ["a100"] })),
    ]);
    expect(claimedIds(await claim("gpu"))).toEqual(["g1-a100", "g2-either"]);

    const l4 = await admission("g3-l4");
    expect(l4.unsatisfiable).toBe(true);
    expect(l4.workers[0]).toMatchObject({ ok: false, reason: "resource_reservation_unavailable" });
    expect(l4.workers[0].reasons).toContain("exceeds_worker_capacity");
    expect(l4.workers[0].shortfalls.gpu_types).toEqual({ available: ["a100", "h100"], requested: ["l4"] });
    expect((await admissionOn("g4-three", "gpu")).shortfalls.gpu_count).toEqual({
      capacity: 2,
      reserved: 2,
      requested: 3,
      short: 3,
    });
    // the same type, just busy: waits instead of being unsatisfiable
    const busy = await admission("g5-a100");
    expect(busy.unsatisfiable).toBe(false);
    expect(busy.workers[0].reasons).toEqual(["resource_reservation_unavailable"]);
    expect(busy.workers[0].shortfalls.gpu_count).toEqual({ capacity: 2, reserved: 2, requested: 1, short: 1 });
  });

  it("gpu_types without a positive gpu_count is rejected at dispatch with 400 naming the field, and nothing is stored", async () => {
    for (const resources of [{ gpu_types: ["a100"] }, { gpu_count: 0, gpu_types: ["a100"] }]) {
      const r = await post(u, "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [task("ok-one"), task("bad-gpu", res(resources))],
      });
      expect(r.status).toBe(400);
      expect(r.body.errors.map((e: Json) => e.field)).toEqual(["tasks[1].execution_profile.resources.gpu_types"]);
      expect(r.body.detail).toContain("tasks[1].execution_profile.resources.gpu_types");
    }
    const viaPayload = await post(u, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [
        {
          task_id: "bad-payload",
          payload: { runner: "noop", execution_profile: { resources: { gpu_types: ["a100"] } } },
        },
      ],
    });
    expect(viaPayload.status).toBe(400);
    expect(JSON.stringify(viaPayload.body.errors)).toContain("gpu_types");
    expect((await get(u, "/api/tasks")).body.total).toBe(0);
  });
});

describe("capacity defaults from the host snapshot", () => {
  const snapshot = (resources: Json) => ({ resource_capacity: undefined, health: { hostname: "h", resources } });

  it("cpu_millis = max(1000, int(cpu_count)*1000), memory = int(mem_available_mb), disk = int(disk_available_mb), gpu 0", async () => {
    const r = await register(
      "host-a",
      snapshot({
        cpu_count: 3,
        mem_total_mb: 16_000,
        mem_available_mb: 6143.9,
        disk_total_mb: 90_000,
        disk_available_mb: 20_480.7,
      }),
    );
    expect(r.resource_capacity).toEqual(vec(3000, 6143, 20_480));
    expect((await capacityOf("host-a")).capacity).toEqual(vec(3000, 6143, 20_480));

    expect(
      (await register("host-tiny", snapshot({ cpu_count: 0.5, mem_available_mb: 100, disk_available_mb: 10 })))
        .resource_capacity,
    ).toEqual(vec(1000, 100, 10));
    expect(
      (await register("host-totals", snapshot({ cpu_count: 2.9, mem_total_mb: 7000.2, disk_total_mb: 300 })))
        .resource_capacity,
    ).toEqual(vec(2000, 7000, 300));
  });

  it("declared capacity floats are truncated to whole units", async () => {
    const r = await register("floats", {
      resource_capacity: { cpu_millis: 1500.9, memory_mb: 1024.5, disk_mb: 99.99, gpu_count: 0 },
    });
    expect(r.resource_capacity).toEqual(vec(1500, 1024, 99));
  });

  it("a partial resource_capacity is completed from the snapshot (the §8 example)", async () => {
    const r = await register("curl-w1", {
      resource_capacity: { memory_mb: 2048 },
      health: { resources: { cpu_count: 4, mem_available_mb: 8000.5, disk_available_mb: 50_000 } },
    });
    expect(r.resource_capacity).toEqual({
      cpu_millis: 4000,
      memory_mb: 2048,
      disk_mb: 50_000,
      gpu_count: 0,
      gpu_types: [],
    });
  });

  it("the defaulted capacity is what admission enforces", async () => {
    await register("host-a", snapshot({ cpu_count: 2, mem_available_mb: 1024.9, disk_available_mb: 500 }));
    await dispatch([
      task("fits", res({ cpu_millis: 2000, memory_mb: 1024, disk_mb: 500 })),
      task("too-much-mem", res({ memory_mb: 1025 })),
    ]);
    expect(claimedIds(await claim("host-a"))).toEqual(["fits"]);
    const a = await admissionOn("too-much-mem", "host-a");
    expect(a.reasons).toContain("exceeds_worker_capacity");
    expect(a.shortfalls.memory_mb).toMatchObject({ capacity: 1024, requested: 1025 });
  });
});

describe("worker-capacity and task-admission replies", () => {
  const ADMISSION_FIELDS = [
    "ok",
    "reason",
    "reasons",
    "placement",
    "requested",
    "capacity",
    "reserved_before",
    "available_before",
    "available_after",
    "shortfalls",
    "active_task_ids",
    "exclusive_active",
    "concurrency",
  ];

  it("worker-capacity lists non-blocked workers with capacity, reserved, available and the active leases", async () => {
    await register("w1", {
      max_concurrency: 3,
      initial_concurrency: 2,
      resource_capacity: { cpu_millis: 2000, memory_mb: 1000, disk_mb: 100 },
    });
    await register("w2");
    await dispatch([task("t1", res({ cpu_millis: 500, memory_mb: 300, disk_mb: 10 }))]);
    expect(claimedIds(await claim("w1"))).toEqual(["t1"]);
    await post(u, "/api/admin/block-worker", { worker_id: "w2" });
    const r = await get(u, "/api/data/worker-capacity");
    expect(r.status).toBe(200);
    expect(r.body.workers.map((w: Json) => w.worker_id)).toEqual(["w1"]);
    expect(r.body.workers[0]).toMatchObject({
      worker_id: "w1",
      status: "ready",
      capacity: vec(2000, 1000, 100),
      reserved: vec(500, 300, 10),
      available: vec(1500, 700, 90),
      active_task_ids: ["t1"],
      exclusive_active: false,
      max_concurrency: 3,
      desired_concurrency: 2,
    });
    await post(u, "/api/admin/unblock-worker", { worker_id: "w2" });
    expect((await get(u, "/api/data/worker-capacity")).body.workers.map((w: Json) => w.worker_id)).toEqual([
      "w1",
      "w2",
    ]);
  });

  it("task-admission gives each worker's source-cache affinity for a task pinned to a commit", async () => {
    const commit = "a".repeat(40);
    const key = `git-sha256:${createHash("sha256")
      .update(
        JSON.stringify({ canonical_url: "https://git.example/lab/repo.git", commit, schema_version: 1, type: "git" }),
      )
      .digest("hex")}`;
    for (const w of ["holds", "other", "off"]) await register(w);
    const beat = (worker_id: string, source_cache: Json) =>
      post(u, "/api/workers/heartbeat", { worker_id, current_runs: [], health: { source_cache } });
    await beat("holds", { enabled: true, keys: [key] });
    await beat("other", { enabled: true, keys: [] });
    await beat("off", { enabled: false });
    await dispatch([
      task("pinned", undefined, {
        payload: { runner: "noop", source: { url: "https://user:secret@git.example/lab/repo.git?x=1", commit } },
      }),
      task("moving", undefined, {
        payload: { runner: "noop", source: { url: "https://git.example/lab/repo.git", ref: "main" } },
      }),
    ]);
    const by = Object.fromEntries(
      (await admission("pinned")).workers.map((w: Json) => [w.worker_id, w.cache_affinity]),
    );
    expect(by).toEqual({
      holds: { cache_key: key, cache_hit: true, worker_cache_enabled: true, reason: "cache_hit" },
      other: { cache_key: key, cache_hit: false, worker_cache_enabled: true, reason: "cache_miss" },
      off: { cache_key: key, cache_hit: false, worker_cache_enabled: false, reason: "worker_cache_disabled" },
    });
    for (const w of (await admission("moving")).workers)
      expect(w.cache_affinity).toMatchObject({
        cache_key: null,
        cache_hit: false,
        reason: "task_has_no_immutable_source",
      });
  });

  it("task-admission gives the admission object per worker, every failing check in reasons, and per-dimension shortfalls", async () => {
    await register("small", {
      max_concurrency: 1,
      initial_concurrency: 1,
      resource_capacity: { cpu_millis: 1000, memory_mb: 2048, disk_mb: 1000 },
    });
    await register("large", { resource_capacity: { cpu_millis: 8000, memory_mb: 8192, disk_mb: 1000 } });
    await register("blocked");
    await post(u, "/api/admin/block-worker", { worker_id: "blocked" });
    await dispatch([task("s-hold", res({ cpu_millis: 500, memory_mb: 1000 }))]);
    expect(claimedIds(await claim("small"))).toEqual(["s-hold"]);
    await dispatch([task("ex", res({ memory_mb: 2000 }, "exclusive"))]);

    const a = await admission("ex");
    expect(a).toMatchObject({
      task_id: "ex",
      execution_profile: { placement: "exclusive", resources: { memory_mb: 2000 } },
      eligible_worker_count: 1,
      unsatisfiable: false,
    });
    const by = Object.fromEntries(a.workers.map((w: Json) => [w.worker_id, w]));
    expect(by.blocked).toMatchObject({ ok: false, reason: "worker_blocked" });
    expect(by.blocked).toHaveProperty("cache_affinity");

    const s = by.small;
    for (const f of ADMISSION_FIELDS) expect(s).toHaveProperty(f);
    expect(s).toHaveProperty("cache_affinity");
    // v1's reason is the first in v1's order; reasons lists every failing check
    expect(s.reason).toBe("exclusive_worker_busy");
    expect(s.reasons).toEqual([
      "exclusive_worker_busy",
      "resource_reservation_unavailable",
      "worker_concurrency_reached",
    ]);
    expect(s.shortfalls).toEqual({ memory_mb: { capacity: 2048, reserved: 1000, requested: 2000, short: 952 } });
    expect(s).toMatchObject({
      placement: "exclusive",
      requested: vec(0, 2000),
      capacity: vec(1000, 2048, 1000),
      reserved_before: vec(500, 1000),
      available_before: vec(500, 1048, 1000),
      available_after: vec(500, 0, 1000),
      active_task_ids: ["s-hold"],
      exclusive_active: false,
      concurrency: {
        reported_active: 0,
        leased_active: 1,
        active_count: 1,
        desired_concurrency: 1,
        max_concurrency: 1,
        effective_limit: 1,
      },
    });
    expect(by.large).toMatchObject({
      ok: true,
      reason: null,
      reasons: [],
      shortfalls: {},
      available_after: vec(8000, 6192, 1000),
    });
  });

  it("a task that fits nowhere even on an empty worker is exceeds_worker_capacity and unsatisfiable", async () => {
    await register("w1", { resource_capacity: { cpu_millis: 2000, memory_mb: 2048, disk_mb: 1000 } });
    await register("w2", { resource_capacity: { cpu_millis: 4000, memory_mb: 4096, disk_mb: 1000 } });
    await dispatch([task("huge", res({ memory_mb: 100_000, cpu_millis: 3000 }))]);
    const a = await admission("huge");
    expect(a).toMatchObject({ eligible_worker_count: 0, unsatisfiable: true });
    const by = Object.fromEntries(a.workers.map((w: Json) => [w.worker_id, w]));
    for (const w of [by.w1, by.w2]) {
      expect(w).toMatchObject({ ok: false, reason: "resource_reservation_unavailable" });
      expect(w.reasons).toEqual(["exceeds_worker_capacity"]);
    }
    expect(by.w1.shortfalls).toEqual({
      cpu_millis: { capacity: 2000, reserved: 0, requested: 3000, short: 1000 },
      memory_mb: { capacity: 2048, reserved: 0, requested: 100_000, short: 97_952 },
    });
    expect(by.w2.shortfalls).toEqual({ memory_mb: { capacity: 4096, reserved: 0, requested: 100_000, short: 95_904 } });
    expect((await claim("w1")).tasks).toEqual([]);
    expect((await claim("w2")).tasks).toEqual([]);
  });

  it("400 task_id_required and 404 task_not_found", async () => {
    expect(await get(u, "/api/data/task-admission")).toMatchObject({
      status: 400,
      body: { error: "task_id_required" },
    });
    expect(await get(u, "/api/data/task-admission?task_id=")).toMatchObject({
      status: 400,
      body: { error: "task_id_required" },
    });
    expect(await get(u, "/api/data/task-admission?task_id=no-such-task")).toMatchObject({
      status: 404,
      body: { error: "task_not_found" },
    });
  });
});

describe("lease expiry releases the reservation", () => {
  it("a lease past lease_until is requeued by the Hub itself with attempt+1, and its reservation is gone", async () => {
    await useHub();
    await register("w", { resource_capacity: { cpu_millis: 2000, memory_mb: 2048, disk_mb: 100 } });
    await dispatch([task("exp", res({ cpu_millis: 1500, memory_mb: 1024 }))]);
    expect(claimedIds(await claim("w", { lease_seconds: 30 }))).toEqual(["exp"]);
    expect((await post(u, "/api/tasks/start", { worker_id: "w", task_id: "exp" })).status).toBe(200);
    expect((await capacityOf("w")).reserved).toEqual(vec(1500, 1024));

    passLeases(h.hub);
    const r = await eventually(async () => {
      const t = await row("exp");
      return t.state === "retry_queued" && t;
    }, "the lease controller to requeue the task");
    expect(r).toMatchObject({ attempt_no: 2, lease_worker_id: null });
    expect(await capacityOf("w")).toMatchObject({ reserved: vec(), active_task_ids: [] });
    // the old attempt is fenced off
    expect(await post(u, "/api/tasks/renew", { worker_id: "w", task_id: "exp", lease_seconds: 60 })).toMatchObject({
      status: 409,
      body: { error: "stale_lease" },
    });
    // and the task can be leased again, as attempt 2
    expect((await claim("w")).tasks[0]).toMatchObject({ task_id: "exp", attempt_no: 2 });
  });

  it("honours retry_policy.max_attempts: once attempts run out the task ends lease_expired", async () => {
    await useHub();
    await register("w");
    await dispatch([
      task("twice", res({ cpu_millis: 100 }), { payload: { runner: "noop", retry_policy: { max_attempts: 2 } } }),
    ]);
    for (const [attempt, next] of [
      [1, "retry_queued"],
      [2, "lease_expired"],
    ] as const) {
      const c = await claim("w");
      expect(c.tasks[0]).toMatchObject({ task_id: "twice", attempt_no: attempt });
      passLeases(h.hub);
      await eventually(async () => (await row("twice")).state === next, `attempt ${attempt} to end in ${next}`);
      expect((await capacityOf("w")).reserved).toEqual(vec());
    }
    expect(await row("twice")).toMatchObject({ state: "lease_expired", attempt_no: 2 });
    expect((await claim("w")).tasks).toEqual([]);
  });

  it("without a retry_policy the Hub's default max attempts applies", async () => {
    await useHub({ defaultMaxAttempts: 1 });
    await register("w");
    await dispatch([task("once")]);
    expect(claimedIds(await claim("w"))).toEqual(["once"]);
    passLeases(h.hub);
    await eventually(async () => (await row("once")).state === "lease_expired", "lease_expired");
    expect((await row("once")).attempt_no).toBe(1);
  });

  it("a lease that ends leaves no wake-up waiting for its lease_until, and its renewal goes with it", async () => {
    await useHub();
    await register("w");
    await dispatch([task("quick"), task("renewed")]);
    expect(claimedIds(await claim("w", { limit: 2, lease_seconds: 600 })).sort()).toEqual(["quick", "renewed"]);
    const leases = h.hub.controllers!.leases;
    await eventually(() => leases.waiting === 2, "a wake-up for each lease");
    const renewal = () => h.hub.store.get(RENEWAL_KIND, "renewed");
    expect((await post(u, "/api/tasks/renew", { worker_id: "w", task_id: "renewed", lease_seconds: 900 })).status).toBe(
      200,
    );
    expect(await renewal()).toBeDefined();
    for (const id of ["quick", "renewed"])
      expect(
        (await post(u, "/api/tasks/complete", { worker_id: "w", task_id: id, result: {}, upload: {} })).status,
      ).toBe(200);
    // Otherwise each wake-up would wait until its lease's old lease_until, ten minutes on.
    await eventually(() => leases.waiting === 0, "no wake-up left");
    await eventually(async () => (await renewal()) === undefined, "the ended lease's renewal deleted");
  });

  it("POST /api/admin/expire-leases does the same thing now, and leaves live leases alone", async () => {
    await useHub();
    // The lease controller would expire the backdated lease itself: only the endpoint may here.
    await h.hub.controllers!.leases.stop();
    await register("w");
    await dispatch([task("old", res({ cpu_millis: 700 }))]);
    expect(claimedIds(await claim("w"))).toEqual(["old"]);
    passLeases(h.hub);
    await dispatch([task("young", res({ cpu_millis: 300 }))]);
    expect(claimedIds(await claim("w"))).toEqual(["young"]);
    const r = await post(u, "/api/admin/expire-leases", {});
    expect(r).toMatchObject({
      status: 200,
      body: { ok: true, count: 1, expired: [{ task_id: "old", old_state: "leased", new_state: "retry_queued" }] },
    });
    expect(await capacityOf("w")).toMatchObject({ reserved: vec(300), active_task_ids: ["young"] });
    expect((await post(u, "/api/admin/expire-leases", {})).body.count).toBe(0);
  });
});

describe("fencing: only the current lease holder changes a task", () => {
  beforeEach(async () => {
    await register("w1");
    await register("w2");
    await dispatch([task("f", res({ cpu_millis: 1000 }))]);
    expect(claimedIds(await claim("w1"))).toEqual(["f"]);
  });

  it("start, renew, upload and complete from another worker get 409 lease_worker_mismatch and change nothing", async () => {
    const before = await row("f");
    for (const verb of ["start", "renew", "complete"]) {
      const r = await post(u, `/api/tasks/${verb}`, {
        worker_id: "w2",
        task_id: "f",
        lease_seconds: 600,
        result: {},
        upload: {},
      });
      expect(r, verb).toMatchObject({ status: 409, body: { error: "lease_worker_mismatch" } });
    }
    expect(await upload("f", "w2", await resultZip())).toMatchObject({
      status: 409,
      body: { error: "lease_worker_mismatch" },
    });
    const failed = await post(u, "/api/tasks/fail", {
      worker_id: "w2",
      task_id: "f",
      error: { type: "Boom", detail: "not mine" },
    });
    expect(failed).toMatchObject({
      status: 200,
      body: { ok: true, ignored_stale_failure: true, task_id: "f", state: "leased" },
    });
    expect(await row("f")).toEqual(before);
    expect(before).toMatchObject({ state: "leased", lease_worker_id: "w1", attempt_no: 1, result_id: null });
    expect((await capacityOf("w1")).active_task_ids).toEqual(["f"]);
  });

  it("an attempt_no that is not the lease's epoch gets 409", async () => {
    expect(await post(u, "/api/tasks/start", { worker_id: "w1", task_id: "f", attempt_no: 2 })).toMatchObject({
      status: 409,
      body: { error: "stale_lease" },
    });
    expect((await post(u, "/api/tasks/renew", { worker_id: "w1", task_id: "f", attempt_no: 7 })).status).toBe(409);
    expect((await post(u, "/api/tasks/complete", { worker_id: "w1", task_id: "f", attempt_no: 0 })).status).toBe(409);
    expect((await row("f")).state).toBe("leased");
    expect(await post(u, "/api/tasks/start", { worker_id: "w1", task_id: "f", attempt_no: 1 })).toMatchObject({
      status: 200,
      body: { new_state: "running" },
    });
  });

  it("an upload without X-Worker-Id is refused with 400, one without X-Task-Id too", async () => {
    expect(await upload("f", undefined, await resultZip())).toMatchObject({
      status: 400,
      body: { error: "X-Worker-Id required" },
    });
    const noTask = await fetch(u + "/api/results/upload", {
      method: "POST",
      headers: { "content-type": "application/zip", "x-worker-id": "w1" },
      body: await resultZip(),
    });
    expect(noTask.status).toBe(400);
    expect(await row("f")).toMatchObject({ state: "leased", result_id: null });
  });

  it("after a requeue the old holder gets 409 stale_lease, and its failure is ignored", async () => {
    expect((await post(u, "/api/tasks/start", { worker_id: "w1", task_id: "f" })).status).toBe(200);
    expect((await post(u, "/api/admin/retry-task", { task_id: "f" })).status).toBe(200);
    for (const verb of ["start", "renew"]) {
      expect(await post(u, `/api/tasks/${verb}`, { worker_id: "w1", task_id: "f" }), verb).toMatchObject({
        status: 409,
        body: { error: "stale_lease" },
      });
    }
    expect(await upload("f", "w1", await resultZip())).toMatchObject({ status: 409, body: { error: "stale_lease" } });
    expect(
      (await post(u, "/api/tasks/fail", { worker_id: "w1", task_id: "f", error: { type: "Late" } })).body,
    ).toMatchObject({ ignored_stale_failure: true, state: "retry_queued" });
    expect(await row("f")).toMatchObject({ state: "retry_queued", attempt_no: 2, result_id: null });

    // once w2 holds attempt 2, w1 is simply not the holder
    expect((await claim("w2")).tasks[0]).toMatchObject({ task_id: "f", attempt_no: 2, assigned_worker_id: "w2" });
    expect(await post(u, "/api/tasks/start", { worker_id: "w1", task_id: "f" })).toMatchObject({
      status: 409,
      body: { error: "lease_worker_mismatch" },
    });
    expect((await row("f")).lease_worker_id).toBe("w2");
  });

  it("a complete from the holder of a requeued attempt is 409 stale_lease (RUNNER_PROTOCOL §7.2)", async () => {
    expect((await post(u, "/api/admin/retry-task", { task_id: "f" })).status).toBe(200);
    expect(
      await post(u, "/api/tasks/complete", { worker_id: "w1", task_id: "f", result: {}, upload: {} }),
    ).toMatchObject({ status: 409, body: { error: "stale_lease" } });
    expect((await row("f")).state).toBe("retry_queued");
  });

  it("the same worker's old attempt is fenced by attempt_no once it holds a newer one", async () => {
    expect((await post(u, "/api/admin/retry-task", { task_id: "f" })).status).toBe(200);
    expect((await claim("w1")).tasks[0]).toMatchObject({ task_id: "f", attempt_no: 2 });
    expect(await post(u, "/api/tasks/renew", { worker_id: "w1", task_id: "f", attempt_no: 1 })).toMatchObject({
      status: 409,
      body: { error: "stale_lease" },
    });
    expect(
      (await post(u, "/api/tasks/fail", { worker_id: "w1", task_id: "f", attempt_no: 1, error: { type: "Late" } }))
        .body,
    ).toMatchObject({ ignored_stale_failure: true, state: "leased" });
    expect((await post(u, "/api/tasks/renew", { worker_id: "w1", task_id: "f", attempt_no: 2 })).status).toBe(200);
  });
});

describe("cancel ends the lease", () => {
  beforeEach(async () => {
    await register("w", {
      max_concurrency: 1,
      initial_concurrency: 1,
      resource_capacity: { cpu_millis: 1000, memory_mb: 1000, disk_mb: 1000 },
    });
    await dispatch([
      task("a-cancel-me", res({ cpu_millis: 1000, memory_mb: 512 })),
      task("b-next", res({ cpu_millis: 1000 })),
    ]);
    expect(claimedIds(await claim("w"))).toEqual(["a-cancel-me"]);
    expect((await post(u, "/api/tasks/start", { worker_id: "w", task_id: "a-cancel-me" })).status).toBe(200);
  });

  it("releases the reservation at once, so the next task fits", async () => {
    expect((await capacityOf("w")).reserved).toEqual(vec(1000, 512));
    expect(await post(u, "/api/admin/cancel-task", { task_id: "a-cancel-me" })).toMatchObject({
      status: 200,
      body: { ok: true, task_id: "a-cancel-me", old_state: "running", new_state: "cancelled" },
    });
    expect(await capacityOf("w")).toMatchObject({ reserved: vec(), active_task_ids: [] });
    expect(claimedIds(await claim("w"))).toEqual(["b-next"]);
  });

  it("later start, renew and upload from the old holder get 409 task_cancelled and the task stays cancelled", async () => {
    await post(u, "/api/admin/cancel-task", { task_id: "a-cancel-me" });
    for (const verb of ["start", "renew"]) {
      expect(await post(u, `/api/tasks/${verb}`, { worker_id: "w", task_id: "a-cancel-me" }), verb).toMatchObject({
        status: 409,
        body: { error: "task_cancelled" },
      });
    }
    expect(await upload("a-cancel-me", "w", await resultZip({ exit_code: 0 }))).toMatchObject({
      status: 409,
      body: { error: "task_cancelled" },
    });
    expect(
      (await post(u, "/api/tasks/fail", { worker_id: "w", task_id: "a-cancel-me", error: { type: "X" } })).body,
    ).toMatchObject({ ignored_stale_failure: true });
    expect(
      (await post(u, "/api/tasks/complete", { worker_id: "w", task_id: "a-cancel-me", result: {}, upload: {} })).body,
    ).toMatchObject({ state: "cancelled" });
    expect(await row("a-cancel-me")).toMatchObject({ state: "cancelled", result_id: null });
    expect((await capacityOf("w")).reserved).toEqual(vec());
  });

  it("cancelling an unknown task is 404, not 500", async () => {
    expect(await post(u, "/api/admin/cancel-task", { task_id: "never-dispatched" })).toMatchObject({
      status: 404,
      body: { error: "task_not_found" },
    });
  });
});

describe("retry-task", () => {
  it("requeues with attempt+1, releases the reservation and fences the old holder", async () => {
    await register("w");
    await dispatch([task("rt", res({ memory_mb: 300 }))]);
    expect(claimedIds(await claim("w"))).toEqual(["rt"]);
    await post(u, "/api/tasks/start", { worker_id: "w", task_id: "rt" });
    const r = await post(u, "/api/admin/retry-task", { task_id: "rt" });
    expect(r).toMatchObject({
      status: 200,
      body: { ok: true, task_id: "rt", old_state: "running", new_state: "retry_queued", attempt_no: 2 },
    });
    expect(await row("rt")).toMatchObject({ state: "retry_queued", attempt_no: 2, lease_worker_id: null });
    expect((await capacityOf("w")).reserved).toEqual(vec());
    expect(await post(u, "/api/tasks/renew", { worker_id: "w", task_id: "rt" })).toMatchObject({
      status: 409,
      body: { error: "stale_lease" },
    });
    expect((await claim("w")).tasks[0]).toMatchObject({ task_id: "rt", attempt_no: 2 });
  });

  it("a finished task can be retried too, and 404 for an unknown one", async () => {
    await register("w");
    await dispatch([task("done")]);
    await claim("w");
    await finish("done", "w");
    expect((await row("done")).state).toBe("clean");
    expect((await post(u, "/api/admin/retry-task", { task_id: "done" })).body).toMatchObject({
      old_state: "clean",
      new_state: "retry_queued",
      attempt_no: 2,
    });
    expect(await row("done")).toMatchObject({ state: "retry_queued", result_id: null });
    expect((await post(u, "/api/admin/retry-task", { task_id: "nope" })).status).toBe(404);
  });
});

describe("the v1 pull cycle (RUNNER_PROTOCOL §8), bearer token set", () => {
  const TOKEN = "peer-test-token-0123456789";
  const A = { authorization: `Bearer ${TOKEN}` };
  const T = "demo__case-a__base__run-001";

  it("register, dispatch, claim, long-poll, start, renew, upload, complete, download", async () => {
    await useHub({ env: { LOOM_HUB_TOKEN: TOKEN } });
    expect(await get(u, "/api/meta")).toMatchObject({ status: 401, body: { error: "unauthorized" } });

    const reg = await post(
      u,
      "/api/workers/register",
      {
        worker_id: "curl-w1",
        runner_api_version: 1,
        capabilities: ["linux"],
        max_concurrency: 2,
        initial_concurrency: 1,
        concurrency_policy: "fixed",
        resource_capacity: { memory_mb: 2048 },
        health: { resources: { cpu_count: 4, mem_available_mb: 8000.5, disk_available_mb: 50_000 } },
      },
      A,
    );
    expect(reg).toMatchObject({
      status: 200,
      body: {
        ok: true,
        worker_id: "curl-w1",
        initial_concurrency: 1,
        desired_concurrency: 1,
        max_concurrency: 2,
        concurrency_policy: "fixed",
      },
    });
    expect(reg.body.resource_capacity).toEqual({
      cpu_millis: 4000,
      memory_mb: 2048,
      disk_mb: 50_000,
      gpu_count: 0,
      gpu_types: [],
    });

    const body = {
      schema_version: 1,
      tasks: [
        {
          task_id: T,
          case_id: "case-a",
          setting_id: "base",
          run_id: "001",
          required_capability: "linux",
          payload: { runner: "noop", execution_profile: { resources: { cpu_millis: 500, memory_mb: 256 } } },
        },
      ],
    };
    const d1 = await post(u, "/api/tasks/dispatch", body, A);
    expect(d1).toMatchObject({
      status: 201,
      body: {
        created: [{ task_id: T, case_id: "case-a", run_id: "001", setting_id: "base", state: "queued" }],
        existing: [],
      },
    });
    expect(await post(u, "/api/tasks/dispatch", body, A)).toMatchObject({
      status: 200,
      body: { created: [], existing: [{ task_id: T }] },
    });

    const c = await post(u, "/api/tasks/claim", { worker_id: "curl-w1", limit: 4, lease_seconds: 60 }, A);
    expect(c.status).toBe(200);
    expect(c.body.tasks).toHaveLength(1);
    const t = c.body.tasks[0];
    expect(t).toMatchObject({
      task_id: T,
      task_kind: "execution",
      case_id: "case-a",
      run_id: "001",
      setting_id: "base",
      case_version: "v1",
      scenario_id: "base",
      package_id: `pkg-${T}`,
      attempt_no: 1,
      assigned_worker_id: "curl-w1",
      payload: { runner: "noop" },
      components: {},
      controller_concurrency: {
        desired_concurrency: 1,
        max_concurrency: 2,
        initial_concurrency: 1,
        concurrency_policy: "fixed",
        active_count_at_claim: 0,
        claim_batch_size: 1,
      },
    });
    expect(typeof t.lease_until).toBe("string");
    expect(t.controller_concurrency.claim_batch_id).toEqual(expect.any(String));
    expect(t.controller_concurrency.resource_admission).toMatchObject({ ok: true, requested: vec(500, 256) });
    expect(t.controller_concurrency.cache_affinity).toHaveProperty("reason");
    expect(c.body).toMatchObject({
      desired_concurrency: 1,
      max_concurrency: 2,
      active_count: 0,
      reserved_resources: vec(500, 256),
    });

    // full: a long-poll comes back empty once its wait is over
    expect(
      (await post(u, "/api/tasks/claim", { worker_id: "curl-w1", limit: 4, wait_seconds: 1 }, A)).body,
    ).toMatchObject({ tasks: [], active_count: 1 });

    expect(await post(u, "/api/tasks/start", { worker_id: "curl-w1", task_id: T }, A)).toMatchObject({
      status: 200,
      body: { ok: true, task_id: T, old_state: "leased", new_state: "running" },
    });
    const before = Date.now();
    const renew = await post(u, "/api/tasks/renew", { worker_id: "curl-w1", task_id: T, lease_seconds: 10 }, A);
    const after = Date.now();
    expect(renew.body).toMatchObject({ ok: true, task_id: T });
    // lease_seconds below 30 is raised to 30
    expect(Date.parse(renew.body.lease_until)).toBeGreaterThanOrEqual(before + 30_000);
    expect(Date.parse(renew.body.lease_until)).toBeLessThanOrEqual(after + 30_000);

    const zip = await resultZip({ task_id: T, exit_code: 0, verdict: "clean", stdout: "hello\n" });
    const up = await upload(T, "curl-w1", zip, u, A);
    expect(up).toMatchObject({ status: 201, body: { ok: true, attempt_no: 1, verdict: "clean", auto_retry: null } });
    expect(up.body.result_id).toMatch(/^result-[0-9a-f-]{36}$/);
    expect(
      await post(u, "/api/tasks/complete", { worker_id: "curl-w1", task_id: T, result: {}, upload: up.body }, A),
    ).toMatchObject({ status: 200, body: { ok: true, task_id: T, state: "clean" } });
    expect((await row(T, u, A)).state).toBe("clean");

    const dl = await fetch(`${u}/api/results/${up.body.result_id}`, { headers: A });
    expect(dl.status).toBe(200);
    expect(dl.headers.get("content-type")).toBe("application/zip");
    expect(dl.headers.get("content-disposition")).toBe(`attachment; filename="${T}__${up.body.result_id}.zip"`);
    const bytes = Buffer.from(await dl.arrayBuffer());
    const sha = (b: Buffer) => createHash("sha256").update(b).digest("hex");
    expect(sha(bytes)).toBe(sha(zip));
    expect((await readZip(bytes)).get("stdout.txt")!.toString()).toBe("hello\n");
    expect((await fetch(`${u}/api/results/result-00000000-0000-0000-0000-000000000000`, { headers: A })).status).toBe(
      404,
    );

    // a long-poll with nothing to claim is woken by a dispatch and returns the task
    let settled = false;
    const waiting = post(
      u,
      "/api/tasks/claim",
      { worker_id: "curl-w1", limit: 4, lease_seconds: 60, wait_seconds: 60 },
      A,
    ).finally(() => (settled = true));
    await eventually(() => h.hub.scheduler.ctx.waiting === 1, "the claim to wait for work");
    expect(settled).toBe(false);
    const T2 = "demo__case-a__base__run-002";
    await post(
      u,
      "/api/tasks/dispatch",
      {
        schema_version: 1,
        tasks: [
          {
            task_id: T2,
            case_id: "case-a",
            setting_id: "base",
            run_id: "002",
            payload: { runner: "shell", command: "exit 1" },
          },
        ],
      },
      A,
    );
    const woke = await waiting;
    expect(woke.status).toBe(200);
    expect(woke.body.tasks.map((x: Json) => x.task_id)).toEqual([T2]);

    // a shell result with exit_code 1 and no verdict scores run_error
    const bad = await upload(T2, "curl-w1", await resultZip({ task_id: T2, exit_code: 1, stderr: "boom\n" }), u, A);
    expect(bad).toMatchObject({ status: 201, body: { verdict: "run_error", auto_retry: null } });
    expect(
      (await post(u, "/api/tasks/complete", { worker_id: "curl-w1", task_id: T2, result: {}, upload: bad.body }, A))
        .body.state,
    ).toBe("run_error");
    expect((await row(T2, u, A)).state).toBe("run_error");
  });

  it("after the upload the row still names the worker that produced the result (v1 keeps lease_worker_id)", async () => {
    await register("w");
    await dispatch([task("kept")]);
    await claim("w");
    await finish("kept", "w");
    expect(await row("kept")).toMatchObject({ state: "clean", lease_worker_id: "w" });
    expect((await get(u, "/api/tasks?lease_worker_id=w&state=clean")).body.tasks.map((t: Json) => t.task_id)).toEqual([
      "kept",
    ]);
    // it is a record, not a lease: nothing stays reserved
    expect((await capacityOf("w")).active_task_ids).toEqual([]);
  });

  it("a corrupt ZIP from the holder scores run_error instead of failing the request", async () => {
    await register("w");
    await dispatch([task("corrupt")]);
    await claim("w");
    const r = await upload("corrupt", "w", Buffer.from("this is not a zip"));
    expect(r).toMatchObject({ status: 201, body: { verdict: "run_error" } });
    expect((await row("corrupt")).state).toBe("run_error");
  });
});

describe("dispatch", () => {
  it("an id conflict is 409 task_id_conflict naming the ids, and nothing of the batch is stored", async () => {
    await dispatch([task("t-existing", undefined, { payload: { runner: "noop", x: 1 } })]);
    const r = await post(u, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [task("t-new"), task("t-existing", undefined, { payload: { runner: "noop", x: 2 } })],
    });
    expect(r).toMatchObject({ status: 409, body: { error: "task_id_conflict", ids: ["t-existing"] } });
    expect((await get(u, "/api/tasks?task_id=t-new")).body.total).toBe(0);
    expect((await row("t-existing")).payload).toMatchObject({ x: 1 });

    const twice = await post(u, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [task("dup"), task("other"), task("dup", undefined, { priority: 3 })],
    });
    expect(twice).toMatchObject({ status: 409, body: { error: "task_id_conflict", ids: ["dup"] } });
    expect((await get(u, "/api/tasks")).body.total).toBe(1);
  });

  it("a bad execution_profile is 400 naming tasks[i].execution_profile..., and nothing is stored", async () => {
    const cases: [Json, string][] = [
      [{ placement: "sometimes" }, "tasks[0].execution_profile.placement"],
      [{ resources: { cpu_millis: -1 } }, "tasks[0].execution_profile.resources.cpu_millis"],
      [{ resources: { memory_mb: "lots" } }, "tasks[0].execution_profile.resources.memory_mb"],
      [{ resources: { cpu_millis: true } }, "tasks[0].execution_profile.resources.cpu_millis"],
      [{ resources: { bogus: 1 } }, "tasks[0].execution_profile.resources.bogus"],
    ];
    for (const [profile, field] of cases) {
      const r = await post(u, "/api/tasks/dispatch", { schema_version: 1, tasks: [task("p", profile), task("fine")] });
      expect(r.status, JSON.stringify(profile)).toBe(400);
      expect(
        r.body.errors.map((e: Json) => e.field),
        JSON.stringify(profile),
      ).toContain(field);
    }
    expect((await get(u, "/api/tasks")).body.total).toBe(0);
  });

  it("a profile that is not an object, or resources that are not, is 400 instead of silently meaning shared", async () => {
    const cases: [Json, string][] = [
      [task("p", "exclusive" as unknown as Json), "tasks[0].execution_profile"],
      [task("p", { placement: "exclusive", resources: "4 cpus" }), "tasks[0].execution_profile.resources"],
      [
        { task_id: "p", payload: { runner: "noop", execution_profile: "exclusive" } },
        "tasks[0].payload.execution_profile",
      ],
    ];
    for (const [t, field] of cases) {
      const r = await post(u, "/api/tasks/dispatch", { schema_version: 1, tasks: [t] });
      expect.soft(r.status, JSON.stringify(t)).toBe(400);
      expect.soft(JSON.stringify(r.body.errors ?? []), JSON.stringify(t)).toContain(`"field":"${field}"`);
      if (r.status === 201) await h.hub.store.delete("Task", "p");
    }
    expect((await get(u, "/api/tasks")).body.total).toBe(0);
  });

  it("bad input is never a 500", async () => {
    const raw = async (path: string, text: string) => {
      const r = await fetch(u + path, { method: "POST", headers: { "content-type": "application/json" }, body: text });
      return { status: r.status, body: (await r.json()) as Json };
    };
    expect(await raw("/api/tasks/dispatch", "{bad")).toMatchObject({ status: 400, body: { error: "invalid_json" } });
    for (const p of [
      "/api/workers/register",
      "/api/workers/heartbeat",
      "/api/tasks/claim",
      "/api/tasks/start",
      "/api/tasks/complete",
      "/api/admin/cancel-task",
      "/api/admin/register-worker-hosts",
    ]) {
      expect((await raw(p, '{"worker_id": ')).status, p).toBe(400);
    }
    await register("w");
    await dispatch([task("exists")]);
    const bad: [string, unknown][] = [
      ["/api/tasks/dispatch", []],
      ["/api/tasks/dispatch", "just a string"],
      ["/api/tasks/dispatch", { tasks: [] }],
      ["/api/tasks/dispatch", { schema_version: 2, tasks: [] }],
      ["/api/tasks/dispatch", { schema_version: 1, tasks: "x" }],
      ["/api/tasks/dispatch", { schema_version: 1, tasks: [42] }],
      ["/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id: "x", payload: "str" }] }],
      ["/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id: "x", priority: "high" }] }],
      ["/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id: "x", surprise: true }] }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, resource_capacity: { cpu_millis: true } }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, resource_capacity: { gpu_types: ["a100"] } }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, resource_capacity: { ram: 1 } }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, resource_capacity: "big" }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, max_concurrency: "2" }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, max_concurrency: 2, initial_concurrency: 3 }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, concurrency_policy: "magic" }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 2 }],
      ["/api/workers/register", { worker_id: "r" }],
      ["/api/workers/register", { worker_id: "r", runner_api_version: 1, capabilities: "linux" }],
      ["/api/workers/heartbeat", {}],
      ["/api/tasks/claim", {}],
      // (limit 0 and wait_seconds 61 are clamped, as v1 does: not bad input)
      ["/api/tasks/claim", { worker_id: "w", limit: "x" }],
      ["/api/tasks/claim", { worker_id: "w", lease_seconds: "x" }],
      ["/api/tasks/claim", { worker_id: "w", wait_seconds: "soon" }],
      ["/api/tasks/claim", { worker_id: "nobody" }],
      ["/api/tasks/start", { worker_id: "w" }],
      ["/api/tasks/start", { worker_id: "w", task_id: "missing" }],
      ["/api/tasks/renew", { worker_id: "w", task_id: "exists", lease_seconds: "x" }],
      ["/api/tasks/complete", { task_id: "exists" }],
      ["/api/tasks/fail", { worker_id: "w", task_id: "missing" }],
      ["/api/admin/cancel-task", {}],
      ["/api/admin/retry-task", {}],
      ["/api/admin/override-state", {}],
      ["/api/admin/override-state", { target_id: "exists", state: ["clean"], reason: "x" }],
      ["/api/admin/set-worker-concurrency", { worker_id: "w", desired_concurrency: "x" }],
      ["/api/admin/block-worker", {}],
      ["/api/admin/block-worker", { worker_id: "nobody" }],
      ["/api/admin/register-worker-hosts", {}],
      ["/api/admin/register-worker-hosts", { inventory: {} }],
      ["/api/admin/register-worker-hosts", { inventory: { inventory_version: 2, workers: [] } }],
      ["/api/admin/register-worker-hosts", { hosts: [{ worker_id: "x", max_concurrency: "lots" }] }],
      ["/api/admin/push-task", {}],
      ["/api/admin/push-task", { task_id: "missing" }],
      ["/api/tasks/dispatch-repo-run", { command: "true" }],
    ];
    for (const [path, body] of bad) {
      const r = await post(u, path, body);
      expect(
        r.status >= 400 && r.status < 500,
        `${path} ${JSON.stringify(body)} -> ${r.status} ${JSON.stringify(r.body)}`,
      ).toBe(true);
      expect(typeof r.body.error, `${path} ${JSON.stringify(body)}`).toBe("string");
    }
    // Out-of-range numbers are clamped as v1 does; what is not a number is refused.
    for (const q of ["limit=abc", "offset=x"]) expect((await get(u, `/api/tasks?${q}`)).status, q).toBe(400);
    // nothing that was stored changed
    expect((await get(u, "/api/tasks")).body.tasks.map((t: Json) => [t.task_id, t.state])).toEqual([
      ["exists", "queued"],
    ]);
    expect((await capacityOf("w")).capacity).toEqual(vec(4000, 8192, 50_000));
  });
});

describe("GET /api/tasks: filters, paging, JSON as JSON", () => {
  it("filters by CSV values, pages with next_offset, orders by priority then creation, and returns objects", async () => {
    await register("w");
    await dispatch([
      task("a", undefined, { case_id: "c1", priority: 1 }),
      task("b", undefined, { case_id: "c2" }),
      task("c", undefined, { case_id: "c3", priority: 9 }),
      task("d", undefined, { case_id: "c1" }),
      task("e", undefined, { case_id: "c2", payload: { runner: "shell", command: "true", nested: { k: [1, 2] } } }),
    ]);
    expect(claimedIds(await claim("w", { limit: 1 }))).toEqual(["c"]);

    const all = (await get(u, "/api/tasks")).body;
    expect(all.tasks.map((t: Json) => t.task_id)).toEqual(["c", "a", "b", "d", "e"]);
    expect(all).toMatchObject({ total: 5, offset: 0, next_offset: null });

    const p1 = (await get(u, "/api/tasks?limit=2")).body;
    expect(p1).toMatchObject({ total: 5, offset: 0, next_offset: 2 });
    expect(p1.tasks.map((t: Json) => t.task_id)).toEqual(["c", "a"]);
    const p3 = (await get(u, "/api/tasks?limit=2&offset=4")).body;
    expect(p3).toMatchObject({ total: 5, offset: 4, next_offset: null });
    expect(p3.tasks.map((t: Json) => t.task_id)).toEqual(["e"]);

    expect((await get(u, "/api/tasks?state=leased")).body.tasks.map((t: Json) => t.task_id)).toEqual(["c"]);
    expect((await get(u, "/api/tasks?lease_worker_id=w")).body.tasks.map((t: Json) => t.task_id)).toEqual(["c"]);
    expect((await get(u, "/api/tasks?case_id=c1,c2&state=queued")).body.tasks.map((t: Json) => t.task_id)).toEqual([
      "a",
      "b",
      "d",
      "e",
    ]);
    expect((await get(u, "/api/tasks?task_id=a,e")).body.total).toBe(2);
    expect((await get(u, "/api/tasks?state=clean")).body).toMatchObject({ tasks: [], total: 0, next_offset: null });

    const e = await row("e");
    expect(e.payload).toMatchObject({ runner: "shell", command: "true", nested: { k: [1, 2] } });
    expect(typeof e.payload).toBe("object");
    expect(e.excluded_worker_ids).toEqual([]);
    expect(e.execution_profile).toEqual({ placement: "shared", resources: {} });
  });
});

describe("authentication", () => {
  const TOKEN = "t0ken-for-the-admission-tests";

  it("with LOOM_HUB_TOKEN set every path needs it; Bearer (any case) and X-Loom-Token both work", async () => {
    await useHub({ env: { LOOM_HUB_TOKEN: TOKEN } });
    const gets = [
      "/api/healthz",
      "/api/meta",
      "/api/tasks",
      "/api/data/worker-capacity",
      "/api/data/task-admission?task_id=x",
      "/api/data/task-counts",
      "/api/results/result-x",
      "/api/no-such-path",
    ];
    const posts = [
      "/api/workers/register",
      "/api/workers/heartbeat",
      "/api/tasks/claim",
      "/api/tasks/start",
      "/api/tasks/dispatch",
      "/api/admin/cancel-task",
      "/api/admin/expire-leases",
      "/api/results/upload",
    ];
    for (const p of gets) {
      expect(await get(u, p), p).toMatchObject({ status: 401, body: { error: "unauthorized" } });
      expect((await get(u, p, { authorization: "Bearer not-the-token" })).status, p).toBe(401);
    }
    for (const p of posts)
      expect(await post(u, p, {}), p).toMatchObject({ status: 401, body: { error: "unauthorized" } });
    expect((await get(u, "/api/healthz", { authorization: TOKEN })).status).toBe(401);

    const accepted: Record<string, string>[] = [
      { authorization: `Bearer ${TOKEN}` },
      { authorization: `bearer ${TOKEN}` },
      { authorization: `BEARER ${TOKEN}` },
      { "x-loom-token": TOKEN },
    ];
    for (const headers of accepted) {
      const r = await get(u, "/api/healthz", headers);
      expect(r, JSON.stringify(headers)).toMatchObject({ status: 200, body: { ok: true, hub_api_version: 1 } });
    }
    expect((await get(u, "/api/meta", { "x-loom-token": TOKEN })).body).toMatchObject({
      service: "hub",
      auth_required: true,
    });
    expect((await post(u, "/api/workers/register", registerBody("w"), { "x-loom-token": TOKEN })).status).toBe(200);
  });

  it("without a token the Hub refuses a non-loopback bind, saying how to fix it", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-bind-"));
    try {
      await expect(Hub.start({ dataDir: dir, host: "0.0.0.0", port: 0, logLevel: "silent", env: {} })).rejects.toThrow(
        /refusing to listen on 0\.0\.0\.0 without a token.*LOOM_HUB_TOKEN/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  describe("per-worker tokens", () => {
    const W1_TOKEN = "w1-only-token-0123456789";
    let dir: string;
    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "loom-tokens-"));
      await writeFile(join(dir, "tokens.yaml"), `workers:\n  w1: "${W1_TOKEN}"\n`);
      await useHub({ env: { LOOM_HUB_TOKEN: TOKEN }, workerTokensFile: join(dir, "tokens.yaml") });
    });
    afterEach(() => rm(dir, { recursive: true, force: true }));

    it("a worker token acts as its own worker, and gets 403 acting as another or on admin paths", async () => {
      const W1 = { authorization: `Bearer ${W1_TOKEN}` };
      const ADMIN = { authorization: `Bearer ${TOKEN}` };
      expect((await post(u, "/api/workers/register", registerBody("w1"), W1)).status).toBe(200);
      expect((await post(u, "/api/workers/register", registerBody("w2"), ADMIN)).status).toBe(200);
      expect(
        (await post(u, "/api/tasks/dispatch", { schema_version: 1, tasks: [task("tok-1"), task("tok-2")] }, ADMIN))
          .status,
      ).toBe(201);

      expect((await post(u, "/api/workers/heartbeat", { worker_id: "w1", current_runs: [] }, W1)).status).toBe(200);
      const c = await post(u, "/api/tasks/claim", { worker_id: "w1", limit: 1 }, W1);
      expect(c.status).toBe(200);
      const mine = c.body.tasks[0].task_id;
      expect((await post(u, "/api/tasks/start", { worker_id: "w1", task_id: mine }, W1)).status).toBe(200);
      expect((await upload(mine, "w1", await resultZip(), u, W1)).status).toBe(201);

      expect(await post(u, "/api/workers/register", registerBody("w2"), W1)).toMatchObject({
        status: 403,
        body: { error: "forbidden" },
      });
      expect((await post(u, "/api/workers/heartbeat", { worker_id: "w2" }, W1)).status).toBe(403);
      expect((await post(u, "/api/tasks/claim", { worker_id: "w2", limit: 1 }, W1)).status).toBe(403);
      expect((await upload("tok-2", "w2", await resultZip(), u, W1)).status).toBe(403);
      expect((await upload("tok-2", undefined, await resultZip(), u, W1)).status).toBe(403);
      for (const [p, b] of [
        ["/api/admin/cancel-task", { task_id: "tok-2" }],
        ["/api/tasks/dispatch", { schema_version: 1 }],
        ["/api/admin/set-worker-concurrency", { worker_id: "w1", desired_concurrency: 4 }],
      ] as const) {
        expect(await post(u, p, b, W1), p).toMatchObject({ status: 403, body: { error: "forbidden" } });
      }
      expect((await get(u, "/api/data/worker-capacity", W1)).status).toBe(403);
      expect((await get(u, "/api/tasks", W1)).status).toBe(403);
      // nothing the refused calls named changed
      const rows = (await get(u, "/api/tasks", ADMIN)).body.tasks;
      expect(rows.find((t: Json) => t.task_id !== mine)).toMatchObject({ state: "queued" });
      // the Hub token can act as anyone
      expect((await post(u, "/api/tasks/claim", { worker_id: "w2", limit: 1 }, ADMIN)).body.tasks).toHaveLength(1);
    });

    it("a worker token shorter than 16 characters, or worker tokens without a Hub token, refuse to start", async () => {
      await writeFile(join(dir, "short.yaml"), "workers:\n  w1: short\n");
      await expect(
        Hub.start({
          dataDir: join(dir, "a"),
          port: 0,
          logLevel: "silent",
          env: { LOOM_HUB_TOKEN: TOKEN },
          workerTokensFile: join(dir, "short.yaml"),
        }),
      ).rejects.toThrow(/workers\.w1.*16/);
      await expect(
        Hub.start({
          dataDir: join(dir, "b"),
          port: 0,
          logLevel: "silent",
          env: {},
          workerTokensFile: join(dir, "tokens.yaml"),
        }),
      ).rejects.toThrow(/LOOM_HUB_TOKEN/);
    });
  });
});

describe("automatic retry from retry_policy", () => {
  const rateLimited = { exit_code: 1, verdict: "run_error", stderr: "upstream said: 429 Too Many Requests\n" };

  it("an upload whose issues meet the categories requeues with attempt+1 and says auto_retry.queued", async () => {
    await register("w1");
    await dispatch([
      task("ar", res({ cpu_millis: 200 }), {
        payload: {
          runner: "shell",
          command: "x",
          retry_policy: { max_attempts: 2, retry_categories: ["rate_limited"] },
        },
      }),
    ]);
    expect(claimedIds(await claim("w1"))).toEqual(["ar"]);
    const up = await upload("ar", "w1", await resultZip({ task_id: "ar", ...rateLimited }));
    expect(up).toMatchObject({
      status: 201,
      body: { ok: true, attempt_no: 1, verdict: "run_error", auto_retry: { queued: true, attempt_no: 2 } },
    });
    expect(await row("ar")).toMatchObject({
      state: "retry_queued",
      attempt_no: 2,
      result_id: null,
      excluded_worker_ids: [],
    });
    expect((await capacityOf("w1")).reserved).toEqual(vec());
    // the first attempt's ZIP is kept
    expect((await fetch(`${u}/api/results/${up.body.result_id}`)).status).toBe(200);
    // under the fixed policy a rate_limited result lowers desired concurrency by one
    expect(
      (await post(u, "/api/workers/heartbeat", { worker_id: "w1", current_runs: [] })).body.desired_concurrency,
    ).toBe(3);

    // attempt 2 fails the same way: max_attempts is reached, so it ends run_error
    expect((await claim("w1")).tasks[0]).toMatchObject({ task_id: "ar", attempt_no: 2 });
    const second = await upload("ar", "w1", await resultZip({ task_id: "ar", ...rateLimited }));
    expect(second.body).toMatchObject({ attempt_no: 2, verdict: "run_error", auto_retry: null });
    expect(await row("ar")).toMatchObject({ state: "run_error", attempt_no: 2, result_id: second.body.result_id });
  });

  it("different_worker excludes the holder: it cannot claim the retry, another worker can", async () => {
    await register("w1");
    await register("w2");
    await dispatch([
      task("dw", undefined, {
        payload: {
          runner: "noop",
          retry_policy: { max_attempts: 3, retry_categories: ["rate_limited"], different_worker: true },
        },
      }),
    ]);
    expect(claimedIds(await claim("w1"))).toEqual(["dw"]);
    expect(
      (await upload("dw", "w1", await resultZip({ task_id: "dw", ...rateLimited }))).body.auto_retry,
    ).toMatchObject({ queued: true });
    expect(await row("dw")).toMatchObject({ state: "retry_queued", attempt_no: 2, excluded_worker_ids: ["w1"] });
    expect((await claim("w1")).tasks).toEqual([]);
    const on1 = await admissionOn("dw", "w1");
    expect(on1).toMatchObject({ ok: false, reason: "worker_not_eligible" });
    expect(on1.reasons).toContain("worker_excluded");
    expect((await claim("w2")).tasks[0]).toMatchObject({ task_id: "dw", attempt_no: 2, assigned_worker_id: "w2" });
    // the first holder's late complete cannot touch attempt 2
    expect(
      (await post(u, "/api/tasks/complete", { worker_id: "w1", task_id: "dw", result: {}, upload: {} })).status,
    ).toBe(409);
  });

  it("different_worker with no other capable worker leaves the task run_error", async () => {
    await register("alone");
    await dispatch([
      task("nowhere", undefined, {
        payload: {
          runner: "noop",
          retry_policy: { max_attempts: 3, retry_categories: ["rate_limited"], different_worker: true },
        },
      }),
    ]);
    await claim("alone");
    expect(
      (await upload("nowhere", "alone", await resultZip({ task_id: "nowhere", ...rateLimited }))).body.auto_retry,
    ).toBeNull();
    expect((await row("nowhere")).state).toBe("run_error");
  });

  it("issues outside the categories, or a clean verdict, do not retry", async () => {
    await register("w");
    const policy = {
      payload: { runner: "noop", retry_policy: { max_attempts: 3, retry_categories: ["rate_limited"] } },
    };
    await dispatch([task("other-issue", undefined, policy), task("clean-429", undefined, policy)]);
    await claim("w");
    expect(
      (await upload("other-issue", "w", await resultZip({ exit_code: 1, stderr: "Permission denied\n" }))).body
        .auto_retry,
    ).toBeNull();
    expect(
      (await upload("clean-429", "w", await resultZip({ exit_code: 0, stdout: "handled a 429 fine\n" }))).body,
    ).toMatchObject({ verdict: "clean", auto_retry: null });
    expect((await row("other-issue")).state).toBe("run_error");
    expect((await row("clean-429")).state).toBe("clean");
  });

  it("a fail whose error names a retry category is retried the same way", async () => {
    await register("w");
    await dispatch([
      task("fail-429", undefined, {
        payload: { runner: "noop", retry_policy: { max_attempts: 2, retry_categories: ["rate_limited"] } },
      }),
    ]);
    await claim("w");
    const r = await post(u, "/api/tasks/fail", {
      worker_id: "w",
      task_id: "fail-429",
      controller_concurrency: {},
      error: { type: "HTTPError", detail: "429 Too Many Requests" },
    });
    expect(r.body).toMatchObject({ ok: true, new_state: "retry_queued", auto_retry: { queued: true, attempt_no: 2 } });
    expect(await row("fail-429")).toMatchObject({ state: "retry_queued", attempt_no: 2 });
  });
});
