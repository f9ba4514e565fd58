// Secret exfiltration (issue 10): a Worker's direct_api_token_env names the variable whose
// value the Hub sends, as a bearer token, to the Worker's URL. Both can be set through the
// API, so only variables the operator allows may be named; the Hub's own token never leaves.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const HUB_TOKEN = "hub-secret-0123456789abcdef";
const AUTH = { authorization: `Bearer ${HUB_TOKEN}` };
let h: TestHub;
let runner: Server;
const seen: string[] = [];

beforeAll(async () => {
  // A Direct Runner stand-in on loopback that records what it is sent and accepts the task.
  runner = createServer((req, res) => {
    seen.push(String(req.headers.authorization));
    req.resume();
    req.on("end", () => res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ ok: true })));
  });
  await new Promise<void>((r) => runner.listen(0, "127.0.0.1", r));
  h = await startHub({
    env: { LOOM_HUB_TOKEN: HUB_TOKEN, LOOM_DIRECT_TOKEN_W1: "direct-token-w1", AWS_SECRET_ACCESS_KEY: "cloud-key" },
  });
  const url = `http://127.0.0.1:${(runner.address() as AddressInfo).port}`;
  expect((await post(h.url, "/api/workers/register", registerBody("w1"), AUTH)).status).toBe(200);
  expect(
    (
      await post(
        h.url,
        "/api/tasks/dispatch",
        { schema_version: 1, tasks: [{ task_id: "t1", required_capability: "" }] },
        AUTH,
      )
    ).status,
  ).toBe(201);
  const patch = await fetch(`${h.url}${API_PREFIX}/workers/w1`, {
    method: "PATCH",
    headers: { ...AUTH, "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ spec: { worker_url: url, direct_api_token_env: "LOOM_HUB_TOKEN" } }),
  });
  expect(patch.status).toBe(200);
});
afterAll(async () => {
  await h?.close();
  runner?.close();
});

const setEnvName = (name: string) =>
  fetch(`${h.url}${API_PREFIX}/workers/w1`, {
    method: "PATCH",
    headers: { ...AUTH, "content-type": "application/merge-patch+json" },
    body: JSON.stringify({ spec: { direct_api_token_env: name } }),
  });

describe("direct_api_token_env names only allowed variables", () => {
  it("a push that would send the Hub's own token, or any unlisted variable, is refused and nothing is sent", async () => {
    for (const name of ["LOOM_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "LOOM_DIRECT_TOKENX"]) {
      expect((await setEnvName(name)).status).toBe(200);
      const r = await post(h.url, "/api/admin/push-task", { task_id: "t1", worker_id: "w1" }, AUTH);
      expect(r.status).toBe(403);
      expect(r.body).toMatchObject({
        error: "token_env_not_allowed",
        field: "spec.direct_api_token_env",
        token_env: name,
      });
      expect(JSON.stringify(r.body)).not.toContain(HUB_TOKEN);
    }
    expect(seen).toEqual([]);
    expect(h.hub.scheduler.ctx.task("t1")?.status?.state).toBe("queued");
  });
  it("a variable under the allowed prefix is used", async () => {
    expect((await setEnvName("LOOM_DIRECT_TOKEN_W1")).status).toBe(200);
    const r = await post(h.url, "/api/admin/push-task", { task_id: "t1", worker_id: "w1" }, AUTH);
    expect(r.status, JSON.stringify(r.body)).toBe(202);
    expect(seen).toEqual(["Bearer direct-token-w1"]);
  });
});
