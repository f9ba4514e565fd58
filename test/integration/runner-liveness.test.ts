// Runners keep the Hub's view of them true (issue 10): a worker pruned and declared again is
// not Ready until its Runner registers again, which it does by itself with backoff; an idle
// Direct Runner keeps proving liveness, also across a Hub restart.
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { createServer } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { HubClient } from "../../src/runner/client.ts";
import { DirectServer, type DirectOptions } from "../../src/runner/direct.ts";
import { PullLoop } from "../../src/runner/pull.ts";
import { eventually, post, startHub, type TestHub } from "../support/hub.ts";
import { runnerOptions } from "../support/runner.ts";

let tmp: string;
let hub: TestHub | undefined;
const stops: (() => Promise<unknown>)[] = [];
beforeAll(() => {
  tmp = mkdtempSync(path.join(os.tmpdir(), "loom-runner-live-"));
});
afterEach(async () => {
  for (const s of stops.splice(0).reverse()) await s();
  await hub?.close();
  hub = undefined;
});
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

function options(url: string, workerId: string, logs: string[]): DirectOptions {
  return runnerOptions(new HubClient({ baseUrl: url }), workerId, path.join(tmp, workerId), (l) => logs.push(l), {
    pollSeconds: 0.1,
    graceSeconds: 1,
    maxBackoffMs: 400,
    idleHeartbeatSeconds: 0.2,
  });
}

const condition = (h: TestHub, worker: string, type: string) =>
  (h.hub.scheduler.ctx.worker(worker)?.status?.conditions ?? []).find((c) => c.type === type)?.status;

describe("a worker pruned and declared again", () => {
  it("is not Ready until its pull Runner registers again, which it does on its own; then work runs", async () => {
    hub = await startHub();
    const h = hub;
    const logs: string[] = [];
    const loop = new PullLoop(options(h.url, "w1", logs));
    const done = loop.run();
    stops.push(async () => {
      loop.requestStop("test over");
      await done;
    });
    await eventually(() => condition(h, "w1", "Ready") === "True", "w1 Ready");

    // Pruned, then declared again (as GitOps does): the new object has no registration.
    const del = await fetch(`${h.url}${API_PREFIX}/workers/w1`, { method: "DELETE" });
    expect(del.status).toBe(200);
    const created = await post(h.url, `${API_PREFIX}/workers`, {
      metadata: { name: "w1" },
      spec: { max_concurrency: 1 },
    });
    expect(created.status).toBe(201);
    // The Hub tells the truth meanwhile: the worker is not Ready until a registration lands...
    await eventually(() => logs.some((l) => /registering again|not registered/.test(l)), "the Runner noticing");
    // ...and the Runner registers again by itself.
    await eventually(
      () => h.hub.scheduler.ctx.worker("w1")?.status?.registration !== undefined,
      "a new registration",
      15_000,
    );
    await eventually(
      () => condition(h, "w1", "Ready") === "True" && condition(h, "w1", "Registered") === "True",
      "w1 Ready again",
    );
    expect(
      (
        await post(h.url, "/api/tasks/dispatch", {
          schema_version: 1,
          tasks: [{ task_id: "after", required_capability: "", payload: { runner: "noop" } }],
        })
      ).status,
    ).toBe(201);
    await eventually(
      () => ["clean", "returned"].includes(h.hub.scheduler.ctx.task("after")?.status?.state ?? ""),
      "the task to run",
      15_000,
    );
  }, 40_000);

  it("is never Ready, nor gets a liveness entry, while no Runner has registered as it", async () => {
    hub = await startHub();
    const h = hub;
    expect((await post(h.url, `${API_PREFIX}/workers`, { metadata: { name: "w2" }, spec: {} })).status).toBe(201);
    for (let i = 0; i < 3; i++) expect((await post(h.url, "/api/tasks/claim", { worker_id: "w2" })).status).toBe(403);
    expect(h.hub.scheduler.ctx.liveness.get("w2")).toBeUndefined();
    const hb = await post(h.url, "/api/workers/heartbeat", { worker_id: "w2" });
    expect(hb.body.registered).toBe(false);
    await eventually(() => condition(h, "w2", "Ready") === "False", "w2 not Ready");
  });
});

describe("an idle Direct Runner", () => {
  it("stays Ready past the heartbeat grace, and is Ready again after a Hub restart without a new registration", async () => {
    const port = await freePort();
    const dir = mkdtempSync(path.join(tmp, "hub-"));
    // The Hub's clock, moved on by the test instead of waiting for the grace to pass.
    let skewMs = 0;
    const now = () => Date.now() + skewMs;
    hub = await startHub({ port, heartbeatGraceSeconds: 1, now }, dir);
    const liveness = hub.hub.scheduler.ctx.liveness;
    const logs: string[] = [];
    const server = new DirectServer(options(`http://127.0.0.1:${port}`, "wd", logs));
    await server.start();
    stops.push(() => server.close(0));
    await eventually(() => liveness.ready("wd", now()), "wd alive");
    const registeredAt = hub.hub.scheduler.ctx.worker("wd")?.status?.registration?.registered_at;
    // Past the 1 s grace, with no task at all: what the Hub saw before the jump no longer counts...
    skewMs = 2500;
    const jumped = now();
    expect(liveness.ready("wd", jumped)).toBe(false); // no heartbeat can land before this line runs
    // ...and the idle Runner, heartbeating on its own, proves it alive again.
    await eventually(() => (liveness.get("wd")?.lastSeen ?? 0) >= jumped, "a heartbeat after the grace");
    expect(liveness.ready("wd", now())).toBe(true);

    await hub.close();
    hub = await startHub({ port, heartbeatGraceSeconds: 1 }, dir);
    const h = hub;
    await eventually(() => h.hub.scheduler.ctx.liveness.ready("wd", Date.now()), "wd alive after the restart");
    await eventually(() => condition(h, "wd", "Ready") === "True", "wd Ready after the restart");
    expect(h.hub.scheduler.ctx.worker("wd")?.status?.registration?.registered_at).toBe(registeredAt);
  }, 30_000);
});
