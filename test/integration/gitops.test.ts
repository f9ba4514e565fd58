// GitOps file sync over a real SQLite store and real files: each file is applied whole or
// not at all, what a file stops declaring is pruned by the rules of its kind, and a bad
// file changes nothing and is reported.
import { mkdtemp, mkdir, rename, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GitopsSync, PRUNED_ANNOTATION, SOURCE_ANNOTATION, planApply } from "../../src/gitops/index.ts";
import type { LoomEvent } from "../../src/resources/meta.ts";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite.ts";
import type { StoredObject } from "../../src/store/store.ts";

let dir: string;
let store: SqliteStore;
let events: LoomEvent[];
let logs: { level: string; msg: string }[];
const syncs: GitopsSync[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-gitops-"));
  await mkdir(join(dir, "repo"));
  store = openSqliteStore(join(dir, "loom.db"));
  events = [];
  logs = [];
});
afterEach(async () => {
  for (const s of syncs.splice(0)) await s.close();
  await store.close();
  await rm(dir, { recursive: true, force: true });
});

const repo = (...p: string[]) => join(dir, "repo", ...p);

async function started(paths = [repo()]): Promise<GitopsSync> {
  const s = new GitopsSync({
    store,
    paths,
    recordEvent: (e) => events.push(e),
    log: (level, msg) => logs.push({ level, msg }),
    debounceMs: 50,
  });
  syncs.push(s);
  await s.start();
  return s;
}

async function stop(s: GitopsSync): Promise<void> {
  syncs.splice(syncs.indexOf(s), 1);
  await s.close();
}

/** Poll an async condition with a deadline; never asserts on timing. */
async function until(check: () => Promise<boolean>, what: string, timeoutMs = 5000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

type W = { id: string; cpu?: number; extra?: string };
const inventory = (workers: W[]) =>
  [
    "inventory_version: 1",
    "connection_defaults: {host: 127.0.0.1, connection_mode: prestarted, capabilities: [linux]}",
    "workers:",
    ...workers.map(
      (w) =>
        `  - worker_id: ${w.id}\n    max_concurrency: 2\n    initial_concurrency: 1\n    resource_capacity: {cpu_millis: ${w.cpu ?? 2000}, memory_mb: 2048}${w.extra ? `\n    ${w.extra}` : ""}`,
    ),
  ].join("\n") + "\n";

const manifest = (id: string) =>
  `schema_version: 1\ncampaign_id: ${id}\ndefaults: {setting_id: s, run_id: "1", runner: noop}\ncases:\n  - case_id: a\n  - case_id: b\n`;

const taskDoc = (name: string) => `apiVersion: loom.dev/v1alpha1
kind: Task
metadata: {name: ${name}, labels: {team: qa}}
spec:
  case_id: ${name}
  setting_id: s
  run_id: "1"
  required_capability: linux
  execution_profile: {placement: shared, resources: {cpu_millis: 100}}
  payload: {runner: noop}
`;

const get = (kind: string, name: string) => store.get(kind, name);
const spec = (o: StoredObject | undefined) => o?.spec as Record<string, any>;
const ofReason = (reason: string, file?: string) =>
  events.filter((e) => e.reason === reason && (file === undefined || e.object.metadata.name === file));

/** A lease on `worker`, written the way the scheduler writes one: status only. */
async function leaseTask(name: string, worker: string): Promise<StoredObject> {
  // The store refuses a lease on a worker that does not exist.
  if (!(await get("Worker", worker)))
    await store.create({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Worker",
      metadata: { name: worker },
      spec: { max_concurrency: 4 },
    });
  const t =
    (await get("Task", name)) ??
    (await store.create({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Task",
      metadata: { name },
      spec: { campaign_id: "c", execution_profile: { placement: "shared" } },
    }));
  const now = new Date().toISOString();
  return store.updateStatus({
    ...t,
    status: {
      state: "running",
      attempt: 1,
      lease: { worker, epoch: 1, leased_at: now, lease_until: new Date(Date.now() + 600_000).toISOString() },
    },
  });
}
const finish = async (name: string) =>
  store.updateStatus({ ...(await get("Task", name))!, status: { state: "clean", attempt: 1 } });

describe("initial sync", () => {
  it("creates the Workers, Campaigns and Tasks the files declare, each marked with its file", async () => {
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1" }, { id: "w2", cpu: 4000 }]));
    await mkdir(repo("campaigns"));
    await writeFile(repo("campaigns", "nightly.yaml"), manifest("nightly"));
    await writeFile(repo("tasks.yaml"), taskDoc("adhoc"));
    await writeFile(repo(".hidden.yaml"), inventory([{ id: "hidden" }]));
    await writeFile(repo("notes.txt"), "not an input");
    await started();

    const w2 = await get("Worker", "w2");
    expect(spec(w2).resource_capacity).toEqual({ cpu_millis: 4000, memory_mb: 2048 });
    expect(w2?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("workers.yaml"));
    expect(w2?.status).toBeUndefined();
    const c = await get("Campaign", "nightly");
    expect(c?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("campaigns", "nightly.yaml"));
    expect(c?.metadata.labels?.["loom.dev/campaign"]).toBe("nightly");
    const t = await get("Task", "adhoc");
    expect(t?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("tasks.yaml"));
    expect(t?.metadata.labels).toEqual({ team: "qa" });
    expect(t?.status).toEqual({ state: "queued", attempt: 1, conditions: [] });
    // The campaign's tasks are its controller's to create; hidden files are not inputs.
    expect((await store.list("Task")).items.map((o) => o.metadata.name)).toEqual(["adhoc"]);
    expect(await get("Worker", "hidden")).toBeUndefined();
    expect(ofReason("FileRejected")).toEqual([]);
  });

  it("a second sync of unchanged files writes nothing", async () => {
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1" }]));
    await writeFile(repo("tasks.yaml"), taskDoc("adhoc"));
    const s = await started();
    const rev = await store.revision();
    const report = await s.syncNow();
    expect(report.files.map((f) => f.outcome)).toEqual(["unchanged", "unchanged"]);
    expect(await store.revision()).toBe(rev);
  });
});

describe("edits", () => {
  it("a worker's new resource_capacity reaches the store through the watcher", async () => {
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1", cpu: 2000 }]));
    await started();
    const before = await get("Worker", "w1");
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1", cpu: 6000 }]));
    await until(async () => spec(await get("Worker", "w1"))?.resource_capacity?.cpu_millis === 6000, "capacity update");
    const after = await get("Worker", "w1");
    expect(after?.metadata.uid).toBe(before?.metadata.uid);
    expect(after?.metadata.generation).toBe((before?.metadata.generation ?? 0) + 1);
    expect(ofReason("FileApplied", repo("workers.yaml")).length).toBeGreaterThan(0);
  });

  it("a file that does not parse, then one that does not validate, changes nothing and is reported; fixed, it applies", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1", cpu: 2000 }, { id: "w2" }]));
    const s = await started();
    const before = await store.list("Worker");

    // Bad YAML, with an edit that would otherwise apply.
    await writeFile(file, inventory([{ id: "w1", cpu: 3000 }]) + "  - worker_id: [unclosed\n");
    let report = await s.syncNow();
    expect(report.files[0]).toMatchObject({ file, outcome: "rejected" });
    expect((await store.list("Worker")).items).toEqual(before.items);
    const yamlEvent = ofReason("FileRejected", file).at(-1)!;
    expect(yamlEvent.type).toBe("Warning");
    expect(yamlEvent.object).toMatchObject({ apiVersion: "v1", kind: "File", metadata: { name: file } });
    expect(yamlEvent.message).toMatch(/invalid YAML/);
    expect(logs.some((l) => l.level === "warn" && l.msg.includes(file) && l.msg.includes("invalid YAML"))).toBe(true);

    // Valid YAML, invalid worker: negative cpu_millis.
    await writeFile(file, inventory([{ id: "w1", cpu: -5 }]));
    report = await s.syncNow();
    expect(report.files[0].outcome).toBe("rejected");
    expect(report.files[0].errors.some((e) => e.field.includes("resource_capacity.cpu_millis"))).toBe(true);
    expect((await store.list("Worker")).items).toEqual(before.items);
    const schemaEvent = ofReason("FileRejected", file).at(-1)!;
    expect(schemaEvent.message).toContain(file);
    expect(schemaEvent.message).toContain("resource_capacity.cpu_millis");

    // Fixed: applies, including the prune of w2 the broken versions implied.
    await writeFile(file, inventory([{ id: "w1", cpu: 3000 }]));
    report = await s.syncNow();
    expect(report.files[0].outcome).toBe("applied");
    expect(spec(await get("Worker", "w1")).resource_capacity.cpu_millis).toBe(3000);
    expect(await get("Worker", "w2")).toBeUndefined();
    expect(ofReason("FileApplied", file).at(-1)?.message).toMatch(/1 updated, 1 deleted/);
  });

  it("a typo in an inventory field is refused with the field it likely meant; the worker keeps its stored spec", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1" }]));
    const s = await started();
    const before = await get("Worker", "w1");
    await writeFile(file, inventory([{ id: "w1", cpu: 3000, extra: "max_concurency: 8" }]));
    const report = await s.syncNow();
    expect(report.files[0].outcome).toBe("rejected");
    expect(report.files[0].errors.map((e) => `${e.field}: ${e.message}`)).toContain(
      "workers[0].max_concurency: unknown field: neither v1 nor Loom reads it; did you mean `max_concurrency`?",
    );
    expect(await get("Worker", "w1")).toEqual(before);
    expect(ofReason("FileRejected", file).at(-1)?.message).toContain("did you mean `max_concurrency`?");
  });

  it("an operator's cordon survives a re-apply of the file", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1", cpu: 2000 }]));
    const s = await started();
    const w = (await get("Worker", "w1"))!;
    await store.update({ ...w, spec: { ...spec(w), unschedulable: true } });
    await writeFile(file, inventory([{ id: "w1", cpu: 2500 }]));
    await s.syncNow();
    const after = spec(await get("Worker", "w1"));
    expect(after.resource_capacity.cpu_millis).toBe(2500);
    expect(after.unschedulable).toBe(true);
    // A file that declares the field decides it.
    await writeFile(file, inventory([{ id: "w1", cpu: 2500, extra: "unschedulable: false" }]));
    await s.syncNow();
    expect(spec(await get("Worker", "w1")).unschedulable).toBe(false);
  });

  it("a worker that registered first is taken over by the file that declares it, status kept", async () => {
    await store.create({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Worker",
      metadata: { name: "w1", labels: { "loom.dev/origin": "registration" } },
      spec: {},
      status: { desired_concurrency: 1 },
    });
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1" }]));
    await started();
    const w = await get("Worker", "w1");
    expect(w?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("workers.yaml"));
    expect(w?.metadata.labels?.["loom.dev/origin"]).toBe("registration");
    expect(spec(w).max_concurrency).toBe(2);
    expect(w?.status).toEqual({ desired_concurrency: 1 });
  });
});

describe("watched paths", () => {
  it("a path that does not exist yet is reported, then synced and watched once it exists", async () => {
    const later = join(dir, "later");
    const s = await started([later]);
    expect(logs.some((l) => l.level === "warn" && l.msg.includes(later))).toBe(true);
    await mkdir(later);
    await writeFile(join(later, "workers.yaml"), inventory([{ id: "w1", cpu: 1000 }]));
    await s.syncNow();
    expect(spec(await get("Worker", "w1")).resource_capacity.cpu_millis).toBe(1000);
    await writeFile(join(later, "workers.yaml"), inventory([{ id: "w1", cpu: 1500 }]));
    await until(async () => spec(await get("Worker", "w1")).resource_capacity.cpu_millis === 1500, "watched edit");
  });

  it("a single file can be a watched path; editor temp files beside it are not inputs", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1" }]));
    const s = await started([repo()]);
    await writeFile(repo("workers.yaml~"), inventory([{ id: "backup" }]));
    await writeFile(repo(".workers.yaml.swp"), "garbage: [");
    await writeFile(repo("#workers.yaml#"), inventory([{ id: "autosave" }]));
    const report = await s.syncNow();
    expect(report.files.map((f) => f.file)).toEqual([file]);
    expect(await get("Worker", "backup")).toBeUndefined();
    expect(ofReason("FileRejected")).toEqual([]);
    await stop(s);

    const single = await started([file]);
    expect((await single.syncNow()).files.map((f) => f.file)).toEqual([file]);
  });
});

describe("prune", () => {
  it("a worker removed from its file is cordoned and marked pruned while leased, and deleted when its last lease ends", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1" }, { id: "w2" }, { id: "w3" }]));
    const s = await started();
    await leaseTask("t-busy", "w2");

    await writeFile(file, inventory([{ id: "w1" }]));
    await s.syncNow();
    const w2 = await get("Worker", "w2");
    expect(w2).toBeDefined();
    expect(spec(w2).unschedulable).toBe(true);
    expect(w2?.metadata.annotations?.[PRUNED_ANNOTATION]).toBe("true");
    expect(await get("Worker", "w3")).toBeUndefined(); // nothing leased: deleted at once
    expect(await get("Worker", "w1")).toBeDefined();

    // Another apply while still leased changes nothing.
    const rev = await store.revision();
    await s.syncNow();
    expect(await store.revision()).toBe(rev);
    expect(await get("Worker", "w2")).toBeDefined();

    await finish("t-busy");
    await until(async () => (await get("Worker", "w2")) === undefined, "w2 deleted after its lease ended");
    expect(await get("Task", "t-busy")).toBeDefined();
  });

  it("declaring a pruned worker again lifts the prune and its cordon", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1" }, { id: "w2" }]));
    const s = await started();
    await leaseTask("t-busy", "w2");
    await writeFile(file, inventory([{ id: "w1" }]));
    await s.syncNow();
    expect(spec(await get("Worker", "w2")).unschedulable).toBe(true);
    await writeFile(file, inventory([{ id: "w1" }, { id: "w2" }]));
    await s.syncNow();
    const w2 = await get("Worker", "w2");
    expect(spec(w2).unschedulable).toBeUndefined();
    expect(w2?.metadata.annotations?.[PRUNED_ANNOTATION]).toBeUndefined();
  });

  it("a deleted campaign file deletes its Campaign", async () => {
    await writeFile(repo("nightly.yaml"), manifest("nightly"));
    await writeFile(repo("weekly.yaml"), manifest("weekly"));
    const s = await started();
    expect(await get("Campaign", "nightly")).toBeDefined();
    await unlink(repo("nightly.yaml"));
    const report = await s.syncNow();
    expect(report.files.find((f) => f.file === repo("nightly.yaml"))?.outcome).toBe("removed");
    expect(await get("Campaign", "nightly")).toBeUndefined();
    expect(await get("Campaign", "weekly")).toBeDefined();
    expect(ofReason("FileDeleted", repo("nightly.yaml"))).toHaveLength(1);
  });

  it("a deleted file is noticed by the watcher", async () => {
    await writeFile(repo("nightly.yaml"), manifest("nightly"));
    await started();
    await unlink(repo("nightly.yaml"));
    await until(async () => (await get("Campaign", "nightly")) === undefined, "campaign pruned");
  });

  it("a task declared in a file is pruned only while still queued", async () => {
    const file = repo("tasks.yaml");
    await writeFile(file, [taskDoc("t-run"), taskDoc("t-queued")].join("---\n"));
    const s = await started();
    await leaseTask("t-run", "w1");
    await writeFile(file, "# nothing declared any more\n");
    const report = await s.syncNow();
    expect(await get("Task", "t-queued")).toBeUndefined();
    const running = await get("Task", "t-run");
    expect((running?.status as { state?: string }).state).toBe("running");
    expect(report.files[0].kept).toEqual([{ kind: "Task", name: "t-run", reason: expect.stringContaining("running") }]);
  });

  it("objects with no source annotation, or another file's, are never pruned", async () => {
    await store.create({ apiVersion: "loom.dev/v1alpha1", kind: "Worker", metadata: { name: "registered" }, spec: {} });
    await writeFile(repo("a.yaml"), inventory([{ id: "a1" }]));
    await writeFile(repo("b.yaml"), inventory([{ id: "b1" }]));
    const s = await started();
    await writeFile(repo("a.yaml"), inventory([{ id: "a2" }]));
    await s.syncNow();
    expect(await get("Worker", "a1")).toBeUndefined();
    expect(await get("Worker", "registered")).toBeDefined();
    expect(await get("Worker", "b1")).toBeDefined();
  });

  it("a Hub restart prunes what was removed while it was down", async () => {
    await writeFile(repo("workers.yaml"), inventory([{ id: "w1" }, { id: "w2" }]));
    await writeFile(repo("nightly.yaml"), manifest("nightly"));
    const first = await started();
    await stop(first);

    await writeFile(repo("workers.yaml"), inventory([{ id: "w1" }]));
    await unlink(repo("nightly.yaml"));
    await started();
    expect(await get("Worker", "w2")).toBeUndefined();
    expect(await get("Campaign", "nightly")).toBeUndefined();
    expect(await get("Worker", "w1")).toBeDefined();
  });

  it("a renamed file hands its objects over without deleting them", async () => {
    await writeFile(repo("old.yaml"), inventory([{ id: "w1" }]));
    const s = await started();
    const uid = (await get("Worker", "w1"))?.metadata.uid;
    await rename(repo("old.yaml"), repo("new.yaml"));
    await s.syncNow();
    const w = await get("Worker", "w1");
    expect(w?.metadata.uid).toBe(uid);
    expect(w?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("new.yaml"));
    expect(spec(w).unschedulable).toBeUndefined();
  });
});

describe("two files, one name", () => {
  it("the second file is rejected with 'already declared by' and the first wins", async () => {
    await writeFile(repo("a.yaml"), inventory([{ id: "shared", cpu: 1000 }]));
    await writeFile(repo("b.yaml"), inventory([{ id: "shared", cpu: 9000 }, { id: "b-only" }]));
    const s = await started();
    const w = await get("Worker", "shared");
    expect(spec(w).resource_capacity.cpu_millis).toBe(1000);
    expect(w?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("a.yaml"));
    // The file is a unit: its other objects wait with it.
    expect(await get("Worker", "b-only")).toBeUndefined();
    const rejected = ofReason("FileRejected", repo("b.yaml"));
    expect(rejected).toHaveLength(1);
    expect(rejected[0].message).toContain(`already declared by ${repo("a.yaml")}`);

    // Once the first file lets go, the second applies, taking the worker over in place.
    const uid = w?.metadata.uid;
    await writeFile(repo("a.yaml"), inventory([{ id: "a-only" }]));
    await s.syncNow();
    const after = await get("Worker", "shared");
    expect(after?.metadata.uid).toBe(uid);
    expect(after?.metadata.annotations?.[SOURCE_ANNOTATION]).toBe(repo("b.yaml"));
    expect(spec(after).resource_capacity.cpu_millis).toBe(9000);
    expect(await get("Worker", "b-only")).toBeDefined();
  });
});

describe("planApply", () => {
  const w = (name: string, extra: Partial<StoredObject> = {}): StoredObject => ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name },
    spec: { max_concurrency: 1 },
    ...extra,
  });

  it("plans nothing for objects already as declared, and compares only what is declared", () => {
    const cur = w("w1", {
      metadata: {
        name: "w1",
        resourceVersion: "4",
        labels: { a: "1", ops: "x" },
        annotations: { [SOURCE_ANNOTATION]: "f" },
      },
      status: { any: 1 },
    });
    const plan = planApply([cur], [w("w1", { metadata: { name: "w1", labels: { a: "1" } } })], {
      source: "f",
      prune: true,
    });
    expect(plan.steps).toEqual([]);
    expect(plan.unchanged).toBe(1);
  });

  it("without prune, nothing it no longer declares is removed", () => {
    const cur = w("gone", { metadata: { name: "gone", annotations: { [SOURCE_ANNOTATION]: "f" } } });
    expect(planApply([cur], [], { source: "f", prune: false }).steps).toEqual([]);
    expect(planApply([cur], [], { source: "f", prune: true }).steps).toEqual([
      { op: "delete", kind: "Worker", name: "gone" },
    ]);
  });
});

describe("drift repair", () => {
  it("an edit or delete of a file-owned worker in the store is undone, with a DriftRestored Event", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1", cpu: 2000 }]));
    await started();
    const w = (await get("Worker", "w1"))!;
    // kubectl edit: the spec changes behind the file's back.
    await store.update({ ...w, spec: { ...(w.spec as object), resource_capacity: { cpu_millis: 99 } } });
    await until(async () => spec(await get("Worker", "w1"))?.resource_capacity?.cpu_millis === 2000, "the edit undone");
    // The restoring write is readable as soon as it is applied; its Event follows once it is durable.
    await until(
      async () => events.some((e) => e.reason === "DriftRestored" && e.object.metadata.name === "w1"),
      "the DriftRestored Event",
    );
    // kubectl delete: it comes back.
    await store.delete("Worker", "w1");
    await until(async () => (await get("Worker", "w1")) !== undefined, "the worker restored");
    await until(
      async () => events.filter((e) => e.reason === "DriftRestored").length >= 2,
      "a second DriftRestored Event",
    );
    expect(events.filter((e) => e.reason === "DriftRestored")).toHaveLength(2);
  });
  it("status writes by controllers wake nothing, and a file's own edits are not reported as drift", async () => {
    const file = repo("workers.yaml");
    await writeFile(file, inventory([{ id: "w1", cpu: 2000 }]));
    const s = await started();
    const w = (await get("Worker", "w1"))!;
    await store.updateStatus({ ...w, status: { active_count: 0 } });
    await writeFile(file, inventory([{ id: "w1", cpu: 3000 }]));
    await s.syncNow();
    expect(spec(await get("Worker", "w1")).resource_capacity.cpu_millis).toBe(3000);
    expect(events.filter((e) => e.reason === "DriftRestored")).toEqual([]);
  });
});
