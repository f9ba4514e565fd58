// What an operator scrapes and probes: /metrics as Prometheus text (read back with a strict
// parser), /livez /readyz /healthz without a token, and /api/healthz in its v1 shape saying
// when a watched file is rejected.
import { mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { eventually, hubSlot, post, registerBody, startHub } from "../support/hub.ts";
import { parsePrometheusText, sampleValue } from "../support/prom-text.ts";

const TOKEN = "observability-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };
const slot = hubSlot();
afterEach(slot.teardown);

const inventory = (memory: number) =>
  JSON.stringify({
    inventory_version: 1,
    workers: [
      {
        worker_id: "w1",
        host: "127.0.0.1",
        max_concurrency: 2,
        initial_concurrency: 2,
        capabilities: ["linux"],
        resource_capacity: { cpu_millis: 4000, memory_mb: memory, disk_mb: 1000, gpu_count: 0 },
      },
    ],
  });

async function scrape(url: string) {
  const res = await fetch(url + "/metrics", { headers: auth });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toContain("text/plain");
  return parsePrometheusText(await res.text());
}

const text = async (url: string, path: string, headers: Record<string, string> = {}) => {
  const res = await fetch(url + path, { headers });
  return { status: res.status, body: await res.text() };
};

describe("/metrics", () => {
  it("counts leases, claims, commits, tasks, reservations, watchers and rejected files, and parses as Prometheus text", async () => {
    slot.dir = await mkdtemp(join(tmpdir(), "loom-metrics-"));
    const inv = join(slot.dir, "inventory.json");
    await writeFile(inv, inventory(8192));
    slot.h = await startHub({ gitopsPaths: [slot.dir], gitopsDebounceMs: 50, env: { LOOM_HUB_TOKEN: TOKEN } });
    const u = slot.h.url;
    expect((await fetch(u + "/metrics")).status).toBe(401);

    expect((await post(u, "/api/workers/register", registerBody("w1"), auth)).status).toBe(200);
    const tasks = [
      {
        task_id: "m-1",
        required_capability: "",
        payload: { runner: "noop" },
        execution_profile: { placement: "shared", resources: { cpu_millis: 1500, memory_mb: 1024 } },
      },
      { task_id: "m-2", required_capability: "", payload: { runner: "noop" } },
      {
        task_id: "m-big",
        required_capability: "",
        payload: { runner: "noop" },
        execution_profile: { placement: "shared", resources: { memory_mb: 999_999 } },
      },
    ];
    expect((await post(u, "/api/tasks/dispatch", { schema_version: 1, operator: "test", tasks }, auth)).status).toBe(
      201,
    );
    const claimed = await post(u, "/api/tasks/claim", { worker_id: "w1", limit: 2 }, auth);
    expect(claimed.body.tasks.map((t: { task_id: string }) => t.task_id).sort()).toEqual(["m-1", "m-2"]);
    expect((await post(u, "/api/admin/cancel-task", { task_id: "m-2" }, auth)).status).toBe(200);

    // A watch stays open while we scrape.
    const ac = new AbortController();
    const watch = await fetch(u + "/apis/loom.dev/v1alpha1/tasks?watch=1", { headers: auth, signal: ac.signal });
    expect(watch.status).toBe(200);

    const m = await eventually(async () => {
      const fam = await scrape(u);
      // A pass's writes are counted when it ends, just after they land.
      return (
        sampleValue(fam, "loom_queued_tasks", { reason: "exceeds_worker_capacity" }) === 1 &&
        (sampleValue(fam, "loom_reconcile_writes_total", { controller: "admission-conditions" }) ?? 0) >= 1 &&
        fam
      );
    }, "the Admitted condition of the oversized task, and the pass that wrote it");
    expect(sampleValue(m, "loom_leases_granted_total", { mode: "pull" })).toBe(2);
    expect(sampleValue(m, "loom_leases_released_total", { reason: "Cancelled" })).toBe(1);
    expect(sampleValue(m, "loom_claim_duration_seconds_count")).toBeGreaterThanOrEqual(1);
    expect(sampleValue(m, "loom_claim_granted_tasks_sum")).toBe(2);
    expect(sampleValue(m, "loom_store_commit_duration_seconds_count", { result: "ok" })).toBeGreaterThanOrEqual(2);
    expect(sampleValue(m, "loom_store_commit_batch_ops_sum")).toBeGreaterThanOrEqual(3);
    expect(sampleValue(m, "loom_tasks", { state: "leased" })).toBe(1);
    expect(sampleValue(m, "loom_tasks", { state: "cancelled" })).toBe(1);
    expect(sampleValue(m, "loom_tasks", { state: "queued" })).toBe(1);
    expect(sampleValue(m, "loom_worker_reserved", { worker: "w1", dimension: "cpu_millis" })).toBe(1500);
    expect(sampleValue(m, "loom_worker_reserved", { worker: "w1", dimension: "memory_mb" })).toBe(1024);
    expect(sampleValue(m, "loom_worker_capacity", { worker: "w1", dimension: "memory_mb" })).toBe(8192);
    expect(
      sampleValue(m, "loom_reconcile_pass_duration_seconds_count", { controller: "admission-conditions" }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      sampleValue(m, "loom_reconcile_writes_total", { controller: "admission-conditions" }),
    ).toBeGreaterThanOrEqual(1);
    expect(sampleValue(m, "loom_watchers")).toBe(1);
    expect(m.get("nodejs_eventloop_lag_p99_seconds")?.type).toBe("gauge");
    expect(sampleValue(m, "loom_gitops_files_rejected")).toBe(0);
    for (const f of m.values()) expect(f.help, f.name).not.toBe("");

    // Every series the Grafana example and the docs name is one the Hub serves.
    const dashboard = JSON.parse(
      await readFile(join(import.meta.dirname, "..", "..", "docs", "grafana-dashboard.json"), "utf8"),
    ) as { panels: { targets: { expr: string }[] }[] };
    const docs = await readFile(join(import.meta.dirname, "..", "..", "docs", "metrics.md"), "utf8");
    const served = (name: string) => m.has(name) || m.has(name.replace(/_(bucket|sum|count)$/, ""));
    const named = [...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)), docs].flatMap((e) =>
      [...e.matchAll(/\b(?:loom|nodejs)_[a-z0-9_]+/g)].map((x) => x[0]),
    );
    expect(named.length).toBeGreaterThan(20);
    expect(named.filter((n) => !served(n))).toEqual([]);
    for (const f of m.values())
      if (f.name.startsWith("loom_")) expect(docs, `docs/metrics.md names ${f.name}`).toContain(`\`${f.name}\``);

    ac.abort();
    await eventually(async () => sampleValue(await scrape(u), "loom_watchers") === 0, "the watcher count to drop");

    // A broken inventory is counted, and /api/healthz stops claiming `synced`.
    await writeFile(inv, inventory(-1));
    const after = await eventually(async () => {
      const f = await scrape(u);
      return sampleValue(f, "loom_gitops_files_rejected") === 1 && f;
    }, "the rejected file");
    expect(sampleValue(after, "loom_gitops_file_rejections_total")).toBe(1);
    const v1 = (await fetch(u + "/api/healthz", { headers: auth }).then((r) => r.json())) as Record<string, any>;
    expect(v1).toMatchObject({
      ok: true,
      hub_api_version: 1,
      store: "sqlite",
      synced: false,
      informer_synced: true,
      gitops: { rejected_files: [inv] },
    });
    expect(v1.gitops.message).toContain("1 watched file(s) rejected");
    await writeFile(inv, inventory(8192));
    await eventually(
      async () =>
        ((await fetch(u + "/api/healthz", { headers: auth }).then((r) => r.json())) as { synced: boolean }).synced ===
        true,
      "synced again once the file is fixed",
    );
  });
});

describe("health probes", () => {
  it("answer without a token, the Kubernetes way, and readyz fails while the store cannot commit", async () => {
    slot.h = await startHub({ env: { LOOM_HUB_TOKEN: TOKEN } });
    const u = slot.h.url;
    expect(await text(u, "/livez")).toEqual({ status: 200, body: "ok" });
    expect(await text(u, "/readyz")).toEqual({ status: 200, body: "ok" });
    expect(await text(u, "/healthz")).toEqual({ status: 200, body: "ok" });
    const verbose = await text(u, "/readyz?verbose");
    expect(verbose.body).toContain("[+]informer-sync ok");
    expect(verbose.body).toContain("[+]store ok");
    expect(verbose.body).toContain("readyz check passed");
    expect(await text(u, "/readyz/store")).toEqual({ status: 200, body: "ok" });
    expect((await text(u, "/readyz/nope")).status).toBe(404);
    // Everything else still needs the token, including the v1 health and the metrics.
    expect((await text(u, "/api/healthz")).status).toBe(401);
    expect((await text(u, "/healthzz")).status).toBe(401);

    // The store goes away under the Hub: a write fails, readiness says so, liveness does not.
    await slot.h.hub.store.close();
    expect((await post(u, "/api/workers/register", registerBody("w-after"), auth)).status).toBe(500);
    const ready = await text(u, "/readyz");
    expect(ready.status).toBe(500);
    expect(ready.body).toMatch(/\[-\]store failed: the last store commit failed at \d{4}-/);
    expect(ready.body).not.toContain(TOKEN);
    expect(ready.body).toContain("readyz check failed");
    expect((await text(u, "/readyz?exclude=store")).status).toBe(200);
    expect(await text(u, "/livez")).toEqual({ status: 200, body: "ok" });
    expect((await text(u, "/healthz")).status).toBe(500);
  });
});
