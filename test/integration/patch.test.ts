// PATCH on the resource API in the formats kubectl sends: JSON Patch next to merge patch,
// and server-side apply refused with a Status that says what to use instead.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
const W = "/apis/loom.dev/v1alpha1/workers";
beforeAll(async () => {
  h = await startHub();
  const worker = { apiVersion: "loom.dev/v1alpha1", kind: "Worker", metadata: { name: "p1", labels: { zone: "a" } }, spec: { max_concurrency: 2, capabilities: ["linux"] } };
  expect((await send("POST", W, worker, "application/json")).status).toBe(201);
});
afterAll(() => h?.close());

async function send(method: string, path: string, body: unknown, type: string, raw?: string) {
  const res = await fetch(h.url + path, { method, headers: { "content-type": type }, body: raw ?? JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("PATCH formats", () => {
  it("applies a JSON Patch (application/json-patch+json) as one write", async () => {
    const r = await send("PATCH", `${W}/p1`, [
      { op: "test", path: "/spec/max_concurrency", value: 2 },
      { op: "replace", path: "/spec/max_concurrency", value: 3 },
      { op: "add", path: "/spec/capabilities/-", value: "gpu" },
      { op: "remove", path: "/metadata/labels/zone" },
    ], "application/json-patch+json");
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.spec).toMatchObject({ max_concurrency: 3, capabilities: ["linux", "gpu"] });
    expect(r.body.metadata.labels ?? {}).toEqual({});
    expect(r.body.metadata.generation).toBe(2);
  });

  it("refuses a failed test, a bad path and an invalid result, changing nothing", async () => {
    const before = (await fetch(`${h.url}${W}/p1`).then((r) => r.json())) as Record<string, any>;
    const failedTest = await send("PATCH", `${W}/p1`, [{ op: "test", path: "/spec/max_concurrency", value: 99 }, { op: "replace", path: "/spec/max_concurrency", value: 1 }], "application/json-patch+json");
    expect(failedTest.status).toBe(422);
    expect(failedTest.body).toMatchObject({ kind: "Status", reason: "Invalid", details: { causes: [{ field: "spec.max_concurrency" }] } });
    expect(failedTest.body.message).toContain("operation 0 (/spec/max_concurrency): test failed");
    const badPath = await send("PATCH", `${W}/p1`, [{ op: "remove", path: "/spec/nope" }], "application/json-patch+json");
    expect(badPath.status).toBe(422);
    const invalid = await send("PATCH", `${W}/p1`, [{ op: "replace", path: "/spec/max_concurrency", value: -1 }], "application/json-patch+json");
    expect(invalid.status).toBe(422);
    expect(JSON.stringify(invalid.body)).toContain("spec.max_concurrency");
    const stale = await send("PATCH", `${W}/p1`, [{ op: "test", path: "/metadata/resourceVersion", value: "1" }, { op: "replace", path: "/spec/max_concurrency", value: 1 }], "application/json-patch+json");
    expect(stale.status).toBe(422);
    const after = (await fetch(`${h.url}${W}/p1`).then((r) => r.json())) as Record<string, any>;
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it("refuses server-side apply with a Status pointing to client-side apply, and names the formats it takes", async () => {
    const ssa = await send("PATCH", `${W}/p1?fieldManager=kubectl&force=true`, undefined, "application/apply-patch+yaml", "apiVersion: loom.dev/v1alpha1\nkind: Worker\nmetadata: {name: p1}\n");
    expect(ssa.status).toBe(415);
    expect(ssa.body).toMatchObject({ kind: "Status", reason: "UnsupportedMediaType" });
    expect(ssa.body.message).toContain("server-side apply is not supported");
    expect(ssa.body.message).toContain("kubectl apply without --server-side");
    const strategic = await send("PATCH", `${W}/p1`, {}, "application/strategic-merge-patch+json");
    expect(strategic.status).toBe(415);
    expect(strategic.body.message).toContain("--type=json");
  });
});
