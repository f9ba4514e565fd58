// GET /api/data/history on a real Hub: a task dispatched, claimed, started and cancelled
// shows as one lease granted, a bar on its worker's timeline (with started_at kept on the
// attempt), and a queued stretch; a bad window is refused naming the field.
import { afterEach, describe, expect, it } from "vitest";
import { eventually, get, hubSlot, post, registerBody, startHub } from "../support/hub.ts";

const slot = hubSlot();
afterEach(slot.teardown);

describe("GET /api/data/history", () => {
  it("derives the last hour from the tasks: leases granted, each worker's leases, the queue", async () => {
    slot.h = await startHub({});
    const u = slot.h.url;
    expect((await post(u, "/api/workers/register", registerBody("w1"))).status).toBe(200);
    const d = await post(u, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [
        { task_id: "h1", execution_profile: { resources: { cpu_millis: 500 } }, payload: { runner: "noop" } },
        { task_id: "h2", required_capability: "gpu-only", payload: { runner: "noop" } },
      ],
    });
    expect(d.status).toBe(201);
    const claim = await post(u, "/api/tasks/claim", { worker_id: "w1", limit: 1 });
    expect(claim.body.tasks.map((t: { task_id: string }) => t.task_id)).toEqual(["h1"]);
    expect((await post(u, "/api/tasks/start", { worker_id: "w1", task_id: "h1" })).status).toBe(200);
    expect((await post(u, "/api/admin/cancel-task", { task_id: "h1" })).status).toBe(200);

    const h = await eventually(async () => {
      const r = await get(u, "/api/data/history?minutes=10");
      return r.body?.workers?.[0]?.leases?.[0]?.state === "cancelled" && r.body;
    }, "the cancelled lease in the history");
    expect(h.times).toHaveLength(60);
    expect(h.step_seconds).toBe(10);
    expect(h.leases_granted.reduce((a: number, b: number) => a + b, 0)).toBe(1);
    expect(h.workers).toHaveLength(1);
    const bar = h.workers[0].leases[0];
    expect(bar).toMatchObject({ task: "h1", attempt: 1, state: "cancelled", reservation: { cpu_millis: 500 } });
    expect(Date.parse(bar.started_at)).toBeGreaterThanOrEqual(Date.parse(bar.leased_at));
    expect(Date.parse(bar.ended_at)).toBeGreaterThanOrEqual(Date.parse(bar.started_at));
    // h2 can never run here: it is queued now, under its Admitted reason.
    const reason = await eventually(async () => {
      const t = (await get(u, "/apis/loom.dev/v1alpha1/tasks/h2")).body;
      return t.status?.conditions?.find((c: { type: string }) => c.type === "Admitted")?.reason as string | undefined;
    }, "h2's Admitted reason");
    const now = await eventually(async () => {
      const r = (await get(u, "/api/data/history?minutes=10")).body;
      return r.queued_now?.[reason] === 1 && r;
    }, "h2 counted under its reason");
    expect(now.queue_depth.map((q: { reason: string }) => q.reason)).toContain(reason);
  });

  it("refuses a window it cannot answer, naming the field", async () => {
    slot.h = await startHub({});
    for (const bad of ["2", "181", "ten", "1.5"]) {
      const r = await get(slot.h.url, `/api/data/history?minutes=${bad}`);
      expect(r.status, bad).toBe(400);
      expect(r.body).toMatchObject({ error: "invalid_minutes", field: "minutes" });
    }
  });
});
