// The reply schemas lose nothing: fastify's serializer writes only what a schema names (and
// coerces what it names to the named type), so each fixed-shape reply of a real Hub is
// serialised through its route's schema and must read back exactly as JSON.stringify writes it.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import fastJsonStringify from "fast-json-stringify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { replySchema } from "../../src/api/reply-schemas.ts";
import {
  parseClaim,
  parseDispatch,
  parseFail,
  parseHeartbeat,
  parseRegister,
  parseRenew,
  parseStart,
} from "../../src/protocol/parse.ts";
import type { REPLIES } from "../../src/protocol/schemas.ts";
import { writeZipFile } from "../../src/results/zip.ts";
import { eventually, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
beforeAll(async () => {
  h = await startHub();
});
afterAll(async () => {
  await h?.close();
});

/** The reply as the route's serializer writes it, read back. */
function throughSchema(name: keyof typeof REPLIES, reply: unknown, status = 200): unknown {
  const schema = (replySchema(name, status).schema.response as Record<number, object>)[status];
  return JSON.parse(fastJsonStringify(schema)(reply));
}

function expectLossless(name: keyof typeof REPLIES, reply: unknown, status = 200) {
  expect(throughSchema(name, reply, status)).toEqual(JSON.parse(JSON.stringify(reply)));
}

describe("replies through their schemas", () => {
  it("every Runner API and data API reply keeps every field and value", async () => {
    const s = h.hub.scheduler;
    expectLossless(
      "register",
      await s.register(
        parseRegister(
          registerBody("w1", {
            max_concurrency: 2,
            initial_concurrency: 2,
            resource_capacity: { cpu_millis: 2000, memory_mb: 1024, disk_mb: 1000, gpu_count: 1, gpu_types: ["t4"] },
          }),
        ),
      ),
    );
    expectLossless(
      "heartbeat",
      s.heartbeat(parseHeartbeat({ worker_id: "w1", current_runs: [], health: { phase: "idle" } })),
    );
    expectLossless("heartbeat", s.heartbeat(parseHeartbeat({ worker_id: "nobody", current_runs: [] })));
    const profile = (resources: object, placement = "shared") => ({ execution_profile: { placement, resources } });
    const out = await s.dispatch(
      parseDispatch({
        schema_version: 1,
        tasks: [
          {
            task_id: "small",
            case_id: "c1",
            payload: {
              runner: "noop",
              source: { type: "git", url: "https://example.org/r.git", commit: "a".repeat(40) },
              components: { a: 1 },
            },
            ...profile({ cpu_millis: 1500, memory_mb: 512 }),
          },
          { task_id: "waits", payload: { runner: "noop" }, ...profile({ cpu_millis: 1000, memory_mb: 256 }) },
          { task_id: "gpu", payload: { runner: "noop" }, ...profile({ gpu_count: 1, gpu_types: ["a100"] }) },
        ],
      }),
    );
    expect(out.status).toBe(201);
    expectLossless("dispatch", out.body, 201);
    const again = await s.dispatch(parseDispatch({ schema_version: 1, case_ids: ["c9"] }));
    expectLossless("dispatch", again.body, 201);
    const claim = await eventually(async () => {
      const r = await s.claim(parseClaim({ worker_id: "w1", limit: 1 }));
      return r.tasks.length ? r : undefined;
    }, "a claim to lease a task");
    expect(claim.tasks[0].task_id).toBe("small");
    expectLossless("claim", claim);
    // A full worker's claim: no tasks, and no resource fields.
    expectLossless("set-worker-concurrency", await s.setDesiredConcurrency("w1", 1, "test"));
    const full = await s.claim(parseClaim({ worker_id: "w1", limit: 4 }));
    expect(full.tasks).toEqual([]);
    expect(full).not.toHaveProperty("available_resources");
    expectLossless("claim", full);
    expectLossless("lease", await s.start(parseStart({ worker_id: "w1", task_id: "small" })));
    expectLossless("lease", await s.renew(parseRenew({ worker_id: "w1", task_id: "small", lease_seconds: 120 })));
    // Queued behind a lease (blocking leases, suggestions) and never satisfiable (a set shortfall).
    for (const t of ["waits", "gpu"]) {
      const a = s.taskAdmission(t);
      expect(a.workers.length).toBe(1);
      expectLossless("task-admission", a);
    }
    expect(s.taskAdmission("gpu").workers[0].shortfalls).toHaveProperty("gpu_types");
    expectLossless("worker-capacity", s.workerCapacity());
    expectLossless("nominations", s.nominations());
    // A result with a verdict, then a failure report for the task it ended: stale, ignored.
    const zip = join(h.dir, "attempt-001.zip");
    const bytes = await writeZipFile(
      [{ name: "worker-result.json", data: JSON.stringify({ exit_code: 0, verdict: "clean" }) }],
      zip,
    );
    const sha256 = createHash("sha256")
      .update(await readFile(zip))
      .digest("hex");
    const uploaded = await s.upload({ taskId: "small", workerId: "w1" }, { path: zip, bytes, sha256 });
    expect(uploaded.verdict).toBe("clean");
    expectLossless("upload", uploaded, 201);
    expectLossless("lease", await s.fail(parseFail({ worker_id: "w1", task_id: "small" })));
    const next = await eventually(
      async () => (await s.claim(parseClaim({ worker_id: "w1", limit: 1 }))).tasks[0],
      "the next claim",
    );
    expectLossless(
      "lease",
      await s.fail(parseFail({ worker_id: "w1", task_id: next.task_id, error: { type: "boom", detail: "x" } })),
    );
    expectLossless("lease", await s.cancel("gpu"));
    expectLossless("lease", await s.retry("gpu", false));
    expectLossless("expire-leases", await s.expireLeases());
  });

  it("a field the schema does not name would be dropped, so the check above can fail", () => {
    // The serializer's rule the schemas guard against: an object without additionalProperties keeps only what it names.
    const closed = { type: "object", properties: { a: { type: "number" } } } as const;
    expect(JSON.parse(fastJsonStringify(closed)({ a: 1, b: 2 }))).toEqual({ a: 1 });
    expect(
      throughSchema("task-admission", {
        task_id: "t",
        workers: [{ worker_id: "w", ok: false, capacity: { cpu_millis: 1 } }],
        later: 1,
      }),
    ).toEqual({ task_id: "t", workers: [{ worker_id: "w", ok: false, capacity: { cpu_millis: 1 } }], later: 1 });
  });
});
