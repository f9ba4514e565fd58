// The admission invariants (a worker's reservations never exceed its capacity, and its active
// leases never exceed its limit) under random workers, tasks and lease / release sequences,
// where a lease is granted only when admit() says ok.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { admit, effectiveCapacity, leasesOn, taskView, workerView } from "../../src/admission/index.ts";
import { RESOURCE_FIELDS, type ResourceSpec, type Task, type Worker } from "../../src/resources/types.ts";

const GPU_TYPES = ["a100", "t4"];
const CAPABILITIES = ["linux", "gpu", "*"];

const scaled = (max: number, step: number, min = 0) => fc.integer({ min, max }).map((n) => n * step);
const sometimes = <T>(a: fc.Arbitrary<T>) => fc.option(a, { nil: undefined, freq: 3 });
const mostly = (p: boolean) =>
  fc.oneof({ weight: 7, arbitrary: fc.constant(p) }, { weight: 1, arbitrary: fc.constant(!p) });

// Requests are small and GPUs rare, capacities a few requests wide, so leases both land and collide.
const requestArb: fc.Arbitrary<ResourceSpec> = fc.record(
  {
    cpu_millis: scaled(4, 500),
    memory_mb: scaled(4, 512),
    disk_mb: scaled(2, 1000),
    gpu_count: fc.oneof(
      { weight: 7, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 }) },
    ),
    gpu_types: fc.subarray(GPU_TYPES),
  },
  { requiredKeys: [] },
);

const capacityArb: fc.Arbitrary<ResourceSpec> = fc.record(
  {
    cpu_millis: scaled(6, 1000, 1),
    memory_mb: scaled(12, 512, 1),
    disk_mb: scaled(6, 1000, 1),
    gpu_count: fc.integer({ min: 0, max: 3 }),
    gpu_types: fc.subarray(GPU_TYPES),
  },
  { requiredKeys: [] },
);

const hostArb = fc.record(
  {
    cpu_count: fc.integer({ min: 0, max: 6 }),
    mem_available_mb: scaled(12, 512),
    mem_total_mb: scaled(16, 512),
    disk_available_mb: scaled(6, 1000),
  },
  { requiredKeys: [] },
);

const workerArb = (name: string): fc.Arbitrary<Worker> =>
  fc
    .record({
      max: sometimes(fc.integer({ min: 1, max: 6 })),
      initial: sometimes(fc.integer({ min: 1, max: 6 })),
      capabilities: sometimes(fc.subarray(CAPABILITIES, { minLength: 1 })),
      unschedulable: mostly(false),
      capacity: sometimes(capacityArb),
      registration: sometimes(
        fc.record(
          {
            max_concurrency: fc.integer({ min: 1, max: 6 }),
            capabilities: fc.subarray(CAPABILITIES),
            resource_capacity: capacityArb,
            host_resources: hostArb,
          },
          { requiredKeys: [] },
        ),
      ),
      desired: sometimes(fc.integer({ min: 0, max: 7 })),
      ready: mostly(true),
    })
    .map((g) => ({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Worker",
      metadata: { name },
      spec: {
        ...(g.max !== undefined ? { max_concurrency: g.max } : {}),
        ...(g.initial !== undefined ? { initial_concurrency: g.initial } : {}),
        ...(g.capabilities ? { capabilities: g.capabilities } : {}),
        ...(g.capacity ? { resource_capacity: g.capacity } : {}),
        unschedulable: g.unschedulable,
      },
      status: {
        ...(g.registration ? { registration: g.registration } : {}),
        ...(g.desired !== undefined ? { desired_concurrency: g.desired } : {}),
        conditions: [{ type: "Ready", status: g.ready ? "True" : "False" }],
      },
    }));

const taskArb = (name: string, workerNames: string[]): fc.Arbitrary<Task> =>
  fc
    .record({
      capability: fc.constantFrom("", "", "linux", "linux", "gpu"),
      placement: sometimes(
        fc.oneof(
          { weight: 3, arbitrary: fc.constant("shared" as const) },
          { weight: 1, arbitrary: fc.constant("exclusive" as const) },
        ),
      ),
      resources: sometimes(requestArb),
      excluded: fc.oneof(
        { weight: 4, arbitrary: fc.constant([] as string[]) },
        { weight: 1, arbitrary: fc.subarray(workerNames) },
      ),
    })
    .map((g) => ({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Task",
      metadata: { name },
      spec: {
        required_capability: g.capability,
        ...(g.placement || g.resources
          ? {
              execution_profile: {
                ...(g.placement ? { placement: g.placement } : {}),
                ...(g.resources ? { resources: g.resources } : {}),
              },
            }
          : {}),
      },
      status: { state: "queued", attempt: 1, excluded_workers: g.excluded },
    }));

type Action =
  | { kind: "lease"; t: number; w: number }
  | { kind: "start"; t: number }
  | { kind: "release"; t: number }
  | { kind: "requeue"; t: number }
  | { kind: "heartbeat"; w: number; reported: number };

const actionArb: fc.Arbitrary<Action> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("lease" as const), t: fc.nat(), w: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("start" as const), t: fc.nat() }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("release" as const), t: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("requeue" as const), t: fc.nat() }) },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant("heartbeat" as const),
      w: fc.nat(),
      reported: fc.integer({ min: 0, max: 5 }),
    }),
  },
);

const scenarioArb = fc.integer({ min: 1, max: 3 }).chain((nw) => {
  const names = Array.from({ length: nw }, (_, i) => `w${i}`);
  return fc.record({
    workers: fc.tuple(...names.map((n) => workerArb(n))),
    tasks: fc
      .integer({ min: 1, max: 8 })
      .chain((nt) => fc.tuple(...Array.from({ length: nt }, (_, i) => taskArb(`t${i}`, names)))),
    actions: fc.array(actionArb, { minLength: 5, maxLength: 40 }),
  });
});

// The model below reads the stored resources directly, as the contract states the rules.

const isActive = (t: Task) => t.status?.state === "leased" || t.status?.state === "running";
const activeOn = (name: string, tasks: readonly Task[]) =>
  tasks.filter((t) => isActive(t) && t.status?.lease?.worker === name);
const maxOf = (w: Worker) => Math.max(1, w.spec.max_concurrency ?? w.status?.registration?.max_concurrency ?? 1);
const requestOf = (t: Task): ResourceSpec => t.spec.execution_profile?.resources ?? {};
const placementOf = (t: Task) => t.spec.execution_profile?.placement ?? "shared";
const reservedSum = (active: readonly Task[], f: (typeof RESOURCE_FIELDS)[number]) =>
  active.reduce((s, t) => s + (t.status?.lease?.reservation?.[f] ?? 0), 0);

function invariantsHold(workers: readonly Worker[], tasks: readonly Task[]): string | undefined {
  for (const w of workers) {
    const name = w.metadata.name;
    const active = activeOn(name, tasks);
    const cap = effectiveCapacity(w).capacity;
    for (const f of RESOURCE_FIELDS)
      if (reservedSum(active, f) > cap[f])
        return `${name}: ${f} reserved ${reservedSum(active, f)} > capacity ${cap[f]}`;
    if (active.length > maxOf(w)) return `${name}: ${active.length} active > max_concurrency ${maxOf(w)}`;
    if (active.some((t) => t.status?.lease?.placement === "exclusive") && active.length > 1)
      return `${name}: exclusive lease not alone`;
  }
  return undefined;
}

/** Would leasing t on w break invariant 1 or 2? */
function wouldBreak(t: Task, w: Worker, tasks: readonly Task[]): boolean {
  const active = activeOn(w.metadata.name, tasks);
  const cap = effectiveCapacity(w).capacity;
  const req = requestOf(t);
  if (RESOURCE_FIELDS.some((f) => reservedSum(active, f) + (req[f] ?? 0) > cap[f])) return true;
  if (active.length + 1 > maxOf(w)) return true;
  if (active.some((a) => a.status?.lease?.placement === "exclusive")) return true;
  return placementOf(t) === "exclusive" && active.length > 0;
}

/** The whole rule of RESOURCE_ADMISSION.md plus Loom's readiness, cordon and exclusion checks. */
function contractAdmits(t: Task, w: Worker, tasks: readonly Task[], reported: number): boolean {
  const reg = w.status?.registration;
  const caps = w.spec.capabilities ?? reg?.capabilities ?? [];
  const need = t.spec.required_capability ?? "";
  if (need && !caps.includes(need) && !caps.includes("*")) return false;
  if (t.status?.excluded_workers?.includes(w.metadata.name)) return false;
  if (w.spec.unschedulable) return false;
  if (w.status?.conditions?.find((c) => c.type === "Ready")?.status !== "True") return false;
  const active = activeOn(w.metadata.name, tasks);
  const max = maxOf(w);
  const desired = Math.min(
    Math.max(w.status?.desired_concurrency ?? w.spec.initial_concurrency ?? reg?.initial_concurrency ?? 1, 1),
    max,
  );
  const count = Math.max(reported, active.length);
  if (!(count < Math.min(desired, max))) return false;
  if (placementOf(t) === "exclusive" && count > 0) return false;
  if (active.some((a) => a.status?.lease?.placement === "exclusive")) return false;
  const cap = effectiveCapacity(w).capacity;
  const req = requestOf(t);
  if (RESOURCE_FIELDS.some((f) => reservedSum(active, f) + (req[f] ?? 0) > cap[f])) return false;
  return !((req.gpu_count ?? 0) > 0 && (req.gpu_types ?? []).some((g) => !cap.gpu_types.includes(g)));
}

type Scenario = { workers: Worker[]; tasks: Task[]; actions: Action[] };

/** Replays the actions; `onAdmit` sees every lease attempt before it is applied. */
function replay(
  s: Scenario,
  onAdmit: (ctx: { task: Task; worker: Worker; tasks: Task[]; reported: number; ok: boolean }) => void,
): number {
  const tasks: Task[] = structuredClone(s.tasks);
  const workers = s.workers;
  const reported = new Map<string, number>();
  let granted = 0;
  const violation = invariantsHold(workers, tasks);
  expect(violation).toBeUndefined();
  for (const a of s.actions) {
    const t = tasks[a.kind === "heartbeat" ? 0 : a.t % tasks.length];
    const st = t.status!;
    if (a.kind === "lease") {
      if (st.state !== "queued" && st.state !== "retry_queued") continue;
      const w = workers[a.w % workers.length];
      const rep = reported.get(w.metadata.name) ?? 0;
      const view = workerView(w, leasesOn(w.metadata.name, tasks), { reported_active: rep });
      const tv = taskView(t);
      const d = admit(tv, view);
      onAdmit({ task: t, worker: w, tasks, reported: rep, ok: d.ok });
      expect(d.ok).toBe(d.failures.length === 0);
      expect(d.reason === undefined).toBe(d.ok);
      if (!d.ok) continue;
      st.state = "leased";
      st.lease = {
        worker: w.metadata.name,
        epoch: st.attempt ?? 1,
        leased_at: "2025-01-01T00:00:00Z",
        lease_until: "2025-01-01T00:10:00Z",
        placement: tv.placement,
        reservation: structuredClone(requestOf(t)),
      };
      granted++;
    } else if (a.kind === "start") {
      if (st.state === "leased") st.state = "running";
    } else if (a.kind === "release") {
      // The lease record stays on a finished task, as in v1; only the state releases it.
      if (isActive(t)) st.state = "clean";
    } else if (a.kind === "requeue") {
      if (isActive(t)) {
        st.state = "retry_queued";
        st.attempt = (st.attempt ?? 1) + 1;
        delete st.lease;
      }
    } else {
      reported.set(workers[a.w % workers.length].metadata.name, a.reported);
    }
    expect(invariantsHold(workers, tasks)).toBeUndefined();
  }
  return granted;
}

const RUNS = { numRuns: 300 };

describe("invariants 1 and 2 hold after every step when leases follow admit()", () => {
  it("reservations stay within capacity, counts within max_concurrency, exclusive leases alone", () => {
    let granted = 0;
    fc.assert(
      fc.property(scenarioArb, (s) => {
        granted += replay(s, () => {});
      }),
      RUNS,
    );
    // The generators must actually exercise leasing, or the invariants hold vacuously.
    expect(granted).toBeGreaterThan(RUNS.numRuns / 2);
  });

  it("admit() never says ok when the lease would break an invariant", () => {
    let refusedBreaking = 0;
    fc.assert(
      fc.property(scenarioArb, (s) => {
        replay(s, ({ task, worker, tasks, ok }) => {
          const breaks = wouldBreak(task, worker, tasks);
          expect(ok && breaks).toBe(false);
          if (breaks) refusedBreaking++;
        });
      }),
      RUNS,
    );
    expect(refusedBreaking).toBeGreaterThan(0);
  });
});

describe("admit() is exactly the contract's rule", () => {
  it("agrees with capability AND active < min(desired, max) AND reserved + requested <= capacity (plus exclusivity, readiness, cordon, exclusion, gpu_types)", () => {
    const seen = { ok: 0, refused: 0 };
    fc.assert(
      fc.property(scenarioArb, (s) => {
        replay(s, ({ task, worker, tasks, reported, ok }) => {
          expect(ok).toBe(contractAdmits(task, worker, tasks, reported));
          seen[ok ? "ok" : "refused"]++;
        });
      }),
      RUNS,
    );
    expect(seen.ok).toBeGreaterThan(0);
    expect(seen.refused).toBeGreaterThan(0);
  });

  it("an unresolvable failure is still there when the worker is empty", () => {
    let unresolvable = 0;
    fc.assert(
      fc.property(scenarioArb, (s) => {
        const tasks = s.tasks.map((t) => taskView(t));
        for (const w of s.workers) {
          const empty = workerView(w, [], { reported_active: 0 });
          for (const t of tasks) {
            const d = admit(t, empty);
            const busy = admit(t, {
              ...empty,
              reported_active: 3,
              leases: [{ task: "x", placement: "exclusive", reservation: empty.capacity }],
            });
            for (const f of busy.failures.filter((f) => !f.resolvable)) {
              unresolvable++;
              expect(d.failures.some((g) => g.code === f.code && g.field === f.field)).toBe(true);
            }
          }
        }
      }),
      RUNS,
    );
    expect(unresolvable).toBeGreaterThan(0);
  });
});
