// The web view's files at /ui on a token-protected Hub: served without a token (they hold no
// data) under a strict Content-Security-Policy, nothing outside dist/ui, and every data path
// still refused without the token. Also the result-logs endpoint the task page reads.
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { uiRoutes } from "../../src/api/ui.ts";
import { writeZip } from "../../src/results/zip.ts";
import { get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

const TOKEN = "ui-static-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
let hub: TestHub;
let dir: string;
let bare: FastifyInstance;

beforeAll(async () => {
  hub = await startHub({ env: { LOOM_HUB_TOKEN: TOKEN } });
  dir = await mkdtemp(join(tmpdir(), "loom-ui-dist-"));
  await mkdir(join(dir, "assets"));
  await writeFile(join(dir, "index.html"), "<!doctype html><title>t</title>");
  await writeFile(join(dir, "assets", "app-abc.js"), "export {};");
  await writeFile(join(dir, "..", "secret.txt"), "not for the web");
  bare = Fastify();
  await bare.register(uiRoutes, { dir });
});
afterAll(async () => {
  await hub.close();
  await bare.close();
  await rm(dir, { recursive: true, force: true });
  await rm(join(dir, "..", "secret.txt"), { force: true });
});

describe("/ui static files", () => {
  it("serves the page and its assets without a token, with a strict CSP", async () => {
    const page = await bare.inject("/ui/");
    expect(page.statusCode).toBe(200);
    expect(page.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(page.headers["cache-control"]).toBe("no-store");
    expect(page.headers["content-security-policy"]).toContain("default-src 'self'");
    expect(page.headers["content-security-policy"]).toContain("connect-src 'self'");
    const js = await bare.inject("/ui/assets/app-abc.js");
    expect(js.statusCode).toBe(200);
    expect(js.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(js.headers["cache-control"]).toContain("immutable");
    expect((await bare.inject("/ui")).headers.location).toBe("/ui/");
  });

  it("serves nothing outside its folder", async () => {
    for (const path of [
      "/ui/../secret.txt",
      "/ui/%2e%2e/secret.txt",
      "/ui/assets/%2e%2e/%2e%2e/secret.txt",
      "/ui/missing.js",
    ]) {
      const r = await bare.inject(path);
      expect(r.statusCode, path).toBe(404);
      expect(r.body).not.toContain("not for the web");
    }
  });

  it("on a token-protected Hub, /ui needs no token and the API still does", async () => {
    const page = await fetch(`${hub.url}/ui/`);
    expect([200, 503]).toContain(page.status); // 503 names the build command in an unbuilt checkout
    expect((await get(hub.url, "/apis/loom.dev/v1alpha1/tasks")).status).toBe(401);
    expect((await get(hub.url, "/api/data/worker-capacity")).status).toBe(401);
    expect((await get(hub.url, "/apis/loom.dev/v1alpha1/tasks", auth)).status).toBe(200);
  });

  it("no answer of the API is cached: data, refusals, unknown paths, bad parameters and probes", async () => {
    const url = hub.url;
    const answers = [
      await fetch(`${url}/apis/loom.dev/v1alpha1/workers`, { headers: auth }),
      await fetch(`${url}/apis/loom.dev/v1alpha1/workers`),
      await fetch(`${url}/api/no-such-path`, { headers: auth }),
      await fetch(`${url}/apis/loom.dev/v1alpha1/workers?limit=1&limit=2`, { headers: auth }),
      await fetch(`${url}/healthz`),
    ];
    expect(answers.map((r) => r.status)).toEqual([200, 401, 404, 400, 200]);
    for (const r of answers) expect(r.headers.get("cache-control"), r.url).toBe("no-store");
  });

  it("an unbuilt page answers 503 with the build command", async () => {
    const empty = Fastify();
    await empty.register(uiRoutes, { dir: join(dir, "nothing-here") });
    const r = await empty.inject("/ui/");
    expect(r.statusCode).toBe(503);
    expect(r.body).toContain("npm run build:ui");
    await empty.close();
  });
});

describe("GET /api/results/:id/logs", () => {
  it("returns the logs inside a stored result, and 404 for an unknown one", async () => {
    const url = hub.url;
    expect((await post(url, "/api/workers/register", registerBody("w1"), auth)).status).toBe(200);
    expect(
      (
        await post(
          url,
          "/api/tasks/dispatch",
          { schema_version: 1, tasks: [{ task_id: "t1", payload: { runner: "noop" } }] },
          auth,
        )
      ).status,
    ).toBe(201);
    const claim = await post(url, "/api/tasks/claim", { worker_id: "w1" }, auth);
    expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["t1"]);
    const zip = await writeZip([
      { name: "worker-result.json", data: JSON.stringify({ exit_code: 0, verdict: "clean" }) },
      { name: "stdout.txt", data: "hello from t1\n" },
      { name: "stderr.txt", data: "" },
      { name: "artifacts/data.bin", data: "binary" },
    ]);
    const up = await fetch(`${url}/api/results/upload`, {
      method: "POST",
      headers: { ...auth, "x-task-id": "t1", "x-worker-id": "w1", "content-type": "application/zip" },
      body: zip,
    });
    expect(up.status).toBe(201);
    const { result_id } = (await up.json()) as { result_id: string };
    const logs = await get(url, `/api/results/${result_id}/logs`, auth);
    expect(logs.status).toBe(200);
    expect(logs.body.logs.map((l: { name: string }) => l.name).sort()).toEqual(["stderr.txt", "stdout.txt"]);
    expect(logs.body.logs.find((l: { name: string }) => l.name === "stdout.txt")).toMatchObject({
      text: "hello from t1\n",
      bytes: 14,
      truncated: false,
    });
    expect((await get(url, `/api/results/${result_id}/logs`)).status).toBe(401);
    expect((await get(url, "/api/results/no-such-result/logs", auth)).body.error).toBe("result_not_found");
  });
});
