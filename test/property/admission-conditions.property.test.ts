// No contradicting admission conditions, at any revision, whatever path writes the task:
// random mixes of pull claims, status-subresource leases (some carrying Unsatisfiable=True
// themselves), admin cancels and retries, completions, and capacity edits that make the
// large tasks fit or never fit run against a real Hub whose conditions controller runs all
// along. A checker follows the store's watch and flags every revision at which a task that
// holds a lease, or is out of the queue, carries Unsatisfiable=True or Admitted=False.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { Condition } from "../../src/resources/types.ts";
import type { WatchEvent } from "../../src/store/store.ts";
import { admissionUnsettled, settleAdmission } from "../../src/scheduler/lifecycle.ts";
import { post, startHub } from "../support/hub.ts";
import { registerWorkers, taskOp } from "../support/task-ops.ts";

const QUEUED = ["queued", "retry_queued"];
const STATES = [
  "queued",
  "retry_queued",
  "leased",
  "running",
  "returned",
  "imported",
  "clean",
  "dirty",
  "run_error",
  "cancelled",
  "lease_expired",
] as const;

class Checker {
  violations: string[] = [];
  /** Tasks seen Unsatisfiable=True while queued, and how many of those were later leased. */
  unsatisfiable = new Set<string>();
  leasedAfterUnsatisfiable = 0;
  finishedAfterUnsatisfiable = 0;
  on = (ev: WatchEvent) => {
    const o = ev.object;
    if (o.kind !== "Task" || ev.type === "DELETED") return;
    const st = (o.status ?? {}) as { state?: string; lease?: unknown; conditions?: Condition[] };
    const cond = (type: string) => st.conditions?.find((c) => c.type === type);
    const state = st.state ?? "queued";
    const name = o.metadata.name;
    if (QUEUED.includes(state)) {
      if (cond("Unsatisfiable")?.status === "True") this.unsatisfiable.add(name);
      return;
    }
    if (this.unsatisfiable.delete(name)) {
      if (st.lease) this.leasedAfterUnsatisfiable++;
      else this.finishedAfterUnsatisfiable++;
    }
    if (cond("Unsatisfiable")?.status === "True")
      this.violations.push(
        `rev ${ev.revision}: ${name} is ${state}${st.lease ? " with a lease" : ""} and Unsatisfiable=True`,
      );
    if (cond("Admitted")?.status === "False")
      this.violations.push(`rev ${ev.revision}: ${name} is ${state} and Admitted=False (${cond("Admitted")?.reason})`);
  };
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant("claim" as const),
    w: fc.integer({ min: 0, max: 1 }),
    limit: fc.integer({ min: 1, max: 4 }),
  }),
  fc.record({
    kind: fc.constant("patch" as const),
    t: fc.integer({ min: 0, max: 7 }),
    w: fc.integer({ min: 0, max: 1 }),
    unsatisfiable: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("cancel" as const), t: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("retry" as const), t: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant("complete" as const), t: fc.integer({ min: 0, max: 7 }) }),
  fc.record({
    kind: fc.constant("capacity" as const),
    w: fc.integer({ min: 0, max: 1 }),
    cpu: fc.constantFrom(1000, 2000, 8000),
  }),
  fc.record({ kind: fc.constant("pause" as const), ms: fc.constantFrom(30, 80) }),
);

describe("admission conditions never contradict a lease or a final state", () => {
  it("random mixes of claims, status writes, admin actions and capacity edits", async () => {
    const totals = { leased: 0, finished: 0 };
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(op, { minLength: 1, maxLength: 3 }), { minLength: 6, maxLength: 12 }),
        async (rounds) => {
          const h = await startHub({ heartbeatGraceSeconds: 3600, conditions: { minIntervalMs: 5, settleMs: 0 } });
          const checker = new Checker();
          const watch = await h.hub.store.watch(undefined, 0, checker.on);
          const api = h.url + API_PREFIX;
          const patch = (path: string, body: unknown) =>
            fetch(api + path, {
              method: "PATCH",
              headers: { "content-type": "application/merge-patch+json" },
              body: JSON.stringify(body),
            }).then((r) => r.status);
          try {
            expect(await registerWorkers(h.url, 2, 4)).toEqual([200, 200]);
            // Odd tasks ask for 4000m: they fit no worker until a capacity edit raises one.
            const tasks = Array.from({ length: 8 }, (_, i) => ({
              task_id: `t${i}`,
              case_id: `c${i}`,
              run_id: "1",
              setting_id: "s",
              required_capability: "linux",
              execution_profile: { placement: "shared", resources: { cpu_millis: i % 2 ? 4000 : 500, memory_mb: 256 } },
              payload: { runner: "noop" },
            }));
            expect(
              (await post(h.url, "/api/tasks/dispatch", { schema_version: 1, operator: "prop", tasks })).status,
            ).toBe(201);
            for (const round of rounds) {
              const replies = await Promise.all(
                round.map(async (o) => {
                  switch (o.kind) {
                    case "claim":
                    case "cancel":
                    case "retry":
                    case "complete":
                      return taskOp(h, o);
                    case "patch": {
                      const now = new Date().toISOString();
                      const lease = {
                        worker: `w${o.w}`,
                        epoch: 1,
                        mode: "pull",
                        leased_at: now,
                        lease_until: new Date(Date.now() + 600_000).toISOString(),
                        placement: "shared",
                        reservation: { cpu_millis: 500, memory_mb: 256, disk_mb: 0, gpu_count: 0 },
                      };
                      const conditions = o.unsatisfiable
                        ? [
                            {
                              type: "Unsatisfiable",
                              status: "True",
                              reason: "exceeds_worker_capacity",
                              message: "written by hand",
                              lastTransitionTime: now,
                            },
                          ]
                        : undefined;
                      return patch(`/tasks/t${o.t}/status`, {
                        status: { state: "leased", attempt: 1, lease, ...(conditions ? { conditions } : {}) },
                      });
                    }
                    case "capacity":
                      return patch(`/workers/w${o.w}`, {
                        spec: { resource_capacity: { cpu_millis: o.cpu, memory_mb: 4096, disk_mb: 0, gpu_count: 0 } },
                      });
                    case "pause":
                      await new Promise((r) => setTimeout(r, o.ms));
                      return 200;
                  }
                }),
              );
              for (const s of replies) expect(s).toBeLessThan(500);
            }
            await new Promise((r) => setTimeout(r, 50));
            await h.hub.cache.waitForRevision(await h.hub.store.revision());
            expect(checker.violations).toEqual([]);
            totals.leased += checker.leasedAfterUnsatisfiable;
            totals.finished += checker.finishedAfterUnsatisfiable;
          } finally {
            watch.stop();
            await h.close();
          }
        },
      ),
      { numRuns: 12 },
    );
    // The mixes did reach the contradiction's doorstep: tasks once unsatisfiable were leased or finished.
    expect(totals.leased + totals.finished).toBeGreaterThan(3);
  }, 180_000);

  it("settleAdmission, on any status: no contradiction left, idempotent, and admissionUnsettled says when it changes something", () => {
    const cond = fc.record({
      type: fc.constantFrom("Admitted", "Unsatisfiable", "Leased", "Succeeded"),
      status: fc.constantFrom("True", "False"),
      reason: fc.constantFrom("Admitted", "WorkerAvailable", "exceeds_worker_capacity"),
      message: fc.constantFrom("admitted on w1", "admitted on w2", "no worker could ever admit this task, even empty"),
      lastTransitionTime: fc.constant("2026-01-01T00:00:00.000Z"),
    });
    const status = fc.record({
      state: fc.constantFrom(...STATES),
      lease: fc.option(fc.record({ worker: fc.constantFrom("w1", "w2") }), { nil: undefined }),
      conditions: fc.uniqueArray(cond, { selector: (c) => c.type, maxLength: 4 }),
    });
    fc.assert(
      fc.property(status, (st) => {
        const before = JSON.stringify(st.conditions);
        const unsettled = admissionUnsettled(st as never);
        const once = settleAdmission(structuredClone(st) as never, "2026-06-01T00:00:00.000Z");
        expect(unsettled).toBe(JSON.stringify(once.conditions ?? []) !== before);
        const c = (type: string) => once.conditions?.find((x) => x.type === type);
        if (!QUEUED.includes(st.state)) {
          expect(c("Unsatisfiable")?.status).not.toBe("True");
          expect(c("Admitted")?.status).not.toBe("False");
          if (st.lease && (st.state === "leased" || st.state === "running"))
            expect(c("Admitted")).toMatchObject({ status: "True", message: `admitted on ${st.lease.worker}` });
        } else expect(JSON.stringify(once.conditions)).toBe(before);
        expect(admissionUnsettled(once)).toBe(false);
        expect(JSON.stringify(settleAdmission(structuredClone(once), "2026-07-01T00:00:00.000Z"))).toBe(
          JSON.stringify(once),
        );
      }),
      { numRuns: 2000 },
    );
  });
});
