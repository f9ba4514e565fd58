// The push controller runs only while some worker takes pushes: a pull fleet's lease writes
// must not each start an empty push pass.
import { afterEach, describe, expect, it } from "vitest";
import { eventually, post, startHub, type TestHub } from "../support/hub.ts";
import { noopTask, registerBody } from "../../bench/lib/workload.ts";

let h: TestHub | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

describe("push passes", () => {
  it("do not run for lease writes on a fleet with no push-mode worker", async () => {
    h = await startHub({ resyncMs: 600_000 });
    expect((await post(h.url, "/api/workers/register", registerBody("w1", 4))).status).toBe(200);
    const tasks = Array.from({ length: 20 }, (_, i) => noopTask("pp", i));
    expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, operator: "t", tasks })).status).toBe(201);
    const push = h.hub.controllers!.push;
    const conditions = h.hub.controllers!.admission;
    const pushBefore = push.started;
    const conditionsBefore = conditions.passes;
    let done = 0;
    while (done < 20) {
      const c = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 4, lease_seconds: 600 });
      expect(c.status).toBe(200);
      for (const t of c.body.tasks as { task_id: string }[]) {
        expect((await post(h.url, "/api/tasks/start", { worker_id: "w1", task_id: t.task_id })).status).toBe(200);
        const r = await post(h.url, "/api/tasks/complete", {
          worker_id: "w1",
          task_id: t.task_id,
          result: {},
          upload: {},
        });
        expect(r.status).toBe(200);
        done++;
      }
    }
    // The same writes do wake the conditions pass, so the queue saw them.
    await eventually(() => conditions.passes > conditionsBefore, "a conditions pass after the lease writes");
    expect(push.started).toBe(pushBefore);
  });
});
