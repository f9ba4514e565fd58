// A push whose connection failed before anything was sent (refused, no such host) was not
// delivered: the lease is released at once, the task is queued again with the same attempt,
// and an Event says why. A push that was sent and then got no answer (a timeout, a cut
// connection) may have been delivered: it keeps 502 push_delivery_unknown and its lease.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { EventObject } from "../../src/reconciler/events.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
const sockets = new Set<Socket>();
const servers: Server[] = [];
let seq = 0;

beforeAll(async () => {
  h = await startHub({ env: { LOOM_DIRECT_TOKEN_W1: "direct-token-w1" } });
  expect((await post(h.url, "/api/workers/register", registerBody("w1"))).status).toBe(200);
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
  await h?.close();
});

/** A loopback server that takes the request and then does `behave` with it. */
async function runnerThat(behave: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const s = createServer(behave);
  s.on("connection", (c) => {
    sockets.add(c);
    c.on("close", () => sockets.delete(c));
  });
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  servers.push(s);
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** A loopback port nobody listens on. */
async function closedPort(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as AddressInfo).port;
  await new Promise((r) => s.close(r));
  return `http://127.0.0.1:${port}`;
}

async function pushTo(url: string, extra: Record<string, unknown> = {}) {
  const patch = await fetch(`${h.url}${API_PREFIX}/workers/w1`, {
    method: "PATCH",
    headers: { "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ spec: { worker_url: url, direct_api_token_env: "LOOM_DIRECT_TOKEN_W1" } }),
  });
  expect(patch.status).toBe(200);
  await eventually(() => h.hub.scheduler.ctx.worker("w1")?.spec.worker_url === url, "the worker's URL");
  const taskId = `t${seq++}`;
  expect(
    (
      await post(h.url, "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [{ task_id: taskId, required_capability: "", payload: { runner: "noop" } }],
      })
    ).status,
  ).toBe(201);
  const r = await post(h.url, "/api/admin/push-task", { task_id: taskId, worker_id: "w1", ...extra });
  return { taskId, r, task: () => h.hub.scheduler.ctx.task(taskId)! };
}

const reasonsFor = async (name: string) =>
  (
    (await get(h.url, `${API_PREFIX}/events?fieldSelector=involvedObject.kind=Task,involvedObject.name=${name}`)).body
      .items as EventObject[]
  ).map((e) => `${e.reason}: ${e.message}`);

describe("a push that was not delivered releases its lease at once", () => {
  it("a refused connection: 502 push_not_delivered, the task queued again with the same attempt, an Event saying why", async () => {
    const { taskId, r, task } = await pushTo(await closedPort());
    expect(r.status).toBe(502);
    expect(r.body).toMatchObject({
      error: "push_not_delivered",
      task_id: taskId,
      worker_id: "w1",
      state: "queued",
      cause: "ECONNREFUSED",
    });
    expect(task().status?.state).toBe("queued");
    expect(task().status?.lease).toBeUndefined();
    expect(task().status?.attempt ?? 1).toBe(1);
    expect(h.hub.scheduler.ctx.activeTasksOn("w1")).toEqual([]); // the reservation is gone with it
    await eventually(
      async () =>
        (await reasonsFor(taskId)).some((e) => e.startsWith("PushNotDelivered:") && e.includes("ECONNREFUSED")),
      "the PushNotDelivered Event",
    );
  });

  it("a host name that does not resolve: the same", async () => {
    const { taskId, r, task } = await pushTo("http://loom-no-such-host.invalid:9876");
    expect(r.status, JSON.stringify(r.body)).toBe(502);
    expect(r.body.error).toBe("push_not_delivered");
    expect(["ENOTFOUND", "EAI_AGAIN"]).toContain(r.body.cause);
    expect(task().status?.state).toBe("queued");
    await eventually(
      async () => (await reasonsFor(taskId)).some((e) => e.startsWith("PushNotDelivered:")),
      "the PushNotDelivered Event",
    );
  });
});

describe("a push that was sent keeps its lease when the answer is unknown", () => {
  it("a connection cut after the request arrived: 502 push_delivery_unknown, still leased", async () => {
    const url = await runnerThat((req) => req.on("data", () => req.socket.destroy()));
    const { r, task } = await pushTo(url);
    expect(r.status).toBe(502);
    expect(r.body).toMatchObject({ error: "push_delivery_unknown", state: "leased" });
    expect(task().status?.state).toBe("leased");
    expect(task().status?.lease?.worker).toBe("w1");
  });

  it("no answer within push_timeout_seconds: 502 push_delivery_unknown, still leased", async () => {
    const url = await runnerThat(() => {}); // reads the request, never answers
    const { r, task } = await pushTo(url, { push_timeout_seconds: 10 });
    expect(r.status).toBe(502);
    expect(r.body).toMatchObject({ error: "push_delivery_unknown", state: "leased" });
    expect(task().status?.state).toBe("leased");
  }, 30_000);
});
