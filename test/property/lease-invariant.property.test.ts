// The admission invariant at every revision, whatever path writes the lease: random mixes of
// pull claims, status-subresource writes, admin cancels and retries, completions and
// capacity edits run concurrently against a real Hub; an independent checker follows the
// store's watch and, at every revision that adds a lease to a worker, sums that worker's
// leases by hand against its capacity, its max_concurrency and exclusivity.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import type { StoredObject, WatchEvent } from "../../src/store/store.ts";
import { post, startHub } from "../support/hub.ts";
import { registerWorkers, taskOp } from "../support/task-ops.ts";

const DIMS = ["cpu_millis", "memory_mb"] as const;
type Lease = { worker: string; placement: string; reservation: Record<string, number> };

function leaseOf(t: StoredObject | undefined): Lease | undefined {
  const st = t?.status as any;
  return st && (st.state === "leased" || st.state === "running") && st.lease ? st.lease : undefined;
}

/** Follows the event stream and records every revision at which a newly added lease breaks a limit. */
class Checker {
  workers = new Map<string, any>();
  tasks = new Map<string, StoredObject>();
  violations: string[] = [];
  added = 0;
  on = (ev: WatchEvent) => {
    try {
      this.apply(ev);
    } catch (e) {
      this.violations.push(`rev ${ev.revision}: checker failed: ${(e as Error).message}`);
    }
  };
  /** What the inventory declares wins; otherwise what the Runner registered. */
  limits(w: any) {
    const reg = w.status?.registration ?? {};
    const cap = (d: string) => w.spec?.resource_capacity?.[d] ?? reg.resource_capacity?.[d];
    return { cap, max: w.spec?.max_concurrency ?? reg.max_concurrency };
  }
  apply(ev: WatchEvent) {
    const o = ev.object;
    if (o.kind === "Worker") {
      if (ev.type === "DELETED") this.workers.delete(o.metadata.name);
      else this.workers.set(o.metadata.name, o);
      return;
    }
    if (o.kind !== "Task") return;
    const before = leaseOf(this.tasks.get(o.metadata.name));
    if (ev.type === "DELETED") this.tasks.delete(o.metadata.name);
    else this.tasks.set(o.metadata.name, o);
    const after = ev.type === "DELETED" ? undefined : leaseOf(o);
    if (
      !after ||
      (before &&
        before.worker === after.worker &&
        JSON.stringify(before.reservation) === JSON.stringify(after.reservation) &&
        before.placement === after.placement)
    )
      return;
    this.added++;
    const w = this.workers.get(after.worker);
    if (!w)
      return void this.violations.push(`rev ${ev.revision}: ${o.metadata.name} leased on missing ${after.worker}`);
    const held = [...this.tasks.values()].map(leaseOf).filter((l): l is Lease => l?.worker === after.worker);
    const { cap, max } = this.limits(w);
    for (const d of DIMS) {
      const sum = held.reduce((s, l) => s + (l.reservation?.[d] ?? 0), 0);
      if (typeof cap(d) !== "number" || sum > cap(d))
        this.violations.push(`rev ${ev.revision}: ${after.worker} ${d} ${sum} > ${cap(d)}`);
    }
    if (typeof max !== "number" || held.length > max)
      this.violations.push(`rev ${ev.revision}: ${after.worker} ${held.length} leases > max ${max}`);
    if (held.length > 1 && held.some((l) => l.placement === "exclusive"))
      this.violations.push(`rev ${ev.revision}: ${after.worker} exclusive lease not alone`);
  }
}

const op = fc.oneof(
  fc.record({
    kind: fc.constant("claim" as const),
    w: fc.integer({ min: 0, max: 2 }),
    limit: fc.integer({ min: 1, max: 4 }),
  }),
  fc.record({
    kind: fc.constant("patch" as const),
    t: fc.integer({ min: 0, max: 11 }),
    w: fc.integer({ min: 0, max: 3 }),
    cpu: fc.constantFrom(0, 500, 1000, 2000),
    exclusive: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("cancel" as const), t: fc.integer({ min: 0, max: 11 }) }),
  fc.record({ kind: fc.constant("retry" as const), t: fc.integer({ min: 0, max: 11 }) }),
  fc.record({ kind: fc.constant("complete" as const), t: fc.integer({ min: 0, max: 11 }) }),
  fc.record({
    kind: fc.constant("capacity" as const),
    w: fc.integer({ min: 0, max: 2 }),
    cpu: fc.constantFrom(500, 1000, 2000, 4000),
  }),
);

describe("the lease invariant holds at every revision, on every path", () => {
  it("random concurrent mixes of claims, status writes, admin actions and capacity edits", async () => {
    let added = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(op, { minLength: 1, maxLength: 4 }), { minLength: 5, maxLength: 12 }),
        async (rounds) => {
          const h = await startHub({ heartbeatGraceSeconds: 3600 });
          const checker = new Checker();
          const watch = await h.hub.store.watch(undefined, 0, checker.on);
          const api = h.url + API_PREFIX;
          const send = (path: string, method: string, body: unknown, type = "application/json") =>
            fetch(api + path, { method, headers: { "content-type": type }, body: JSON.stringify(body) }).then(
              async (r) => ({ status: r.status, text: await r.text() }),
            );
          try {
            expect(await registerWorkers(h.url, 3, 2)).toEqual([200, 200, 200]);
            const tasks = Array.from({ length: 12 }, (_, i) => ({
              task_id: `t${i}`,
              case_id: `c${i}`,
              run_id: "1",
              setting_id: "s",
              required_capability: "linux",
              execution_profile: {
                placement: i % 5 === 0 ? "exclusive" : "shared",
                resources: { cpu_millis: (i % 3) * 500, memory_mb: 512 },
              },
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
                      const lease = {
                        worker: `w${o.w}`,
                        epoch: 1,
                        mode: "pull",
                        leased_at: new Date().toISOString(),
                        lease_until: new Date(Date.now() + 600_000).toISOString(),
                        placement: o.exclusive ? "exclusive" : "shared",
                        reservation: { cpu_millis: o.cpu, memory_mb: 512, disk_mb: 0, gpu_count: 0 },
                      };
                      return (
                        await send(
                          `/tasks/t${o.t}/status`,
                          "PATCH",
                          { status: { state: "leased", attempt: 1, lease } },
                          "application/merge-patch+json",
                        )
                      ).status;
                    }
                    case "capacity": {
                      return (
                        await send(
                          `/workers/w${o.w}`,
                          "PATCH",
                          {
                            spec: {
                              resource_capacity: { cpu_millis: o.cpu, memory_mb: 4096, disk_mb: 0, gpu_count: 0 },
                            },
                          },
                          "application/merge-patch+json",
                        )
                      ).status;
                    }
                  }
                }),
              );
              // Refusals are expected; a server error is not.
              for (const s of replies) expect(s).toBeLessThan(500);
            }
            await h.hub.cache.waitForRevision(await h.hub.store.revision());
            await new Promise((r) => setTimeout(r, 20));
            expect(checker.violations).toEqual([]);
            added += checker.added;
          } finally {
            watch.stop();
            await h.close();
          }
        },
      ),
      { numRuns: 12 },
    );
    // The mixes did exercise the guard: leases were added along the way.
    expect(added).toBeGreaterThan(12);
  }, 120_000);
});
