// The resource API (/apis/loom.dev/v1alpha1) over real HTTP on loopback: CRUD of every CRD
// kind, merge patch, optimistic concurrency, validation, selectors, events, and watch
// (resume, bookmarks, 410, selector transitions, slow watchers).
import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify from "fastify";
import { afterEach, describe, expect, it } from "vitest";
import { API_PREFIX, resourceRoutes } from "../../src/api/resources.ts";
import { Hub, type HubOptions } from "../../src/hub.ts";
import { API_VERSION, loadCrds } from "../../src/resources/crds.ts";

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function startHub(opts: (dir: string) => Partial<HubOptions> = () => ({})): Promise<Hub> {
  const dir = await mkdtemp(join(tmpdir(), "loom-resource-api-"));
  const hub = await Hub.start({ dataDir: dir, port: 0, logLevel: "silent", ...opts(dir) });
  cleanups.push(async () => {
    await hub.close();
    await rm(dir, { recursive: true, force: true });
  });
  return hub;
}

const api = (hub: Hub) => hub.url + API_PREFIX;

type Reply = { status: number; body: any };
async function call(
  url: string,
  method: string,
  body?: unknown,
  contentType = "application/json",
  headers: Record<string, string> = {},
): Promise<Reply> {
  const res = await fetch(url, {
    method,
    headers: { ...(body === undefined ? {} : { "content-type": contentType }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
const mergePatch = (url: string, patch: unknown) => call(url, "PATCH", patch, "application/merge-patch+json");

async function eventually<T>(fn: () => T | Promise<T>, what: string, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

// ---- a watch client on node:http (one connection per watch, closed by destroying it) ----

type WatchEv = { type: string; object: any };

class Watch {
  readonly events: WatchEv[] = [];
  /** The server ended the stream cleanly. */
  ended = false;
  /** The connection is gone, cleanly or not. */
  closed = false;
  private waiters: { check: () => boolean; resolve: () => void }[] = [];
  private constructor(private readonly req: http.ClientRequest) {}

  static open(url: string): Promise<Watch> {
    return new Promise((resolve, reject) => {
      const req = http.get(url, { agent: false }, (res) => {
        const w = new Watch(req);
        cleanups.push(() => w.close());
        if (res.statusCode !== 200) return reject(new Error(`watch answered ${res.statusCode}`));
        let buf = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => {
          buf += chunk;
          for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
            w.events.push(JSON.parse(buf.slice(0, i)));
            buf = buf.slice(i + 1);
          }
          w.wake();
        });
        res.on("end", () => ((w.ended = true), w.wake()));
        res.on("close", () => ((w.closed = true), w.wake()));
        res.on("error", () => undefined);
        resolve(w);
      });
      req.on("error", reject);
    });
  }

  /** Resolves as soon as `check` holds, checked on every chunk received (no polling delay). */
  until(check: (events: WatchEv[]) => boolean, what: string, ms = 15_000): Promise<void> {
    if (check(this.events)) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`timed out waiting for ${what}; got ${JSON.stringify(changes(this.events))}`)),
        ms,
      );
      this.waiters.push({ check: () => check(this.events), resolve: () => (clearTimeout(timer), resolve()) });
    });
  }

  close(): void {
    this.req.destroy();
  }

  private wake(): void {
    this.waiters = this.waiters.filter((w) => (w.check() ? (w.resolve(), false) : true));
  }
}

const rvOf = (o: any) => Number(o.metadata.resourceVersion);
/** Object changes as "TYPE name rv", bookmarks left out. */
const changes = (evs: WatchEv[]) =>
  evs
    .filter((e) => e.type !== "BOOKMARK")
    .map((e) => `${e.type} ${e.object.metadata.name} ${e.object.metadata.resourceVersion}`);
const bookmarks = (evs: WatchEv[]) => evs.filter((e) => e.type === "BOOKMARK");

// ---- Runner helpers (the v1 API) ----

const registration = (worker_id: string) => ({
  worker_id,
  runner_api_version: 1,
  capabilities: ["linux", "*"],
  max_concurrency: 2,
  initial_concurrency: 2,
  health: { resources: { cpu_count: 2, mem_available_mb: 4096, disk_available_mb: 10000 } },
});
async function registerWorker(hub: Hub, id: string): Promise<void> {
  const r = await call(`${hub.url}/api/workers/register`, "POST", registration(id));
  expect(r.status).toBe(200);
}
async function claim(hub: Hub, worker_id: string): Promise<string[]> {
  const r = await call(`${hub.url}/api/tasks/claim`, "POST", { worker_id, limit: 1 });
  expect(r.status).toBe(200);
  return r.body.tasks.map((t: { task_id: string }) => t.task_id);
}

/** A valid spec of each kind, and a change to it. */
const SAMPLES: Record<string, { spec: Record<string, unknown>; change: Record<string, unknown> }> = {
  Worker: { spec: { max_concurrency: 2, capabilities: ["linux"] }, change: { max_concurrency: 3 } },
  Task: { spec: { campaign_id: "c1", required_capability: "nobody-has-this" }, change: { priority: 5 } },
  Campaign: { spec: { campaign_id: "camp-1", cases: [] }, change: { defaults: { priority: 2 } } },
  Queue: { spec: { quota: { gpu_count: 4 }, weight: 1 }, change: { weight: 2, reclaim: "wait" } },
};

describe("CRUD of every CRD kind", () => {
  for (const crd of loadCrds().values()) {
    it(`${crd.plural}: create, get, list, update, merge patch, status, delete`, async () => {
      const hub = await startHub();
      const base = `${api(hub)}/${crd.plural}`;
      const sample = SAMPLES[crd.kind];
      expect(sample, `a sample ${crd.kind} for this test`).toBeDefined();

      // apiVersion and kind default from the path; a client's status is not kept.
      const created = await call(base, "POST", {
        metadata: { name: "x1", labels: { a: "1" } },
        spec: sample.spec,
        status: { injected: true },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        apiVersion: API_VERSION,
        kind: crd.kind,
        metadata: { name: "x1", generation: 1, labels: { a: "1" } },
        spec: sample.spec,
      });
      expect(created.body.metadata.uid).toBeTruthy();
      expect(created.body.status?.injected).toBeUndefined();

      const got = await call(`${base}/x1`, "GET");
      expect(got.status).toBe(200);
      expect(got.body.metadata.uid).toBe(created.body.metadata.uid);

      const list = await call(base, "GET");
      expect(list.status).toBe(200);
      expect(list.body).toMatchObject({ apiVersion: API_VERSION, kind: crd.listKind });
      expect(Number(list.body.metadata.resourceVersion)).toBeGreaterThanOrEqual(rvOf(created.body));
      expect(list.body.items.map((o: any) => o.metadata.name)).toEqual(["x1"]);

      const updated = await call(`${base}/x1`, "PUT", {
        metadata: { name: "x1", labels: { a: "2" } },
        spec: { ...sample.spec, ...sample.change },
      });
      expect(updated.status).toBe(200);
      expect(updated.body.metadata).toMatchObject({
        labels: { a: "2" },
        generation: 2,
        uid: created.body.metadata.uid,
      });
      expect(updated.body.spec).toEqual({ ...sample.spec, ...sample.change });

      const patched = await mergePatch(`${base}/x1`, { metadata: { labels: { a: null, b: "3" } } });
      expect(patched.status).toBe(200);
      expect(patched.body.metadata.labels).toEqual({ b: "3" });
      expect(patched.body.spec).toEqual({ ...sample.spec, ...sample.change });

      const viaStatus = await call(`${base}/x1/status`, "GET");
      expect(viaStatus.status).toBe(200);
      expect(viaStatus.body.metadata.name).toBe("x1");

      const deleted = await call(`${base}/x1`, "DELETE");
      expect(deleted.status).toBe(200);
      expect(deleted.body.metadata).toMatchObject({ name: "x1", uid: created.body.metadata.uid });
      const gone = await call(`${base}/x1`, "GET");
      expect(gone.status).toBe(404);
      expect(gone.body).toMatchObject({
        kind: "Status",
        apiVersion: "v1",
        status: "Failure",
        reason: "NotFound",
        code: 404,
        details: { name: "x1", kind: crd.kind },
      });
      expect((await call(base, "GET")).body.items).toEqual([]);
    });
  }

  it("a Task created by POST starts queued at attempt 1, whatever status it carries, and a Runner can claim it", async () => {
    const hub = await startHub();
    const created = await call(`${api(hub)}/tasks`, "POST", {
      apiVersion: API_VERSION,
      kind: "Task",
      metadata: { name: "t1" },
      spec: { campaign_id: "c1" },
      status: { state: "clean", attempt: 7 },
    });
    expect(created.status).toBe(201);
    expect(created.body.status).toMatchObject({ state: "queued", attempt: 1 });

    await registerWorker(hub, "w1");
    expect(await claim(hub, "w1")).toEqual(["t1"]);
    const t = await call(`${api(hub)}/tasks/t1`, "GET");
    expect(t.body.status).toMatchObject({ state: "leased", lease: { worker: "w1" } });
  });

  it("the main resource changes spec and metadata only; /status changes status only", async () => {
    const hub = await startHub();
    await call(`${api(hub)}/tasks`, "POST", { metadata: { name: "t1" }, spec: SAMPLES.Task.spec });
    const main = await mergePatch(`${api(hub)}/tasks/t1`, { spec: { priority: 3 }, status: { state: "clean" } });
    expect(main.status).toBe(200);
    expect(main.body.spec.priority).toBe(3);
    expect(main.body.status.state).toBe("queued");

    const st = await mergePatch(`${api(hub)}/tasks/t1/status`, {
      spec: { priority: 9 },
      status: { issues: ["checked by hand"] },
    });
    expect(st.status).toBe(200);
    expect(st.body.status.issues).toEqual(["checked by hand"]);
    expect(st.body.spec.priority).toBe(3);

    const cur = (await call(`${api(hub)}/tasks/t1`, "GET")).body;
    const put = await call(`${api(hub)}/tasks/t1/status`, "PUT", {
      ...cur,
      spec: { priority: 1 },
      status: { ...cur.status, issues: [] },
    });
    expect(put.status).toBe(200);
    expect(put.body.status.issues).toEqual([]);
    expect(put.body.spec.priority).toBe(3);
  });

  it("a merge patch cordons a worker and another uncordons it (application/json is a merge patch too)", async () => {
    const hub = await startHub();
    await registerWorker(hub, "w1");
    const before = (await call(`${api(hub)}/workers/w1`, "GET")).body;
    await call(`${api(hub)}/tasks`, "POST", { metadata: { name: "t1" }, spec: {} });

    const cordoned = await mergePatch(`${api(hub)}/workers/w1`, { spec: { unschedulable: true } });
    expect(cordoned.status).toBe(200);
    expect(cordoned.body.spec).toEqual({ ...before.spec, unschedulable: true });
    const refused = await call(`${hub.url}/api/tasks/claim`, "POST", { worker_id: "w1", limit: 1 });
    expect(refused).toMatchObject({
      status: 403,
      body: { error: "worker_not_available", detail: "worker is blocked" },
    });
    expect((await call(`${api(hub)}/tasks/t1`, "GET")).body.status.state).toBe("queued");

    const open = await call(`${api(hub)}/workers/w1`, "PATCH", { spec: { unschedulable: null } }, "application/json");
    expect(open.status).toBe(200);
    expect(open.body.spec).toEqual(before.spec);
    expect(await claim(hub, "w1")).toEqual(["t1"]);

    // JSON Patch is taken as well (test/integration/patch.test.ts); a strategic merge patch is not.
    const jsonPatch = await call(
      `${api(hub)}/workers/w1`,
      "PATCH",
      [{ op: "add", path: "/spec/unschedulable", value: true }],
      "application/json-patch+json",
    );
    expect(jsonPatch.status).toBe(200);
    expect(jsonPatch.body.spec.unschedulable).toBe(true);
    const strategic = await call(
      `${api(hub)}/workers/w1`,
      "PATCH",
      { spec: { unschedulable: false } },
      "application/strategic-merge-patch+json",
    );
    expect(strategic.status).toBe(415);
    expect(strategic.body).toMatchObject({ kind: "Status", reason: "UnsupportedMediaType" });
  });

  it("a stale resourceVersion is a 409 Conflict Status, for PUT, PATCH and DELETE", async () => {
    const hub = await startHub();
    const c = (await call(`${api(hub)}/campaigns`, "POST", { metadata: { name: "c1" }, spec: SAMPLES.Campaign.spec }))
      .body;
    const stale = c.metadata.resourceVersion;
    const fresh = await mergePatch(`${api(hub)}/campaigns/c1`, { metadata: { labels: { round: "1" } } });
    expect(fresh.status).toBe(200);

    const put = await call(`${api(hub)}/campaigns/c1`, "PUT", {
      metadata: { name: "c1", resourceVersion: stale, labels: { round: "2" } },
      spec: c.spec,
    });
    expect(put.status).toBe(409);
    expect(put.body).toMatchObject({
      kind: "Status",
      status: "Failure",
      reason: "Conflict",
      code: 409,
      details: { name: "c1", kind: "Campaign" },
    });
    const patch = await mergePatch(`${api(hub)}/campaigns/c1`, {
      metadata: { resourceVersion: stale, labels: { round: "3" } },
    });
    expect(patch.status).toBe(409);
    expect(patch.body.reason).toBe("Conflict");
    const del = await call(`${api(hub)}/campaigns/c1`, "DELETE", { preconditions: { resourceVersion: stale } });
    expect(del.status).toBe(409);

    const now = (await call(`${api(hub)}/campaigns/c1`, "GET")).body;
    expect(now.metadata.labels).toEqual({ round: "1" });
    // The current resourceVersion passes the same preconditions.
    const ok = await mergePatch(`${api(hub)}/campaigns/c1`, {
      metadata: { resourceVersion: now.metadata.resourceVersion, labels: { round: "4" } },
    });
    expect(ok.status).toBe(200);
  });

  it("an invalid spec is a 422 Invalid Status naming each field, and nothing stored changes", async () => {
    const hub = await startHub();
    const w = (await call(`${api(hub)}/workers`, "POST", { metadata: { name: "w1" }, spec: SAMPLES.Worker.spec })).body;

    const patch = await mergePatch(`${api(hub)}/workers/w1`, {
      spec: { resource_capacity: { cpu_millis: -1 }, connection_mode: "carrier-pigeon" },
    });
    expect(patch.status).toBe(422);
    expect(patch.body).toMatchObject({
      kind: "Status",
      reason: "Invalid",
      code: 422,
      details: { name: "w1", kind: "Worker" },
    });
    const fields = patch.body.details.causes.map((c: { field: string }) => c.field);
    expect(fields).toEqual(expect.arrayContaining(["spec.resource_capacity.cpu_millis", "spec.connection_mode"]));

    const put = await call(`${api(hub)}/workers/w1`, "PUT", {
      metadata: { name: "w1" },
      spec: { max_concurrency: 0, typo_field: 1 },
    });
    expect(put.status).toBe(422);
    expect(put.body.details.causes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ field: "spec.max_concurrency" }),
        expect.objectContaining({ field: "spec.typo_field", reason: "FieldUnknown" }),
      ]),
    );
    const stored = await hub.store.get("Worker", "w1");
    expect(stored?.spec).toEqual(w.spec);
    expect(stored?.metadata.generation).toBe(1);

    const post = await call(`${api(hub)}/tasks`, "POST", {
      metadata: { name: "bad" },
      spec: { execution_profile: { placement: "everywhere" } },
    });
    expect(post.status).toBe(422);
    expect(post.body.details.causes.map((c: { field: string }) => c.field)).toContain(
      "spec.execution_profile.placement",
    );
    expect((await call(`${api(hub)}/tasks/bad`, "GET")).status).toBe(404);
  });

  it("the body must agree with the path: kind, apiVersion and name mismatches are 400", async () => {
    const hub = await startHub();
    const wrongKind = await call(`${api(hub)}/workers`, "POST", { kind: "Task", metadata: { name: "x" }, spec: {} });
    expect(wrongKind.status).toBe(400);
    expect(wrongKind.body).toMatchObject({
      kind: "Status",
      reason: "BadRequest",
      details: { causes: [expect.objectContaining({ field: "kind" })] },
    });
    const wrongVersion = await call(`${api(hub)}/workers`, "POST", {
      apiVersion: "loom.dev/v9",
      metadata: { name: "x" },
      spec: {},
    });
    expect(wrongVersion.status).toBe(400);
    await call(`${api(hub)}/workers`, "POST", { metadata: { name: "a" }, spec: {} });
    const wrongName = await call(`${api(hub)}/workers/a`, "PUT", { metadata: { name: "b" }, spec: {} });
    expect(wrongName.status).toBe(400);
    expect(wrongName.body.details.causes[0].field).toBe("metadata.name");
    const notObject = await call(`${api(hub)}/workers`, "POST", [1, 2]);
    expect(notObject.status).toBe(400);
    expect((await call(`${api(hub)}/workers`, "GET")).body.items.map((o: any) => o.metadata.name)).toEqual(["a"]);
  });

  it("every failure on this surface is a Status; the v1 surfaces keep their own error shape", async () => {
    const hub = await startHub();
    const coll = await call(`${api(hub)}/workers`, "DELETE");
    expect(coll.status).toBe(405);
    expect(coll.body).toMatchObject({ kind: "Status", reason: "MethodNotAllowed", code: 405 });
    const unknown = await call(`${api(hub)}/gadgets`, "GET");
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ kind: "Status", reason: "NotFound" });
    const badJson = await fetch(`${api(hub)}/workers`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{nope",
    });
    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toMatchObject({ kind: "Status", reason: "BadRequest" });
    const v1 = await call(`${hub.url}/api/data/task-admission`, "GET");
    expect(v1.status).toBe(400);
    expect(v1.body).toMatchObject({ error: "task_id_required" });
    expect(v1.body.kind).toBeUndefined();
  });

  it("with a Hub token, refusals are Unauthorized Status objects here and v1 errors on /api", async () => {
    const token = "resource-api-token-0123456789";
    const hub = await startHub(() => ({ env: { LOOM_HUB_TOKEN: token } }));
    const refused = await call(`${api(hub)}/workers`, "GET");
    expect(refused.status).toBe(401);
    expect(refused.body).toMatchObject({ kind: "Status", reason: "Unauthorized", code: 401 });
    const allowed = await call(`${api(hub)}/workers`, "GET", undefined, undefined, {
      authorization: `Bearer ${token}`,
    });
    expect(allowed.status).toBe(200);
    const v1 = await call(`${hub.url}/api/tasks`, "GET");
    expect(v1).toMatchObject({ status: 401, body: { error: "unauthorized" } });
  });
});

describe("selectors", () => {
  it("label selectors filter lists as kubectl's -l does", async () => {
    const hub = await startHub();
    for (const [name, labels] of [
      ["wa", { tier: "gpu", pool: "a" }],
      ["wb", { tier: "cpu" }],
      ["wc", undefined],
    ] as const)
      await call(`${api(hub)}/workers`, "POST", { metadata: { name, ...(labels ? { labels } : {}) }, spec: {} });
    const names = async (sel: string) =>
      (await call(`${api(hub)}/workers?labelSelector=${encodeURIComponent(sel)}`, "GET")).body.items.map(
        (o: any) => o.metadata.name,
      );
    expect(await names("tier=gpu")).toEqual(["wa"]);
    expect(await names("tier!=gpu")).toEqual(["wb", "wc"]);
    expect(await names("!tier")).toEqual(["wc"]);
    expect(await names("tier in (gpu,cpu),pool")).toEqual(["wa"]);
    const bad = await call(`${api(hub)}/workers?labelSelector=${encodeURIComponent("tier in (")}`, "GET");
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ kind: "Status", reason: "BadRequest" });
  });

  it("field selectors: status.state, status.lease.worker, spec.campaign_id and metadata.name, with =, == and !=", async () => {
    const hub = await startHub();
    for (const [name, campaign] of [
      ["t1", "c1"],
      ["t2", "c2"],
      ["t3", "c1"],
    ])
      await call(`${api(hub)}/tasks`, "POST", { metadata: { name }, spec: { campaign_id: campaign } });
    await registerWorker(hub, "w1");
    expect(await claim(hub, "w1")).toEqual(["t1"]);
    const names = async (sel: string) => {
      const r = await call(`${api(hub)}/tasks?fieldSelector=${encodeURIComponent(sel)}`, "GET");
      expect(r.status).toBe(200);
      return r.body.items.map((o: any) => o.metadata.name);
    };
    expect(await names("status.state=queued")).toEqual(["t2", "t3"]);
    expect(await names("status.state!=queued")).toEqual(["t1"]);
    expect(await names("status.lease.worker=w1")).toEqual(["t1"]);
    expect(await names("spec.campaign_id==c1,status.state=queued")).toEqual(["t3"]);
    expect(await names("metadata.name=t2")).toEqual(["t2"]);
    // limit and continue are accepted (and ignored).
    const page = await call(`${api(hub)}/tasks?limit=1&continue=abc`, "GET");
    expect(page.status).toBe(200);
    expect(page.body.items).toHaveLength(3);

    const bad = await call(`${api(hub)}/tasks?fieldSelector=spec.priority%3D1`, "GET");
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ kind: "Status", reason: "BadRequest" });
    expect(bad.body.message).toContain("spec.priority");
    const badWatch = await call(`${api(hub)}/tasks?watch=1&fieldSelector=nope%3D1`, "GET");
    expect(badWatch.status).toBe(400);
    expect(badWatch.body.message).toContain("nope");
  });

  it("events are listed and watched by involvedObject, reason and type", async () => {
    const hub = await startHub();
    const t1 = (await call(`${api(hub)}/tasks`, "POST", { metadata: { name: "t1" }, spec: {} })).body;
    await call(`${api(hub)}/tasks`, "POST", {
      metadata: { name: "t2" },
      spec: { required_capability: "nobody-has-this" },
    });
    const watch = await Watch.open(
      `${api(hub)}/events?watch=1&fieldSelector=${encodeURIComponent("involvedObject.name=t1,reason=LeaseGranted")}`,
    );
    await registerWorker(hub, "w1");
    expect(await claim(hub, "w1")).toEqual(["t1"]);

    const list = async (sel: string) => {
      const r = await call(`${api(hub)}/events?fieldSelector=${encodeURIComponent(sel)}`, "GET");
      expect(r.status).toBe(200);
      expect(r.body.kind).toBe("EventList");
      return r.body.items as any[];
    };
    const granted = await eventually(
      async () =>
        (await list("involvedObject.kind=Task,involvedObject.name=t1")).find((e) => e.reason === "LeaseGranted"),
      "a LeaseGranted event for t1",
    );
    expect(granted).toMatchObject({
      kind: "Event",
      apiVersion: "v1",
      type: "Normal",
      involvedObject: { kind: "Task", name: "t1", uid: t1.metadata.uid },
    });
    for (const e of await list("involvedObject.name=t1")) expect(e.involvedObject.name).toBe("t1");
    expect((await list(`involvedObject.uid=${t1.metadata.uid},type=Normal`)).map((e) => e.metadata.name)).toContain(
      granted.metadata.name,
    );
    expect(await list("involvedObject.name=t2,reason=LeaseGranted")).toEqual([]);
    expect((await call(`${api(hub)}/events/${granted.metadata.name}`, "GET")).body.reason).toBe("LeaseGranted");

    await watch.until(
      (evs) => evs.some((e) => e.type === "ADDED" && e.object.reason === "LeaseGranted"),
      "the LeaseGranted event on the watch",
    );
    expect(watch.events.filter((e) => e.type !== "BOOKMARK").every((e) => e.object.involvedObject.name === "t1")).toBe(
      true,
    );

    const bad = await call(`${api(hub)}/events?fieldSelector=${encodeURIComponent("involvedObject.color=red")}`, "GET");
    expect(bad.status).toBe(400);
    expect(bad.body.message).toContain("involvedObject.color");
    expect((await call(`${api(hub)}/events`, "POST", {})).status).toBe(405);
  });
});

describe("watch", () => {
  it("sends every current object as ADDED, then a BOOKMARK, then changes as they happen", async () => {
    const hub = await startHub();
    for (const name of ["c2", "c1"])
      await call(`${api(hub)}/campaigns`, "POST", { metadata: { name }, spec: SAMPLES.Campaign.spec });
    // Let the campaign controller write its status first, so nothing changes while the watch opens.
    const listed = await eventually(async () => {
      const l = (await call(`${api(hub)}/campaigns`, "GET")).body;
      return l.items.every((c: any) => c.status) && l;
    }, "campaign status");
    const w = await Watch.open(`${api(hub)}/campaigns?watch=true`);
    await w.until((evs) => bookmarks(evs).length >= 1, "the first BOOKMARK");
    const upToBookmark = w.events.slice(0, w.events.findIndex((e) => e.type === "BOOKMARK") + 1);
    expect(upToBookmark.map((e) => `${e.type} ${e.object.metadata.name ?? ""}`)).toEqual([
      "ADDED c1",
      "ADDED c2",
      "BOOKMARK ",
    ]);
    expect(upToBookmark[0].object).toEqual(listed.items[0]);
    expect(upToBookmark[2].object).toEqual({
      kind: "Campaign",
      apiVersion: API_VERSION,
      metadata: { resourceVersion: expect.any(String) },
    });
    expect(rvOf(upToBookmark[2].object)).toBeGreaterThanOrEqual(Number(listed.metadata.resourceVersion));

    const c3 = (await call(`${api(hub)}/campaigns`, "POST", { metadata: { name: "c3" }, spec: SAMPLES.Campaign.spec }))
      .body;
    await mergePatch(`${api(hub)}/campaigns/c1`, { metadata: { labels: { x: "1" } } });
    await call(`${api(hub)}/campaigns/c2`, "DELETE");
    await w.until((evs) => evs.some((e) => e.type === "DELETED" && e.object.metadata.name === "c2"), "c2 DELETED");
    expect(changes(w.events)).toContain(`ADDED c3 ${c3.metadata.resourceVersion}`);
    expect(
      w.events.some(
        (e) => e.type === "MODIFIED" && e.object.metadata.name === "c1" && e.object.metadata.labels?.x === "1",
      ),
    ).toBe(true);
  });

  it("a client that reconnects with its last resourceVersion sees every change exactly once, in order", async () => {
    const hub = await startHub();
    const from = (await call(`${api(hub)}/campaigns`, "GET")).body.metadata.resourceVersion;
    const full = await Watch.open(`${api(hub)}/campaigns?watch=1&resourceVersion=${from}`);
    const first = await Watch.open(`${api(hub)}/campaigns?watch=1&resourceVersion=${from}`);
    let firstClosed!: () => void;
    const closed = new Promise<void>((r) => (firstClosed = r));

    const names = Array.from({ length: 10 }, (_, i) => `c${i}`);
    const writer = (async () => {
      for (const name of names)
        expect(
          (await call(`${api(hub)}/campaigns`, "POST", { metadata: { name }, spec: SAMPLES.Campaign.spec })).status,
        ).toBe(201);
      for (const name of names)
        expect(
          (await mergePatch(`${api(hub)}/campaigns/${name}`, { metadata: { labels: { round: "1" } } })).status,
        ).toBe(200);
      await closed; // the rest happens while the client is away
      for (const name of names)
        expect(
          (await mergePatch(`${api(hub)}/campaigns/${name}`, { metadata: { labels: { round: "2" } } })).status,
        ).toBe(200);
      for (const name of names.slice(0, 5))
        expect((await call(`${api(hub)}/campaigns/${name}`, "DELETE")).status).toBe(200);
      expect(
        (await call(`${api(hub)}/campaigns`, "POST", { metadata: { name: "last" }, spec: SAMPLES.Campaign.spec }))
          .status,
      ).toBe(201);
    })();

    await first.until((evs) => changes(evs).length >= 8, "8 changes on the first connection");
    first.close();
    firstClosed();
    const seen = changes(first.events);
    const resumeFrom = first.events.at(-1)!.object.metadata.resourceVersion;
    await writer;

    const resumed = await Watch.open(`${api(hub)}/campaigns?watch=1&resourceVersion=${resumeFrom}`);
    const upToLast = (evs: WatchEv[]) => {
      const all = changes(evs);
      const i = all.findIndex((c) => c.startsWith("ADDED last "));
      return i < 0 ? undefined : all.slice(0, i + 1);
    };
    await full.until((evs) => upToLast(evs) !== undefined, "the last campaign on the uninterrupted watch");
    await resumed.until((evs) => upToLast(evs) !== undefined, "the last campaign on the resumed watch");

    const expected = upToLast(full.events)!;
    expect([...seen, ...upToLast(resumed.events)!]).toEqual(expected);
    expect(seen.length).toBeLessThan(expected.length);
    const revisions = expected.map((c) => Number(c.split(" ")[2]));
    expect(revisions.every((r, i) => i === 0 || r > revisions[i - 1])).toBe(true);
    expect(expected.filter((c) => c.startsWith("DELETED "))).toHaveLength(5);
  });

  it("sends BOOKMARKs periodically, carrying the latest revision even when the watched kind is quiet", async () => {
    const hub = await startHub();
    // The plugin's bookmark interval is an option; serve it on its own listener with a short one.
    const f = Fastify();
    f.decorate("hub", hub);
    await f.register(resourceRoutes, { bookmarkMs: 50 });
    const url = await f.listen({ host: "127.0.0.1", port: 0 });
    cleanups.push(() => f.close());

    const w = await Watch.open(`${url}${API_PREFIX}/campaigns?watch=1`);
    await w.until((evs) => bookmarks(evs).length >= 3, "three BOOKMARKs");
    const worker = (await call(`${api(hub)}/workers`, "POST", { metadata: { name: "w1" }, spec: {} })).body;
    await w.until(
      (evs) => bookmarks(evs).some((b) => rvOf(b.object) >= rvOf(worker)),
      "a BOOKMARK at or past the worker's revision",
    );
    expect(changes(w.events)).toEqual([]);
    const rvs = bookmarks(w.events).map((b) => rvOf(b.object));
    expect(rvs.every((r, i) => i === 0 || r >= rvs[i - 1])).toBe(true);
  });

  it("answers 410 Expired for a revision the event log no longer holds; a fresh watch still works", async () => {
    const hub = await startHub(() => ({ backend: { kind: "sqlite", sqlite: { eventLogLimit: 5 } } }));
    for (let i = 0; i < 20; i++)
      await call(`${api(hub)}/campaigns`, "POST", { metadata: { name: `c${i}` }, spec: SAMPLES.Campaign.spec });
    const expired = await call(`${api(hub)}/campaigns?watch=1&resourceVersion=1`, "GET");
    expect(expired.status).toBe(410);
    expect(expired.body).toMatchObject({
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      reason: "Expired",
      code: 410,
    });

    const w = await Watch.open(`${api(hub)}/campaigns?watch=1`);
    await w.until((evs) => evs.filter((e) => e.type === "ADDED").length >= 20, "20 ADDED");
    expect(new Set(w.events.filter((e) => e.type === "ADDED").map((e) => e.object.metadata.name)).size).toBe(20);
  });

  it("with a selector, an object that stops matching is DELETED and one that starts matching is ADDED", async () => {
    const hub = await startHub();
    const queued = await Watch.open(
      `${api(hub)}/tasks?watch=1&fieldSelector=${encodeURIComponent("status.state=queued")}`,
    );
    const poolA = await Watch.open(`${api(hub)}/workers?watch=1&labelSelector=${encodeURIComponent("pool=a")}`);

    await call(`${api(hub)}/tasks`, "POST", { metadata: { name: "t1" }, spec: {} });
    await queued.until(
      (evs) => evs.some((e) => e.type === "ADDED" && e.object.metadata.name === "t1"),
      "t1 ADDED while queued",
    );
    await registerWorker(hub, "w1");
    expect(await claim(hub, "w1")).toEqual(["t1"]);
    await queued.until(
      (evs) => evs.some((e) => e.type === "DELETED" && e.object.metadata.name === "t1"),
      "t1 DELETED once leased",
    );
    const deleted = queued.events.find((e) => e.type === "DELETED")!;
    expect(deleted.object.status.state).toBe("leased");

    await call(`${api(hub)}/workers`, "POST", { metadata: { name: "wx", labels: { pool: "b" } }, spec: {} });
    await mergePatch(`${api(hub)}/workers/wx`, { metadata: { labels: { pool: "a" } } });
    await poolA.until(
      (evs) => evs.some((e) => e.type === "ADDED" && e.object.metadata.name === "wx"),
      "wx ADDED when it joins pool a",
    );
    await mergePatch(`${api(hub)}/workers/wx`, { metadata: { labels: { pool: "c" } } });
    await poolA.until(
      (evs) => evs.some((e) => e.type === "DELETED" && e.object.metadata.name === "wx"),
      "wx DELETED when it leaves pool a",
    );
    // w1 (no pool label) never appears; wx appears only while in pool a.
    for (const e of poolA.events.filter((x) => x.type !== "BOOKMARK")) {
      expect(e.object.metadata.name).toBe("wx");
      if (e.type !== "DELETED") expect(e.object.metadata.labels.pool).toBe("a");
    }
  });

  it("resumed with a selector, tells a client that may hold an object what it needs, and nothing twice", async () => {
    const hub = await startHub();
    for (const [name, pool] of [
      ["w1", "a"],
      ["w2", "b"],
    ])
      await call(`${api(hub)}/workers`, "POST", { metadata: { name, labels: { pool } }, spec: {} });
    const from = (await call(`${api(hub)}/workers`, "GET")).body.metadata.resourceVersion;
    const w = await Watch.open(`${api(hub)}/workers?watch=1&resourceVersion=${from}&labelSelector=pool%3Da`);
    const relabel = (name: string, labels: Record<string, string>) =>
      mergePatch(`${api(hub)}/workers/${name}`, { metadata: { labels } });
    await relabel("w1", { pool: "a", x: "1" }); // may be held, matches: MODIFIED
    await relabel("w2", { pool: "b", x: "1" }); // may be held, does not match: DELETED
    await relabel("w2", { pool: "b", x: "2" }); // known not held now: nothing
    await relabel("w2", { pool: "a" }); // starts matching: ADDED
    await call(`${api(hub)}/workers`, "POST", { metadata: { name: "w3", labels: { pool: "b" } }, spec: {} });
    await call(`${api(hub)}/workers/w1`, "DELETE");
    await w.until((evs) => evs.some((e) => e.type === "DELETED" && e.object.metadata.name === "w1"), "w1 DELETED");
    // Each name's events, repeats in a row collapsed (the worker controller may write a status too).
    const of = (name: string) =>
      w.events
        .filter((e) => e.type !== "BOOKMARK" && e.object.metadata.name === name)
        .map((e) => e.type)
        .filter((t, i, all) => i === 0 || t !== all[i - 1]);
    expect(of("w1")).toEqual(["MODIFIED", "DELETED"]);
    expect(of("w2")).toEqual(["DELETED", "ADDED", ...of("w2").slice(2)]);
    expect(
      of("w2")
        .slice(2)
        .every((t) => t === "MODIFIED"),
    ).toBe(true);
    expect(of("w3")).toEqual([]);
  });

  it("ends cleanly after timeoutSeconds", async () => {
    const hub = await startHub();
    const w = await Watch.open(`${api(hub)}/workers?watch=1&timeoutSeconds=0.2`);
    await eventually(() => w.ended, "the watch to end");
    expect(bookmarks(w.events).length).toBeGreaterThanOrEqual(1);
  });

  it("writes the events delivered together as one chunk of the response, to every watch alike", async () => {
    const hub = await startHub();
    const from = (await call(`${api(hub)}/campaigns`, "GET")).body.metadata.resourceVersion;
    const port = Number(new URL(hub.url).port);
    // Raw clients, to see the response's chunked framing itself: a client reads each chunk as a piece.
    const readers = await Promise.all(
      [0, 1].map(async () => {
        const s = net.connect(port, "127.0.0.1");
        cleanups.push(() => void s.destroy());
        await once(s, "connect");
        let raw = Buffer.alloc(0);
        s.on("data", (d: Buffer) => (raw = Buffer.concat([raw, d])));
        s.write(`GET ${API_PREFIX}/campaigns?watch=1&resourceVersion=${from} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
        /** The chunks received so far, each as its text. */
        return () => {
          const chunks: string[] = [];
          let at = raw.indexOf("\r\n\r\n") + 4;
          for (;;) {
            const eol = raw.indexOf("\r\n", at);
            if (at < 4 || eol < 0) break;
            const size = parseInt(raw.subarray(at, eol).toString("latin1"), 16);
            if (!(size > 0) || eol + 2 + size + 2 > raw.length) break;
            chunks.push(raw.subarray(eol + 2, eol + 2 + size).toString("utf8"));
            at = eol + 2 + size + 2;
          }
          return chunks;
        };
      }),
    );
    await eventually(() => readers.every((r) => r().length > 0), "the first BOOKMARK on both watches");
    // One transaction: three objects at one revision, delivered to each watch in one run.
    const names = ["c1", "c2", "c3"];
    await hub.store.apply(
      names.map((name) => ({
        op: "create" as const,
        object: { apiVersion: API_VERSION, kind: "Campaign", metadata: { name }, spec: SAMPLES.Campaign.spec },
      })),
    );
    for (const read of readers) {
      const chunk = await eventually(() => read().find((c) => c.includes('"c1"')), "the campaigns' events");
      const lines = chunk!
        .trimEnd()
        .split("\n")
        .map((l) => JSON.parse(l) as WatchEv);
      expect(lines.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(names.map((n) => `ADDED ${n}`));
    }
  });

  it("cuts off a watcher that does not read, while other watchers and requests carry on", async () => {
    const hub = await startHub();
    await call(`${api(hub)}/tasks`, "POST", {
      metadata: { name: "big" },
      spec: { required_capability: "nobody-has-this" },
    });
    const from = (await call(`${api(hub)}/tasks`, "GET")).body.metadata.resourceVersion;
    const path = `${API_PREFIX}/tasks?watch=1&resourceVersion=${from}`;

    // A raw client that sends its request and then never reads.
    const port = Number(new URL(hub.url).port);
    const slow = net.connect(port, "127.0.0.1");
    cleanups.push(() => void slow.destroy());
    await once(slow, "connect");
    slow.pause();
    slow.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\n\r\n`);
    const normal = await Watch.open(hub.url + path);

    const blob = "x".repeat(200 * 1024); // under the 256 KiB string limit; 30 of them overflow the 4 MiB buffer
    const N = 120;
    for (let seq = 0; seq < N; seq++) {
      const r = await mergePatch(`${api(hub)}/tasks/big`, { spec: { payload: { blob, seq } } });
      expect(r.status).toBe(200);
    }
    const lastSeq = (evs: WatchEv[]) => evs.some((e) => e.type === "MODIFIED" && e.object.spec.payload?.seq === N - 1);
    await normal.until(lastSeq, "the last change on the normal watcher", 60_000);
    // Status writes by the controllers (before the first patch too) are MODIFIED events without a payload.
    const seqs = normal.events
      .filter((e) => e.type === "MODIFIED" && e.object.spec.payload !== undefined)
      .map((e) => e.object.spec.payload.seq as number);
    expect(seqs.filter((s, i) => i === 0 || s !== seqs[i - 1])).toEqual(Array.from({ length: N }, (_, i) => i));
    expect((await call(`${hub.url}/api/healthz`, "GET")).status).toBe(200);
    expect((await call(`${api(hub)}/tasks/big`, "GET")).body.spec.payload.seq).toBe(N - 1);

    // Now read what the slow client was sent: a prefix of the stream, a final ERROR, then the end
    // (a cut-off stream is kept for its client to read the ERROR, up to closeGraceMs, 30 s).
    const chunks: Buffer[] = [];
    slow.on("data", (c: Buffer) => chunks.push(c));
    const ended = new Promise<void>((r) => slow.once("close", () => r()));
    slow.resume();
    await Promise.race([
      ended,
      new Promise((_, rej) => setTimeout(() => rej(new Error("the slow watcher was never closed")), 30_000)),
    ]);
    const text = Buffer.concat(chunks).toString("utf8");
    expect(text.startsWith("HTTP/1.1 200")).toBe(true);
    const error = /\{"type":"ERROR".*\}\n/.exec(text);
    expect(error, "an ERROR event at the end of the slow stream").not.toBeNull();
    expect(JSON.parse(error![0]).object).toMatchObject({ kind: "Status", reason: "TooSlow", code: 410 });
    expect(text).not.toContain(`"seq":${N - 1}}`);
  }, 120_000);

  it("ends open watches when the Hub closes", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-resource-api-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const hub = await Hub.start({ dataDir: dir, port: 0, logLevel: "silent" });
    const w = await Watch.open(`${api(hub)}/workers?watch=1`);
    await w.until((evs) => bookmarks(evs).length >= 1, "the first BOOKMARK");
    await hub.close();
    await eventually(() => w.closed, "the watch to be closed");
  });
});
