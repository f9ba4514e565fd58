// Events: what happened to each object, as `describe` shows it.
import { afterEach, describe, expect, it } from "vitest";
import type { EventObject } from "../../src/reconciler/events.ts";
import { writeZip } from "../../src/results/zip.ts";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const reasonsFor = async (name: string) => {
  const r = await get(
    h!.url,
    `/apis/loom.dev/v1alpha1/events?fieldSelector=involvedObject.kind=Task,involvedObject.name=${name}`,
  );
  return (r.body.items as EventObject[]).map((e) => e.reason);
};

describe("Events tied to their objects", () => {
  it("records lease granted, released, requeued and expired", async () => {
    // The Hub's clock, which the test moves past the leases' expiry.
    let offsetMs = 0;
    h = await startHub({ now: () => Date.now() + offsetMs });
    await post(h.url, "/api/workers/register", registerBody("w1"));
    await post(h.url, "/api/tasks/dispatch", {
      schema_version: 1,
      tasks: [
        { task_id: "ok", payload: { runner: "noop" } },
        { task_id: "expires", payload: { runner: "noop" }, retry_policy: { max_attempts: 3 } },
        {
          task_id: "fails",
          payload: { runner: "noop", retry_policy: { max_attempts: 2, retry_categories: ["rate_limited"] } },
        },
      ],
    });
    const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 3, lease_seconds: 60 });
    expect(claim.body.tasks).toHaveLength(3);

    const zip = await writeZip([
      { name: "worker-result.json", data: JSON.stringify({ exit_code: 0, verdict: "clean" }) },
    ]);
    const up = await fetch(`${h.url}/api/results/upload`, {
      method: "POST",
      headers: { "content-type": "application/zip", "x-task-id": "ok", "x-worker-id": "w1" },
      body: zip,
    });
    expect(up.status).toBe(201);
    await post(h.url, "/api/tasks/fail", {
      worker_id: "w1",
      task_id: "fails",
      error: { type: "http", detail: "429 Too Many Requests" },
    });
    await eventually(async () => (await reasonsFor("ok")).includes("LeaseReleased"), "LeaseReleased on upload");
    // Only "expires" still holds a lease; a minute later it has expired.
    offsetMs += 61_000;
    h.hub.controllers!.leases.resync();
    expect(await reasonsFor("ok")).toContain("LeaseGranted");
    await eventually(async () => (await reasonsFor("fails")).includes("Requeued"), "Requeued on a retryable failure");
    await eventually(async () => (await reasonsFor("expires")).includes("LeaseExpired"), "LeaseExpired");
  });
});
