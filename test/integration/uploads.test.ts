// Result uploads are bounded (issue 10): fence from the headers before the body, a size
// limit while streaming to disk, streaming inflation with ratio and total caps and a CRC
// check, a limit on concurrent uploads, and nothing left on disk by a refused upload.
import { request } from "node:http";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import yazl from "yazl";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectResultZip, writeZip } from "../../src/results/zip.ts";
import { eventually, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
const LIMIT = 256 * 1024;
beforeAll(async () => {
  h = await startHub({ uploadLimitBytes: LIMIT, uploadConcurrency: 1, uploadQueue: 1, uploadWaitMs: 300 });
  expect(
    (await post(h.url, "/api/workers/register", registerBody("w1", { max_concurrency: 8, initial_concurrency: 8 })))
      .status,
  ).toBe(200);
  expect((await post(h.url, "/api/workers/register", registerBody("w2"))).status).toBe(200);
  const tasks = Array.from({ length: 8 }, (_, i) => ({ task_id: `t${i}`, required_capability: "" }));
  expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
  expect((await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 8 })).body.tasks).toHaveLength(8);
});
afterAll(() => h?.close());

const resultsDir = () => join(h.dir, "results");
/** Every file under results/, the in-progress folder included. */
const files = () =>
  readdirSync(resultsDir(), { recursive: true, withFileTypes: true })
    .filter((d) => d.isFile())
    .map((d) => d.name)
    .sort();
const incoming = () => readdirSync(join(resultsDir(), ".incoming"));
const state = (t: string) => h.hub.scheduler.ctx.task(t)?.status?.state;

function upload(task: string, worker: string, body: Buffer) {
  return fetch(`${h.url}/api/results/upload`, {
    method: "POST",
    headers: { "content-type": "application/zip", "x-task-id": task, "x-worker-id": worker },
    body,
  });
}

/** Starts an upload that sends its headers and part of a body, then waits; resolves with the status when the Hub answers. */
function stalledUpload(task: string, worker: string, declared: number) {
  const req = request(`${h.url}/api/results/upload`, {
    method: "POST",
    headers: {
      "content-type": "application/zip",
      "x-task-id": task,
      "x-worker-id": worker,
      "content-length": declared,
    },
  });
  const answered = new Promise<{ status: number; body: any }>((resolve, reject) => {
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    req.on("error", reject);
  });
  answered.catch(() => {}); // a test that destroys the request does not wait for an answer
  req.write(Buffer.alloc(1024));
  return { req, answered };
}

describe("the fence is checked before the body is read", () => {
  it("a worker not holding the lease is refused while its body is still unsent, and nothing is written", async () => {
    const before = files();
    const { req, answered } = stalledUpload("t0", "w2", 200 * 1024);
    const r = await answered; // the Hub answered although 199 KiB of the body never came
    expect(r.status).toBe(409);
    expect(r.body.error).toBe("lease_worker_mismatch");
    req.destroy();
    expect(files()).toEqual(before);
    expect(state("t0")).toBe("leased");
  });
  it("an unknown task is 404 before the body", async () => {
    const { req, answered } = stalledUpload("nope", "w1", 100 * 1024);
    expect((await answered).status).toBe(404);
    req.destroy();
  });
});

describe("size limit", () => {
  it("a declared length over the limit is 413 at once; nothing is kept", async () => {
    const before = files();
    const r = await upload("t0", "w1", Buffer.alloc(LIMIT + 1));
    expect(r.status).toBe(413);
    expect(files()).toEqual(before);
    expect(state("t0")).toBe("leased");
  });
});

describe("streaming inspection", () => {
  it("a ZIP bomb scores run_error, inflation stopping at the ratio cap", async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.alloc(16 * 1024 * 1024), "stdout.txt"); // 16 MiB of zeros: about 16 KiB compressed, a ratio near 1000
    zip.addBuffer(Buffer.from(JSON.stringify({ exit_code: 0 })), "worker-result.json");
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    const bomb = Buffer.concat(chunks);
    expect(bomb.length).toBeLessThan(LIMIT);
    expect((await inspectResultZip(bomb)).error).toMatch(/inflates to more than \d+ bytes \(limit: 200x the upload/);
    const r = await upload("t1", "w1", bomb);
    expect(r.status).toBe(201);
    const body = (await r.json()) as { verdict: string; result_id: string };
    expect(body.verdict).toBe("run_error");
    const result = await h.hub.store.get("Result", body.result_id);
    expect((result!.spec as { issues: string[] }).issues).toEqual(["result_import_error"]);
    expect(h.hub.scheduler.ctx.task("t1")?.status?.state).toBe("run_error");
  });
  it("a ZIP whose data fails its CRC is not clean", async () => {
    const data = Buffer.from(JSON.stringify({ exit_code: 0, note: "aaaaaaaa" }));
    const zip = new yazl.ZipFile();
    zip.addBuffer(data, "worker-result.json", { compress: false });
    zip.end();
    const chunks: Buffer[] = [];
    for await (const c of zip.outputStream) chunks.push(c as Buffer);
    const buf = Buffer.concat(chunks);
    const at = buf.indexOf("aaaaaaaa");
    buf[at] = "b".charCodeAt(0); // still valid JSON with exit_code 0, so only the CRC tells
    const r = await upload("t2", "w1", buf);
    expect(r.status).toBe(201);
    expect(((await r.json()) as { verdict: string }).verdict).toBe("run_error");
  });
  it("a good ZIP still scores clean and is kept", async () => {
    const r = await upload(
      "t3",
      "w1",
      await writeZip([
        { name: "worker-result.json", data: JSON.stringify({ exit_code: 0, verdict: "clean" }) },
        { name: "stdout.txt", data: "ok\n" },
      ]),
    );
    expect(r.status).toBe(201);
    const text = await r.text();
    const body = JSON.parse(text) as { verdict: string; result_id: string; download_url: string };
    expect(body.verdict).toBe("clean");
    expect(files()).toContain(`${body.result_id}.zip`);
    expect(incoming()).toEqual([]);
    // The reply names the result and where to fetch it, never where it lies on the Hub's disk.
    expect(text).not.toContain(resultsDir());
    expect(body).not.toHaveProperty("path");
    const got = await fetch(h.url + body.download_url);
    expect(got.status).toBe(200);
    expect(
      Buffer.from(await got.arrayBuffer())
        .subarray(0, 2)
        .toString(),
    ).toBe("PK");
  });
});

describe("concurrent uploads are limited", () => {
  it("an upload past the limit waits its turn; past the queue or the wait it gets 429 with Retry-After, before its body is read", async () => {
    const first = stalledUpload("t4", "w1", 64 * 1024);
    // The first holds the one slot once its body is being written to a part file.
    await eventually(() => incoming().length === 1, "the first upload to be receiving");
    const second = stalledUpload("t5", "w1", 64 * 1024);
    const r = await second.answered;
    expect(r.status).toBe(429);
    expect(r.body.error).toBe("too_many_uploads");
    second.req.destroy();
    // The first one, cut off by its client, leaves nothing behind either.
    first.req.destroy();
    await eventually(() => incoming().length === 0, "the cut-off upload's part file to be removed");
    expect(state("t4")).toBe("leased");
    // And the slot is free again.
    const ok = await upload(
      "t5",
      "w1",
      await writeZip([{ name: "worker-result.json", data: JSON.stringify({ exit_code: 0 }) }]),
    );
    expect(ok.status).toBe(201);
  });

  it("uploads that arrive together are served in turn, none refused, while the queue has room", async () => {
    const zip = await writeZip([{ name: "worker-result.json", data: JSON.stringify({ exit_code: 0 }) }]);
    // One slot, one place in the queue: two at once both land.
    const [a, b] = await Promise.all([upload("t6", "w1", zip), upload("t7", "w1", zip)]);
    expect([a.status, b.status]).toEqual([201, 201]);
    expect([state("t6"), state("t7")]).toEqual(["clean", "clean"]);
  });
});
