// GitOps through a running Hub: the files are the desired state, and what they say
// reaches admission and the Events that `describe` shows.
import { mkdtemp, rm, writeFile, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { EventObject } from "../../src/reconciler/events.ts";
import { eventually, get, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub | undefined;
let dir = "";
afterEach(async () => {
  await h?.close();
  h = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
});

const inventory = (memory: number) =>
  JSON.stringify({
    inventory_version: 1,
    workers: [
      {
        worker_id: "evaluation-01",
        host: "127.0.0.1",
        max_concurrency: 2,
        initial_concurrency: 2,
        capabilities: ["linux"],
        resource_capacity: { cpu_millis: 4000, memory_mb: memory, disk_mb: 1000, gpu_count: 0 },
      },
    ],
  });
const manifest = JSON.stringify({
  schema_version: 1,
  campaign_id: "demo",
  defaults: { setting_id: "base", run_id: "1", payload: { runner: "noop" } },
  cases: [{ case_id: "big", execution_profile: { resources: { memory_mb: 4096 } } }],
});

describe("GitOps file sync in the Hub", () => {
  it("applies, re-admits on a capacity edit, rejects a broken file with an Event, and prunes on delete", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-gitops-hub-"));
    const inv = join(dir, "inventory.json");
    const man = join(dir, "campaign.json");
    await writeFile(inv, inventory(2048));
    await writeFile(man, manifest);
    h = await startHub({ gitopsPaths: [dir], gitopsDebounceMs: 50 });
    const url = h.url;
    const task = "demo__big__base__run-1";
    await eventually(
      async () => (await get(url, `/api/data/task-admission?task_id=${task}`)).status === 200,
      "task materialized",
    );
    const before = await get(url, `/api/data/task-admission?task_id=${task}`);
    expect(before.body.workers[0].reasons).toContain("exceeds_worker_capacity");
    expect(before.body.unsatisfiable).toBe(true);

    // Editing the capacity in the file changes admission of the queued task.
    await writeFile(inv, inventory(8192));
    const after = await eventually(async () => {
      const r = await get(url, `/api/data/task-admission?task_id=${task}`);
      return !r.body.workers[0].reasons.includes("exceeds_worker_capacity") && r;
    }, "re-admission after the edit");
    expect(after.body.workers[0].capacity.memory_mb).toBe(8192);
    expect(after.body.unsatisfiable).toBe(false);

    // A broken file changes nothing and is reported as an Event naming the file and the field.
    await writeFile(inv, inventory(-5));
    const ev = await eventually(async () => {
      const { items } = await h!.hub.store.list<EventObject>("Event");
      return items.find((e) => e.reason === "FileRejected" && e.involvedObject.name === inv);
    }, "FileRejected event");
    expect(ev.type).toBe("Warning");
    expect(ev.message).toContain("resource_capacity.memory_mb");
    expect((await get(url, "/api/data/worker-capacity")).body.workers[0].capacity.memory_mb).toBe(8192);

    // Deleting the inventory prunes the worker it declared (it holds no lease).
    await unlink(inv);
    await eventually(
      async () => (await get(url, "/api/data/worker-capacity")).body.workers.length === 0,
      "worker pruned",
    );
  });
});
