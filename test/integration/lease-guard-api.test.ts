// The admission invariant holds for leases written through the resource API's status
// subresource, not only for claims: a status write that would over-reserve a worker, put a
// task beside an exclusive one, pass max_concurrency or name a missing worker is refused
// with 409 naming the dimension, and nothing changes.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { Hub } from "../../src/hub.ts";

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function call(url: string, method: string, body?: unknown, contentType = "application/json") {
  const res = await fetch(url, {
    method,
    headers: body === undefined ? {} : { "content-type": contentType },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

const lease = (worker: string, cpu: number, placement = "shared") => ({
  state: "leased",
  attempt: 1,
  lease: {
    worker,
    epoch: 1,
    mode: "pull",
    leased_at: new Date().toISOString(),
    lease_until: new Date(Date.now() + 600_000).toISOString(),
    placement,
    reservation: { cpu_millis: cpu, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
  },
});

describe("status writes cannot get around admission", () => {
  it("a second lease that would reserve 2,000 of 1,000 cpu_millis on a concurrency-1 worker is refused", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-guard-"));
    const hub = await Hub.start({ dataDir: dir, port: 0, logLevel: "silent" });
    cleanups.push(async () => {
      await hub.close();
      await rm(dir, { recursive: true, force: true });
    });
    const api = hub.url + API_PREFIX;
    const w = await call(`${api}/workers`, "POST", {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Worker",
      metadata: { name: "w1" },
      spec: {
        max_concurrency: 1,
        resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 1024, gpu_count: 0 },
      },
    });
    expect(w.status).toBe(201);
    for (const n of ["t1", "t2"])
      expect(
        (
          await call(`${api}/tasks`, "POST", {
            apiVersion: "loom.dev/v1alpha1",
            kind: "Task",
            metadata: { name: n },
            spec: { campaign_id: "c", execution_profile: { placement: "shared", resources: { cpu_millis: 1000 } } },
          })
        ).status,
      ).toBe(201);

    const first = await call(
      `${api}/tasks/t1/status`,
      "PATCH",
      { status: lease("w1", 1000) },
      "application/merge-patch+json",
    );
    expect(first.status).toBe(200);

    const second = await call(
      `${api}/tasks/t2/status`,
      "PATCH",
      { status: lease("w1", 1000) },
      "application/merge-patch+json",
    );
    expect(second.status).toBe(409);
    expect(second.body.kind).toBe("Status");
    expect(JSON.stringify(second.body)).toContain("cpu_millis");
    const t2 = await call(`${api}/tasks/t2`, "GET");
    expect(t2.body.status?.lease).toBeUndefined();

    // Refused by the API's own check (422) before it reaches the store's guard, which would say 409.
    const missing = await call(
      `${api}/tasks/t2/status`,
      "PATCH",
      { status: lease("nope", 0) },
      "application/merge-patch+json",
    );
    expect(missing.status).toBe(422);
    expect(JSON.stringify(missing.body)).toContain("status.lease.worker");

    // The worker's derived reservation never went past its capacity.
    const cap = await call(`${hub.url}/api/data/worker-capacity`, "GET");
    expect(cap.status).toBe(200);
    const entry = JSON.stringify(cap.body);
    expect(entry).toContain("w1");
    const leased = (await call(`${api}/tasks`, "GET")).body.items.filter((t: any) => t.status?.lease?.worker === "w1");
    expect(leased.map((t: any) => t.metadata.name)).toEqual(["t1"]);
  });
});
