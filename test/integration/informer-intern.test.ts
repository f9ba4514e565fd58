// The informer shares the parts its objects repeat (store/intern.ts): equal execution
// profiles, payloads and conditions are one frozen instance, values stay as stored.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, expect, it } from "vitest";
import { Informer } from "../../src/store/cache.ts";
import { Interner } from "../../src/store/intern.ts";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite.ts";
import type { StoredObject } from "../../src/store/store.ts";
import { task, worker } from "../store-contract.ts";

let dir: string;
let store: SqliteStore;
let inf: Informer | undefined;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-intern-"));
  store = openSqliteStore(join(dir, "loom.db"));
});
afterEach(async () => {
  inf?.stop();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const profile = { placement: "shared", resources: { cpu_millis: 250, memory_mb: 512 } };
const condition = {
  type: "Admitted",
  status: "False",
  reason: "NoWorkers",
  message: "no workers are declared or registered",
  lastTransitionTime: "2030-01-01T00:00:00Z",
};

it("tasks listed and watched share equal profiles, payloads and conditions, frozen, with their values unchanged", async () => {
  const big = { runner: "noop", blob: "x".repeat(600) };
  await store.create(task("t1", { execution_profile: profile, payload: { runner: "noop" } }));
  await store.create(task("t2", { execution_profile: profile, payload: big }));
  inf = new Informer(store, ["Task", "Worker"]);
  await inf.start();
  const t3 = await store.create(task("t3", { execution_profile: { ...profile }, payload: big }));
  await inf.waitForRevision(Number(t3.metadata.resourceVersion));
  const [a, b, c] = ["t1", "t2", "t3"].map((n) => inf!.get("Task", n)!);
  expect(a.spec.execution_profile).toBe(b.spec.execution_profile);
  expect(c.spec.execution_profile).toBe(a.spec.execution_profile);
  expect(Object.isFrozen(a.spec.execution_profile!.resources)).toBe(true);
  // A payload too large to be shared often is left as each task's own.
  expect(b.spec.payload).not.toBe(c.spec.payload);
  expect(Object.isFrozen(b.spec.payload)).toBe(false);
  // Values are exactly what the store holds.
  for (const t of [a, b, c]) expect(t).toEqual(await store.get("Task", t.metadata.name));
  // A write to a shared part cannot reach the other tasks: it throws at the writer.
  expect(() => {
    (a.spec.execution_profile!.resources as { cpu_millis: number }).cpu_millis = 1;
  }).toThrow(TypeError);
  expect(c.spec.execution_profile!.resources!.cpu_millis).toBe(250);

  // Status writes: equal conditions become one instance; a Worker's status gains no field.
  for (const n of ["t1", "t2"]) {
    const cur = inf.get("Task", n)!;
    await store.updateStatus({ ...cur, status: { state: "queued", conditions: [{ ...condition }] } });
  }
  const w = await store.create({ ...worker("w1"), status: { desired_concurrency: 1 } });
  await inf.waitForRevision(Number(w.metadata.resourceVersion));
  expect(inf.get("Task", "t1")!.status!.conditions![0]).toBe(inf.get("Task", "t2")!.status!.conditions![0]);
  expect(Object.keys(inf.get("Worker", "w1")!.status!)).toEqual(["desired_concurrency"]);

  // A task out of the queue keeps its conditions as its own: they name its lease and times.
  let last = 0;
  for (const n of ["t1", "t2"]) {
    const cur = inf.get("Task", n)!;
    const out = await store.updateStatus({ ...cur, status: { state: "returned", conditions: [{ ...condition }] } });
    last = Number(out.metadata.resourceVersion);
  }
  await inf.waitForRevision(last);
  const [d, e] = ["t1", "t2"].map((n) => inf!.get("Task", n)!.status!.conditions![0]);
  expect(d).toEqual(e);
  expect(d).not.toBe(e);
  expect(Object.isFrozen(d)).toBe(false);
});

it("the interner leaves absent fields absent and large subtrees alone", () => {
  const i = new Interner();
  const o = { kind: "Event", metadata: { name: "e" } } as StoredObject;
  i.object(o);
  expect(Object.keys(o)).toEqual(["kind", "metadata"]);
  expect(Object.keys(o.metadata)).toEqual(["name"]);
  const big = { a: "y".repeat(600) };
  expect(i.subtree(big)).toBe(big);
  expect(Object.isFrozen(big)).toBe(false);
  const small = { a: 1 };
  expect(i.subtree({ a: 1 })).toBe(i.subtree(small));
});

it("a write that leaves the spec alone keeps the cached spec; a spec change takes the new one", () => {
  const i = new Interner();
  const big = { runner: "noop", blob: "z".repeat(600) };
  const stored = task("t1", { payload: big });
  const meta = { ...stored.metadata, uid: "u1", generation: 1, resourceVersion: "5" };
  const decode = (o: StoredObject) => JSON.parse(JSON.stringify(o)) as StoredObject;
  const old = decode({ ...stored, metadata: meta });
  i.object(old);
  // A status write, decoded from the store: same uid and generation, so the spec is the cached one.
  const next = decode({ ...stored, metadata: { ...meta, resourceVersion: "6" }, status: { state: "leased" } });
  i.object(next, old);
  expect(next.spec).toBe(old.spec);
  // The spec changed (the store raised the generation): the new spec stays.
  const changed = decode({
    ...stored,
    spec: { ...(stored.spec as Record<string, unknown>), priority: 3 },
    metadata: { ...meta, generation: 2, resourceVersion: "7" },
  });
  i.object(changed, next);
  expect(changed.spec).not.toBe(next.spec);
  expect((changed.spec as { priority: number }).priority).toBe(3);
  // Another object under the same name (deleted and created again): its own spec.
  const again = decode({ ...stored, metadata: { ...meta, uid: "u2", resourceVersion: "8" } });
  i.object(again, changed);
  expect(again.spec).not.toBe(changed.spec);
  expect(again.spec).toEqual(stored.spec);
});
