// Queues: membership, quota as an admission check, the store guard's ceiling, and the claim
// walk's fair-share order. One describe per rule of docs/queues.md.
import { describe, expect, it } from "vitest";
import {
  admit,
  explainTask,
  normalise,
  type LeaseView,
  type TaskView,
  type WorkerView,
} from "../../src/admission/index.ts";
import { queueViolations } from "../../src/admission/guard.ts";
import {
  QueueBook,
  amountsOf,
  ceilingBreaches,
  demandOf,
  queueLimits,
  type Amounts,
} from "../../src/admission/queues.ts";
import { convertManifest } from "../../src/resources/manifest.ts";
import { parseDocuments } from "../../src/resources/load.ts";
import { planApply, SOURCE_ANNOTATION } from "../../src/gitops/apply.ts";
import type { StoredObject } from "../../src/store/store.ts";
import type { Queue, Task } from "../../src/resources/types.ts";
import { validateObject } from "../../src/resources/validate.ts";
import { ClaimQueue, shapeKey } from "../../src/scheduler/queue.ts";
import { decayTowards, dominantShare, standingSentence } from "../../src/scheduler/fair-share.ts";

const queueObj = (name: string, spec: Queue["spec"]): Queue => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Queue",
  metadata: { name },
  spec,
});

const book = (queues: Queue[], used: Record<string, Amounts>) =>
  new QueueBook(new Map(queues.map((q) => [q.metadata.name, queueLimits(q)])), new Map(Object.entries(used)));

const worker = (over: Partial<WorkerView> = {}): WorkerView => ({
  name: "w1",
  capabilities: ["linux"],
  capacity: normalise({ cpu_millis: 64000, memory_mb: 65536, disk_mb: 100000, gpu_count: 16, gpu_types: ["a100"] }),
  unknown: [],
  cordoned: false,
  ready: true,
  desired_concurrency: 64,
  max_concurrency: 64,
  reported_active: 0,
  leases: [],
  ...over,
});

const task = (over: Partial<TaskView> = {}): TaskView => ({
  name: "t",
  required_capability: "",
  placement: "shared",
  requests: normalise({ gpu_count: 1 }),
  excluded_workers: [],
  ...over,
});

describe("membership: manifest queue -> campaign spec.queue -> every task's spec.queue", () => {
  const manifest = (extra: Record<string, unknown>) => ({
    schema_version: 1,
    campaign_id: "demo",
    ...extra,
    defaults: { setting_id: "s", run_id: "001" },
    cases: [{ case_id: "a" }, { case_id: "b" }],
  });

  it("copies a manifest's top-level queue into the Campaign and each task", () => {
    const r = convertManifest(manifest({ queue: "team-a" }));
    expect(r.errors).toEqual([]);
    expect(r.campaign?.spec.queue).toBe("team-a");
    expect(r.tasks.map((t) => t.spec.queue)).toEqual(["team-a", "team-a"]);
  });

  it("a manifest naming no queue leaves spec.queue out (the task belongs to default, unchanged from before)", () => {
    const r = convertManifest(manifest({}));
    expect(r.errors).toEqual([]);
    expect(r.campaign?.spec).not.toHaveProperty("queue");
    for (const t of r.tasks) expect(t.spec).not.toHaveProperty("queue");
  });

  it("rejects a queue name that is not a DNS label, naming the field", () => {
    const r = convertManifest(manifest({ queue: "Team A" }));
    expect(r.errors.map((e) => e.field)).toContain("queue");
  });

  it("validates Queue objects against the CRD: bad reclaim and a negative quota are named", () => {
    const bad = { ...queueObj("q", { quota: { gpu_count: -1 }, reclaim: "never" as never }) };
    const fields = validateObject(bad).map((e) => e.field);
    expect(fields).toEqual(expect.arrayContaining(["spec.quota.gpu_count", "spec.reclaim"]));
    expect(
      validateObject(queueObj("q", { quota: { gpu_count: 4, gpu_types: { a100: 2 } }, weight: 2, reclaim: "preempt" })),
    ).toEqual([]);
  });
});

describe("GitOps: a Queue is declared in a file like any kind, and pruned with it", () => {
  const yaml = `apiVersion: loom.dev/v1alpha1
kind: Queue
metadata:
  name: team-a
spec:
  quota: { gpu_count: 4, gpu_types: { a100: 2 } }
  borrowing_limit: { gpu_count: 2 }
  weight: 2
`;
  it("loads, validates and plans a create; pruning the file's Queue deletes it", () => {
    const r = parseDocuments(yaml, "queues.yaml");
    expect(r.errors).toEqual([]);
    expect(r.resources.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(["Queue/team-a"]);
    const plan = planApply([], r.resources, { source: "queues.yaml", prune: true });
    expect(plan.steps.map((s) => `${s.op} ${s.kind}/${s.name}`)).toEqual(["create Queue/team-a"]);
    const stored = {
      ...(plan.steps[0] as { object: StoredObject }).object,
      metadata: { name: "team-a", resourceVersion: "7", annotations: { [SOURCE_ANNOTATION]: "queues.yaml" } },
    };
    const pruned = planApply([stored], [], { source: "queues.yaml", prune: true });
    expect(pruned.steps).toEqual([{ op: "delete", kind: "Queue", name: "team-a", resourceVersion: "7" }]);
  });

  it("a bad Queue file names the field and changes nothing", () => {
    const r = parseDocuments(yaml.replace("weight: 2", "weight: 0"), "queues.yaml");
    expect(r.errors.map((e) => e.field)).toEqual(["spec.weight"]);
  });
});

describe("quota: used + requested <= nominal + borrowable, one more entry in CHECKS", () => {
  const teamA = queueObj("team-a", { quota: { gpu_count: 4 } });

  it("with no Queue objects (no queues view) nothing is limited", () => {
    expect(admit(task({ queue: "team-a" }), worker()).ok).toBe(true);
  });

  it("refuses past nominal with the queue, the dimension and the numbers", () => {
    const w = worker({ queues: { book: book([teamA], { "team-a": { gpu_count: 4 } }), counted: new Set() } });
    const d = admit(task({ queue: "team-a" }), w);
    expect(d.ok).toBe(false);
    expect(d.reasons).toEqual(["queue_quota_exhausted"]);
    expect(d.reason).toBe("resource_reservation_unavailable");
    expect(d.failures[0].message).toBe("queue team-a: gpu_count 4 used + 1 requested > 4 nominal + 0 borrowable");
    expect(explainTask([d])).toBe(
      "0/1 workers admit: 1 queue_quota_exhausted (queue team-a: gpu_count 4 used + 1 requested > 4 nominal + 0 borrowable)",
    );
  });

  it("admits within nominal, and ignores dimensions the quota does not name", () => {
    const w = worker({
      queues: { book: book([teamA], { "team-a": { gpu_count: 3, cpu_millis: 60000 } }), counted: new Set() },
    });
    expect(admit(task({ queue: "team-a", requests: normalise({ gpu_count: 1, cpu_millis: 4000 }) }), w).ok).toBe(true);
  });

  it("a queue with no Queue object is not limited, even when others are", () => {
    const w = worker({ queues: { book: book([teamA], { "team-a": { gpu_count: 4 } }), counted: new Set() } });
    expect(admit(task({}), w).ok).toBe(true); // default has no Queue object
  });

  it("counts leases picked in the same batch (not yet in the book) against the queue", () => {
    const picked: LeaseView = {
      task: "p",
      placement: "shared",
      reservation: normalise({ gpu_count: 1 }),
      queue: "team-a",
    };
    const w = worker({
      leases: [picked],
      queues: { book: book([teamA], { "team-a": { gpu_count: 3 } }), counted: new Set() },
    });
    expect(admit(task({ queue: "team-a" }), w).reasons).toEqual(["queue_quota_exhausted"]);
    const counted = worker({
      leases: [picked],
      queues: { book: book([teamA], { "team-a": { gpu_count: 3 } }), counted: new Set(["p"]) },
    });
    expect(admit(task({ queue: "team-a" }), counted).ok).toBe(true);
  });

  it("borrows what other queues leave unused, up to its borrowing limit", () => {
    const a = queueObj("team-a", { quota: { gpu_count: 4 }, borrowing_limit: { gpu_count: 2 } });
    const b = queueObj("team-b", { quota: { gpu_count: 4 } });
    const view = (usedA: number, usedB: number) =>
      worker({
        queues: {
          book: book([a, b], { "team-a": { gpu_count: usedA }, "team-b": { gpu_count: usedB } }),
          counted: new Set(),
        },
      });
    expect(admit(task({ queue: "team-a" }), view(4, 0)).ok).toBe(true);
    expect(admit(task({ queue: "team-a" }), view(5, 0)).ok).toBe(true);
    const past = admit(task({ queue: "team-a" }), view(6, 0));
    expect(past.reasons).toEqual(["queue_borrowing_limit"]);
    expect(past.failures[0].message).toBe("queue team-a: gpu_count 6 used + 1 requested > 4 nominal + 2 borrowable");
    // team-b uses 3 of its 4: only 1 is left to lend.
    const tight = admit(task({ queue: "team-a" }), view(5, 3));
    expect(tight.reasons).toEqual(["queue_quota_exhausted"]);
    expect(tight.failures[0].message).toBe("queue team-a: gpu_count 5 used + 1 requested > 4 nominal + 1 borrowable");
  });

  it("a lender's lending_limit keeps part of its quota for itself", () => {
    const a = queueObj("team-a", { quota: { gpu_count: 4 }, borrowing_limit: { gpu_count: 4 } });
    const b = queueObj("team-b", { quota: { gpu_count: 4 }, lending_limit: { gpu_count: 1 } });
    const w = worker({ queues: { book: book([a, b], { "team-a": { gpu_count: 5 } }), counted: new Set() } });
    expect(admit(task({ queue: "team-a" }), w).failures[0]?.message).toBe(
      "queue team-a: gpu_count 5 used + 1 requested > 4 nominal + 1 borrowable",
    );
  });

  it("reclaim by waiting: a lender's queued work is not lent, so borrowing of it stops while it waits", () => {
    const a = queueObj("team-a", { quota: { gpu_count: 4 }, borrowing_limit: { gpu_count: 4 } });
    const b = queueObj("team-b", { quota: { gpu_count: 4 } });
    const limits = new Map([a, b].map((q) => [q.metadata.name, queueLimits(q)]));
    const used = new Map(Object.entries({ "team-a": { gpu_count: 6 } }));
    // team-b idle: team-a may hold all 4 of it borrowed (it holds 2).
    expect(new QueueBook(limits, used).borrowable("team-a", "gpu_count")).toBe(4);
    expect(
      admit(task({ queue: "team-a" }), worker({ queues: { book: new QueueBook(limits, used), counted: new Set() } }))
        .ok,
    ).toBe(true);
    // team-b has 3 GPUs of work queued: only 1 is left to lend, and team-a already holds 2.
    const book = new QueueBook(limits, used, new Map(Object.entries({ "team-b": { gpu_count: 3 } })));
    expect(book.borrowable("team-a", "gpu_count")).toBe(1);
    const d = admit(task({ queue: "team-a" }), worker({ queues: { book, counted: new Set() } }));
    expect(d.failures[0]?.message).toBe("queue team-a: gpu_count 6 used + 1 requested > 4 nominal + 1 borrowable");
    // team-b's own work is not held back: it is within its quota.
    expect(admit(task({ queue: "team-b" }), worker({ queues: { book, counted: new Set() } })).ok).toBe(true);
  });

  it("a request larger than nominal + borrowing limit never fits its queue (unresolvable)", () => {
    const w = worker({ queues: { book: book([teamA], {}), counted: new Set() } });
    const d = admit(task({ queue: "team-a", requests: normalise({ gpu_count: 5 }) }), w);
    expect(d.unresolvable).toBe(true);
  });

  it("GPUs by type count against every type the task accepts", () => {
    expect(demandOf(normalise({ gpu_count: 2, gpu_types: ["a100", "h100"] }))).toEqual({
      gpu_count: 2,
      "gpu_types.a100": 2,
      "gpu_types.h100": 2,
    });
    const typed = queueObj("team-a", { quota: { gpu_types: { a100: 2 } } });
    expect(amountsOf(typed.spec.quota)).toEqual({ "gpu_types.a100": 2 });
    const w = worker({ queues: { book: book([typed], { "team-a": { "gpu_types.a100": 2 } }), counted: new Set() } });
    expect(
      admit(task({ queue: "team-a", requests: normalise({ gpu_count: 1, gpu_types: ["a100"] }) }), w).failures[0]
        ?.message,
    ).toBe("queue team-a: gpu_types.a100 2 used + 1 requested > 2 nominal + 0 borrowable");
    expect(admit(task({ queue: "team-a", requests: normalise({ gpu_count: 1 }) }), w).ok).toBe(true);
  });
});

describe("the store guard: no lease may take a queue past nominal + borrowing limit", () => {
  const a = queueLimits(queueObj("team-a", { quota: { gpu_count: 4 }, borrowing_limit: { gpu_count: 1 } }));

  it("breaches only past the hard ceiling, whatever the pool", () => {
    expect(ceilingBreaches(a, { gpu_count: 4 }, { gpu_count: 1 })).toEqual([]);
    expect(ceilingBreaches(a, { gpu_count: 5 }, { gpu_count: 1 })).toHaveLength(1);
  });

  it("queueViolations names the queue and the numbers; no Queue object, no limit", () => {
    const added = {
      worker: "w1",
      task: "t",
      lease: { task: "t", placement: "shared" as const, reservation: normalise({ gpu_count: 1 }), queue: "team-a" },
    };
    const q = queueObj("team-a", { quota: { gpu_count: 4 }, borrowing_limit: { gpu_count: 1 } });
    expect(queueViolations(q, added, { gpu_count: 4 })).toEqual([]);
    const causes = queueViolations(q, added, { gpu_count: 5 });
    expect(causes).toEqual([
      {
        field: "spec.queue",
        message: 'queue "team-a": gpu_count 5 used + 1 requested > 4 nominal + 1 borrowing limit',
      },
    ]);
    expect(queueViolations(undefined, added, { gpu_count: 99 })).toEqual([]);
  });
});

describe("fair share: weighted dominant share, decayed over a half-life", () => {
  const fleet = normalise({ cpu_millis: 10000, memory_mb: 1000, gpu_count: 0 });

  it("is the largest fraction of the fleet in any dimension, over the weight", () => {
    expect(dominantShare({ cpu_millis: 5000, memory_mb: 100 }, fleet, 1)).toBe(0.5);
    expect(dominantShare({ cpu_millis: 1000, memory_mb: 800 }, fleet, 2)).toBe(0.4);
    expect(dominantShare({ gpu_count: 3 }, fleet, 1)).toBe(0); // the fleet has no GPUs: not a dimension
  });

  it("decays: a stopped queue's average halves every half-life; a steady one converges to its usage", () => {
    const h = 60_000;
    expect(decayTowards({ cpu_millis: 800 }, {}, h, h).cpu_millis).toBeCloseTo(400);
    expect(decayTowards({ cpu_millis: 800 }, {}, 2 * h, h).cpu_millis).toBeCloseTo(200);
    expect(decayTowards({}, { cpu_millis: 800 }, 20 * h, h).cpu_millis).toBeCloseTo(800, 2);
  });

  it("says who goes first", () => {
    expect(
      standingSentence([
        { queue: "team-a", share: 0.31 },
        { queue: "team-b", share: 0.62 },
      ]),
    ).toBe("team-b has share 0.62, team-a 0.31: team-a goes first");
  });
});

describe("claim order across queues: lowest rank first, then priority and arrival", () => {
  const mk = (name: string, queue: string | undefined, priority = 0, created = "2026-01-01T00:00:00Z"): Task => ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Task",
    metadata: { name, creationTimestamp: created },
    spec: { priority, ...(queue ? { queue } : {}), execution_profile: { resources: { cpu_millis: 1000 } } },
    status: { state: "queued" },
  });

  it("without queues the shape key is what it was", () => {
    expect(shapeKey(mk("x", undefined))).toBe(JSON.stringify(["", "shared", 1000, 0, 0, 0, [], []]));
  });

  const order = (q: ClaimQueue, n: number): string[] => {
    const walk = q.walk(["linux"]);
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      const next = walk.next();
      if (!next) break;
      out.push(next.entry.name);
      walk.take();
    }
    walk.close();
    return out;
  };

  it("with every rank equal it is claim order alone (priority, then arrival)", () => {
    const q = new ClaimQueue();
    q.upsert(mk("a1", "a", 0, "2026-01-01T00:00:01Z"));
    q.upsert(mk("b1", "b", 5, "2026-01-01T00:00:02Z"));
    q.upsert(mk("a2", "a", 0, "2026-01-01T00:00:03Z"));
    expect(order(q, 3)).toEqual(["b1", "a1", "a2"]);
  });

  it("the queue below its share goes first, whatever the other queue's priorities; what a walk takes counts", () => {
    const q = new ClaimQueue();
    for (let i = 0; i < 4; i++) q.upsert(mk(`a${i}`, "a", 0, `2026-01-01T00:00:0${i}Z`));
    for (let i = 0; i < 4; i++) q.upsert(mk(`b${i}`, "b", 9, `2026-01-01T00:00:0${i}Z`));
    // a holds nothing, b holds 2000: a goes first until what it takes in this walk passes b.
    const held: Record<string, number> = { a: 0, b: 2000 };
    q.rank = (queue, extra) => (held[queue] + (extra.cpu_millis ?? 0)) / 10000;
    expect(order(q, 6)).toEqual(["a0", "a1", "b0", "a2", "b1", "a3"]);
  });
});
