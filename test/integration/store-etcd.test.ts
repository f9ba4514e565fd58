// The etcd backend: the shared store contract against a real etcd on loopback (one etcd per
// file, a fresh key prefix per test), plus what only this backend promises.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openEtcdStore, type EtcdStore } from "../../src/store/etcd.ts";
import { TxnBatcher } from "../../src/store/etcd-batch.ts";
import { Informer, type InformerEvent } from "../../src/store/cache.ts";
import { migrateStore } from "../../src/store/migrate.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { isStoreError } from "../../src/store/errors.ts";
import type { StoredObject, TxnOp, WatchEvent } from "../../src/store/store.ts";
import { event, eventually, storeContract, storeError, task, worker } from "../store-contract.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";

let etcd: EtcdCluster;
let n = 0;

describe.skipIf(etcdMissing)("etcd backend", () => {
  beforeAll(async () => {
    etcd = await startEtcd();
  }, 30_000);
  afterAll(async () => {
    await etcd?.stop();
  });

  storeContract("etcd", async () => {
    const prefix = `/loom-test-${process.pid}-${++n}`;
    return {
      store: await openEtcdStore({ endpoints: etcd.endpoints, prefix }),
      reopen: () => openEtcdStore({ endpoints: etcd.endpoints, prefix }),
      cleanup: async () => undefined,
    };
  });

  it("lists a kind larger than one gRPC reply, in pages from one snapshot, in name order", async () => {
    const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-test-${process.pid}-${++n}` });
    try {
      // 12 MB of Workers: one range reply would pass gRPC's 4 MB limit three times over.
      const pad = "x".repeat(10_000);
      for (let i = 0; i < 1200; i += 100) {
        const ops: TxnOp[] = [];
        for (let j = i; j < i + 100; j++)
          ops.push({
            op: "create",
            object: {
              ...worker(`w${String(j).padStart(5, "0")}`, { shard: String(j % 3) }),
              metadata: {
                name: `w${String(j).padStart(5, "0")}`,
                labels: { shard: String(j % 3) },
                annotations: { pad },
              },
            },
          });
        await store.txn(ops);
      }
      const rev = await store.revision();
      const all = await store.list("Worker");
      expect(all.items.map((w) => w.metadata.name)).toEqual(
        Array.from({ length: 1200 }, (_, j) => `w${String(j).padStart(5, "0")}`),
      );
      expect(all.revision).toBe(rev);
      expect((await store.list("Worker", { labelSelector: "shard=1" })).items).toHaveLength(400);
    } finally {
      await store.close();
    }
  }, 60_000);

  describe("several replicas on one etcd", () => {
    const opened: EtcdStore[] = [];
    const replicas = async (count: number) => {
      const prefix = `/loom-test-${process.pid}-${++n}`;
      for (let i = 0; i < count; i++) opened.push(await openEtcdStore({ endpoints: etcd.endpoints, prefix }));
      return opened.slice(-count);
    };
    afterEach(async () => {
      for (const s of opened.splice(0)) await s.close();
    });

    const cap = { cpu_millis: 1000, memory_mb: 4096, disk_mb: 0, gpu_count: 0 };
    /** What the caller knows (its informer's copies): this copy of the worker and of one task, nothing else. */
    const knowing = (w: StoredObject, t: StoredObject) => (kind: string, name: string) =>
      kind === "Worker" ? w : kind === "Task" && name === t.metadata.name ? t : null;
    const leased = (t: StoredObject, w: string, cpu: number) => ({
      ...t,
      status: {
        state: "leased",
        attempt: 1,
        lease: {
          worker: w,
          epoch: 1,
          mode: "pull",
          leased_at: new Date().toISOString(),
          lease_until: new Date(Date.now() + 60_000).toISOString(),
          placement: "shared",
          reservation: { cpu_millis: cpu, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
        },
      },
    });
    const reservedOn = (tasks: Iterable<StoredObject>, w: string) => {
      let cpu = 0;
      let active = 0;
      for (const t of tasks) {
        const st = t.status as
          { state?: string; lease?: { worker: string; reservation: { cpu_millis: number } } } | undefined;
        if ((st?.state === "leased" || st?.state === "running") && st.lease?.worker === w) {
          cpu += st.lease.reservation.cpu_millis;
          active++;
        }
      }
      return { cpu, active };
    };

    it("a worker whose last lease ended takes its next lease in one Txn: the deleted allocation key is compared as absent", async () => {
      const [a] = await replicas(1);
      const w = await a.create(
        worker("w1", undefined, { max_concurrency: 2, initial_concurrency: 2, resource_capacity: cap }),
      );
      const held = new Map<string, StoredObject>([["Worker/w1", w]]);
      for (const name of ["t1", "t2"]) held.set(`Task/${name}`, await a.create(task(name)));
      // The caller's copies, as an informer would give them: the store decides on them without reading.
      const known = (kind: string, name: string) => held.get(`${kind}/${name}`) ?? null;
      const write = async (obj: StoredObject) => {
        const before = a.commitStats();
        const r = await a.apply([{ op: "updateStatus", object: obj }], { known });
        held.set(`${obj.kind}/${obj.metadata.name}`, r.results[0]);
        const after = a.commitStats();
        return { txns: after.commits - before.commits, failed: after.failed - before.failed, result: r.results[0] };
      };
      expect((await write(leased(held.get("Task/t1")!, "w1", 300))).txns).toBe(1);
      // The lease ends: the worker holds nothing, and its allocation key is deleted.
      const ended = await write({ ...held.get("Task/t1")!, status: { state: "returned", attempt: 1 } });
      expect(ended.txns).toBe(1);
      const next = await write(leased(held.get("Task/t2")!, "w1", 300));
      expect(next.txns).toBe(1);
      expect(next.failed).toBe(0);
      expect((next.result.status as { lease: { worker: string } }).lease.worker).toBe("w1");
    });

    it("a lease decided on a worker copy older than this store's own status write of it commits in one Txn", async () => {
      const [a, b] = await replicas(2);
      const old = await a.create(
        worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap }),
      );
      const t1 = await a.create(task("t1"));
      // The Hub's own status write of the worker (its worker controller), results only read.
      const rewritten = await a.apply(
        [{ op: "updateStatus", object: { ...old, status: { ...(old.status as object), desired_concurrency: 3 } } }],
        { readOnlyResults: true },
      );
      // The informer has not shown that write yet: the caller still knows the older copy.
      const known = knowing(old, t1);
      const before = a.commitStats();
      const r = await a.apply([{ op: "updateStatus", object: leased(t1, "w1", 300) }], { known });
      const after = a.commitStats();
      expect(after.failed - before.failed).toBe(0);
      expect(after.commits - before.commits).toBe(1);
      expect(Number(r.revision)).toBeGreaterThan(rewritten.revision);
      // A write by another replica still fails the compare and is decided again on a read.
      const current = (await b.get<StoredObject>("Worker", "w1"))!;
      await b.updateStatus({ ...current, status: { ...(current.status as object), desired_concurrency: 2 } });
      const t2 = await a.create(task("t2"));
      const known2 = knowing(old, t2);
      const failed = a.commitStats().failed;
      await a.apply([{ op: "updateStatus", object: leased(t2, "w1", 300) }], { known: known2 });
      expect(a.commitStats().failed - failed).toBe(1);
    });

    it("a release reads no Worker: another replica's write of the worker does not fail it, and the next lease still compares the worker", async () => {
      const [a, b] = await replicas(2);
      const w = await a.create(
        worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap }),
      );
      const t1 = await a.apply([{ op: "updateStatus", object: leased(await a.create(task("t1")), "w1", 300) }]);
      const held = t1.results[0];
      // The worker's status moves (a controller on another replica); this store's copy of it is older.
      const current = (await b.get<StoredObject>("Worker", "w1"))!;
      await b.updateStatus({ ...current, status: { ...(current.status as object), desired_concurrency: 2 } });
      const known = knowing(w, held);
      const before = a.commitStats();
      const returned = { ...held, status: { state: "returned", attempt: 1 } };
      const ended = await a.apply([{ op: "updateStatus", object: returned }], { known });
      const after = a.commitStats();
      expect(after.failed - before.failed).toBe(0);
      expect(after.commits - before.commits).toBe(1);
      expect((ended.results[0].status as { state: string }).state).toBe("returned");
      // Adding a lease on that same stale copy of the worker is still compared, and decided again.
      const t2 = await a.create(task("t2"));
      const known2 = knowing(w, t2);
      const failed = a.commitStats().failed;
      const r = await a.apply([{ op: "updateStatus", object: leased(t2, "w1", 300) }], { known: known2 });
      expect(a.commitStats().failed - failed).toBe(1);
      expect((r.results[0].status as { lease: { worker: string } }).lease.worker).toBe("w1");
    });

    it("a lease decided while this store's own write of its worker is in flight waits for that write, and commits in one Txn", async () => {
      const [a] = await replicas(1);
      const w = await a.create(
        worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap }),
      );
      const t1 = await a.create(task("t1"));
      // The worker controller's status write, not awaited: its Txn is in flight when the lease is decided.
      const rewrite = a.apply(
        [{ op: "updateStatus", object: { ...w, status: { ...(w.status as object), desired_concurrency: 3 } } }],
        { readOnlyResults: true },
      );
      const known = knowing(w, t1);
      const before = a.commitStats();
      const r = await a.apply([{ op: "updateStatus", object: leased(t1, "w1", 300) }], { known });
      const after = a.commitStats();
      expect(after.failed - before.failed).toBe(0);
      expect(Number(r.revision)).toBeGreaterThan((await rewrite).revision);
      expect((r.results[0].status as { lease: { worker: string } }).lease.worker).toBe("w1");
    });

    it("writes that each write one worker and lease onto the other's never wait for each other", async () => {
      const [a] = await replicas(1);
      const spec = { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap };
      const w1 = await a.create(worker("w1", undefined, spec));
      const w2 = await a.create(worker("w2", undefined, spec));
      const [t1, t2, t3] = [await a.create(task("t1")), await a.create(task("t2")), await a.create(task("t3"))];
      const copies = new Map<string, StoredObject>(
        [w1, w2, t1, t2, t3].map((o) => [`${o.kind}/${o.metadata.name}`, o]),
      );
      const known = (kind: string, name: string) => copies.get(`${kind}/${name}`) ?? null;
      const rewrite = (w: StoredObject, n: number) => ({
        op: "updateStatus" as const,
        object: { ...w, status: { ...(w.status as object), desired_concurrency: n } },
      });
      const all = Promise.all([
        a.apply([rewrite(w1, 3), { op: "updateStatus", object: leased(t1, "w2", 100) }], { known }),
        a.apply([rewrite(w2, 3), { op: "updateStatus", object: leased(t2, "w1", 100) }], { known }),
        // A lease alone on w1 while both are in flight: it waits for the write of w1, then commits.
        a.apply([{ op: "updateStatus", object: leased(t3, "w1", 100) }], { known }),
      ]);
      const done = await Promise.race([all, new Promise<"stuck">((r) => setTimeout(() => r("stuck"), 10_000))]);
      expect(done).not.toBe("stuck");
      const tasks = (await a.list<StoredObject>("Task")).items;
      expect(tasks.map((t) => (t.status as { lease?: { worker: string } }).lease?.worker)).toEqual(["w2", "w1", "w1"]);
    });

    it("a commit whose compares fail is counted, and decided again on what etcd holds", async () => {
      const [a, b] = await replicas(2);
      const w = await a.create(
        worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap }),
      );
      const t1 = await a.create(task("t1"));
      const t2 = await a.create(task("t2"));
      // a remembers w1's allocation key as it wrote it; b's lease then moves that key.
      await a.apply([{ op: "updateStatus", object: leased(t1, "w1", 300) }]);
      await b.apply([{ op: "updateStatus", object: leased(t2, "w1", 300) }]);
      const before = a.commitStats().failed;
      const t3 = await a.create(task("t3"));
      const known = knowing(w, t3);
      const r = await a.apply([{ op: "updateStatus", object: leased(t3, "w1", 300) }], { known });
      expect(a.commitStats().failed - before).toBe(1);
      expect((r.results[0].status as { lease: { worker: string } }).lease.worker).toBe("w1");
      expect(b.commitStats().failed).toBe(0);
    });

    it("concurrent leases from three replicas onto one tight worker never over-reserve it, at any revision", async () => {
      const [a, b, c] = await replicas(3);
      await a.create(
        worker("tight", undefined, { max_concurrency: 8, initial_concurrency: 8, resource_capacity: cap }),
      );
      const tasks = await Promise.all(Array.from({ length: 24 }, (_, i) => a.create(task(`t${i}`))));
      // Watch every Task revision from the start and replay the lease sets it implies.
      const state = new Map<string, StoredObject>();
      let worst = 0;
      let last = 0;
      await c.watch("Task", 0, (ev: WatchEvent) => {
        if (ev.type === "DELETED") state.delete(ev.object.metadata.name);
        else state.set(ev.object.metadata.name, ev.object);
        last = ev.revision;
        worst = Math.max(worst, reservedOn(state.values(), "tight").cpu);
      });
      // Every task is offered 300 millicores through each replica at once: at most 3 fit.
      const stores = [a, b, c];
      const outcomes = await Promise.allSettled(
        tasks.flatMap((t, i) => stores.map((s, j) => s.updateStatus(leased(t, "tight", 300 + ((i + j) % 2))))),
      );
      const ok = outcomes.filter((o) => o.status === "fulfilled");
      const refused = outcomes.filter((o): o is PromiseRejectedResult => o.status === "rejected");
      for (const r of refused) expect(isStoreError(r.reason, "Conflict"), String(r.reason)).toBe(true);
      // A task may be leased by several replicas in turn (last write wins on its own lease), but
      // the worker never holds more than fits.
      expect(ok.length).toBeGreaterThanOrEqual(3);
      const final = (await b.list("Task")).items;
      const held = reservedOn(final, "tight");
      expect(held.active).toBe(3);
      expect(held.cpu).toBeLessThanOrEqual(1000);
      expect(refused.some((r) => /cpu_millis/.test(String(r.reason)))).toBe(true);
      const head = await a.revision();
      await eventually(() => last >= head, "the watch to reach the head");
      expect(worst).toBeLessThanOrEqual(1000);
      expect(worst).toBeGreaterThanOrEqual(900);
    });

    it("an exclusive lease and a shared one raced through two replicas: exactly one commits", async () => {
      const [a, b] = await replicas(2);
      await a.create(worker("w", undefined, { max_concurrency: 4, initial_concurrency: 4, resource_capacity: cap }));
      await a.create(task("ex"));
      await a.create(task("sh"));
      for (let round = 0; round < 10; round++) {
        const [t1, t2] = [(await a.get("Task", "ex"))!, (await b.get("Task", "sh"))!];
        const ex = leased(t1, "w", 0) as StoredObject & { status: { lease: { placement: string } } };
        ex.status.lease.placement = "exclusive";
        const r = await Promise.allSettled([a.updateStatus(ex), b.updateStatus(leased(t2, "w", 100))]);
        expect(
          r.filter((x) => x.status === "fulfilled"),
          JSON.stringify(r.map((x) => (x.status === "rejected" ? String(x.reason) : "ok"))),
        ).toHaveLength(1);
        const items = (await a.list("Task")).items;
        expect(reservedOn(items, "w").active).toBe(1);
        // Release both for the next round (no resourceVersion: last write wins).
        await a.txn(
          items.map((t) => ({
            op: "updateStatus" as const,
            object: {
              ...t,
              metadata: { ...t.metadata, resourceVersion: undefined },
              status: { state: "queued", attempt: 1 },
            },
          })),
        );
      }
    });

    it("a lost race is retried on fresh data, while a stale resourceVersion from the caller stays a Conflict", async () => {
      const [a, b] = await replicas(2);
      const w = await a.create(worker("w", undefined, { max_concurrency: 64, initial_concurrency: 1 }));
      // 40 last-write-wins status writes from two replicas on one object: every one commits.
      const writes = Array.from({ length: 40 }, (_, i) =>
        (i % 2 ? a : b).updateStatus({
          ...w,
          metadata: { ...w.metadata, resourceVersion: undefined },
          status: { active_count: i },
        }),
      );
      const done = await Promise.all(writes);
      expect(new Set(done.map((o) => o.metadata.resourceVersion)).size).toBe(40);
      const stale = await storeError(b.updateStatus({ ...w, status: { active_count: 99 } }));
      expect(stale.reason).toBe("Conflict");
      expect(stale.message).toContain(`resourceVersion ${w.metadata.resourceVersion} is stale`);
    });

    it("refuses a transaction past etcd's default --max-txn-ops with 413 before sending it, naming the limit, and writes nothing", async () => {
      const [a] = await replicas(1);
      expect(a.maxWritesPerTxn).toBeLessThan(128);
      const fits = Array.from({ length: a.maxWritesPerTxn }, (_, i) => ({
        op: "create" as const,
        object: worker(`fit-${i}`),
      }));
      expect(await a.txn(fits)).toHaveLength(a.maxWritesPerTxn);
      const over = Array.from({ length: 200 }, (_, i) => ({ op: "create" as const, object: worker(`over-${i}`) }));
      const e = await storeError(a.txn(over));
      expect(e.reason).toBe("RequestEntityTooLarge");
      expect(e.code).toBe(413);
      expect(e.message).toContain("--max-txn-ops (128)");
      expect((await a.list("Worker")).items.filter((w) => w.metadata.name.startsWith("over-"))).toEqual([]);
    });

    it("keeps keys under its prefix: another prefix on the same etcd sees nothing of it", async () => {
      const [a] = await replicas(1);
      const [other] = await replicas(1);
      await a.create(worker("w1"));
      expect((await other.list("Worker")).items).toEqual([]);
      expect(await other.get("Worker", "w1")).toBeUndefined();
      expect(a.prefix).not.toBe(other.prefix);
    });
  });

  it("migrate copies a SQLite store into an empty etcd prefix: names, labels, specs and status (leases included), and refuses a non-empty target", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-migrate-"));
    const from = openSqliteStore(join(dir, "loom.db"));
    const to = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-migrate-${process.pid}` });
    try {
      const w = await from.create(
        worker(
          "w1",
          { pool: "a" },
          {
            max_concurrency: 2,
            initial_concurrency: 1,
            resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 0, gpu_count: 0 },
          },
        ),
      );
      await from.updateStatus({ ...w, status: { active_count: 1 } });
      const t = await from.create(task("t1"));
      const lease = {
        worker: "w1",
        epoch: 1,
        mode: "pull",
        leased_at: "2026-01-01T00:00:00.000Z",
        lease_until: "2099-01-01T00:00:00.000Z",
        placement: "shared",
        reservation: { cpu_millis: 600, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
      };
      await from.updateStatus({ ...t, status: { state: "leased", attempt: 1, lease } });
      await from.create(task("t2"));
      const report = await migrateStore(from, to);
      expect(report.kinds).toMatchObject({ Worker: 1, Task: 2 });
      const strip = (o: StoredObject) => ({
        kind: o.kind,
        name: o.metadata.name,
        labels: o.metadata.labels,
        spec: o.spec,
        status: o.status,
      });
      for (const kind of ["Worker", "Task"])
        expect((await to.list(kind)).items.map(strip)).toEqual((await from.list(kind)).items.map(strip));
      // The copied lease counts on the target: another 600 millicores do not fit beside it.
      const t2 = (await to.get("Task", "t2"))!;
      expect(
        (await storeError(to.updateStatus({ ...t2, status: { state: "leased", attempt: 1, lease } }))).message,
      ).toContain("cpu_millis");
      await expect(migrateStore(from, to)).rejects.toThrow(/already holds/);
    } finally {
      await from.close();
      await to.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("an informer on etcd tells a deletion with the object's last state, without etcd sending it", async () => {
    const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-test-${process.pid}-${++n}` });
    const inf = new Informer(store, ["Worker"]);
    try {
      await store.create(worker("w1", { pool: "a" }));
      await inf.start();
      const seen: InformerEvent[] = [];
      inf.on((ev) => seen.push(ev));
      // A raw watch asked for no last state: the deletion names the object, nothing more.
      const raw: WatchEvent[] = [];
      const handle = await store.watch("Worker", await store.revision(), (ev) => raw.push(ev), {
        lastStateOnDelete: false,
      });
      const gone = await store.delete("Worker", "w1");
      await eventually(() => seen.some((e) => e.type === "DELETED"), "the informer's DELETED event");
      await eventually(() => raw.some((e) => e.type === "DELETED"), "the raw watch's DELETED event");
      const deleted = seen.find((e) => e.type === "DELETED")!;
      expect(deleted.object.metadata.labels).toEqual({ pool: "a" });
      expect(deleted.object.spec).toEqual(gone.spec);
      expect(Number(deleted.object.metadata.resourceVersion)).toBe(deleted.revision);
      const r = raw.find((e) => e.type === "DELETED")!;
      expect([r.kind, r.name, r.object.metadata.name, r.object.spec]).toEqual(["Worker", "w1", "w1", undefined]);
      handle.stop();
    } finally {
      inf.stop();
      await store.close();
    }
  });

  it("watches of every object share one etcd watch; one from before what it keeps gets its own", async () => {
    // etcd's own count of the watches it serves, from its metrics.
    const etcdWatchers = async () => {
      const text = await (await fetch(`${etcd.endpoints[0]}/metrics`)).text();
      return Number(/^etcd_debugging_mvcc_watcher_total (\S+)$/m.exec(text)![1]);
    };
    const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-test-${process.pid}-${++n}` });
    try {
      const before = await etcdWatchers();
      const start = await store.revision();
      const watches = await Promise.all(
        Array.from({ length: 20 }, async () => {
          const events: WatchEvent[] = [];
          const handle = await store.watch(undefined, start, (ev) => events.push(ev));
          return { events, handle };
        }),
      );
      expect(await etcdWatchers()).toBe(before + 1);

      await store.txn([1, 2, 3].map((i) => ({ op: "create", object: worker(`w${i}`) })));
      await store.delete("Worker", "w3");
      await eventually(() => watches.every((w) => w.events.length === 4), "four events on every watch");
      for (const w of watches)
        expect(w.events.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual([
          "ADDED w1",
          "ADDED w2",
          "ADDED w3",
          "DELETED w3",
        ]);
      // Each watch decodes its own copy; the JSON and the watch line are the object's, with its resourceVersion.
      (watches[0].events[0].object.spec as { max_concurrency?: number }).max_concurrency = 99;
      expect((watches[1].events[0].object.spec as { max_concurrency?: number }).max_concurrency).toBe(2);
      const [added] = watches[1].events;
      expect(JSON.parse(added.json!)).toEqual(watches[2].events[0].object);
      expect(JSON.parse(added.line!("ADDED").toString())).toEqual({
        type: "ADDED",
        object: watches[2].events[0].object,
      });
      expect(watches[3].events[3].object.metadata).toMatchObject({ name: "w3" });

      // A watch that starts behind the shared one, within what it keeps: exactly the events after its start.
      const mid = Number(watches[0].events[1].revision);
      const behind: WatchEvent[] = [];
      const b = await store.watch(undefined, mid - 1, (ev) => behind.push(ev));
      expect(behind.map((e) => `${e.type} ${e.object.metadata.name}`)).toEqual(
        ["ADDED w1", "ADDED w2", "ADDED w3", "DELETED w3"].filter(
          (_, i) => Number(watches[0].events[i].revision) > mid - 1,
        ),
      );
      expect(await etcdWatchers()).toBe(before + 1);

      // Past what the shared watch keeps (1,024 events), a watch from the start is an etcd watch of its own.
      for (let i = 0; i < 1200; i += 100)
        await store.txn(
          Array.from({ length: 100 }, (_, j) => ({ op: "create" as const, object: worker(`x${i + j}`) })),
        );
      await eventually(() => watches.every((w) => w.events.length === 1204), "every write on every watch");
      const old: WatchEvent[] = [];
      const o = await store.watch(undefined, start, (ev) => old.push(ev));
      expect(await etcdWatchers()).toBe(before + 2);
      await eventually(() => old.length === 1204, "the old watch's replay");
      expect(old.map((e) => `${e.type} ${e.name} ${e.revision}`)).toEqual(
        watches[5].events.map((e) => `${e.type} ${e.name} ${e.revision}`),
      );

      // The shared watch ends with its last watch.
      for (const w of watches) w.handle.stop();
      b.stop();
      o.stop();
      const deadline = Date.now() + 5000;
      while ((await etcdWatchers()) !== before && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(await etcdWatchers()).toBe(before);
    } finally {
      await store.close();
    }
  });

  it("a watch takes this process's own read-only writes as written, and decodes every other write", async () => {
    const prefix = `/loom-test-${process.pid}-${++n}`;
    const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix });
    const other = await openEtcdStore({ endpoints: etcd.endpoints, prefix });
    try {
      const from = await store.revision();
      const seen: WatchEvent[] = [];
      const handle = await store.watch("Worker", from, (ev) => seen.push(ev));
      const shared = await store.apply([{ op: "create", object: worker("w1") }], { readOnlyResults: true });
      const [copied] = await store.txn([{ op: "create", object: worker("w2") }]);
      const [elsewhere] = await other.txn([{ op: "create", object: worker("w3") }]);
      await eventually(() => seen.length === 3, "three watch events");
      const [a, b, c] = seen.map((e) => e.object);
      // The read-only result is the very object the watch tells, at its revision.
      expect(a).toBe(shared.results[0]);
      expect(a.metadata.resourceVersion).toBe(String(shared.revision));
      // A result the caller may change, and another process's write, come decoded from etcd.
      expect(b).not.toBe(copied);
      expect(b).toEqual(copied);
      expect(c).not.toBe(elsewhere);
      expect(c).toEqual(elsewhere);
      // A later write by someone else at another revision is decoded, not taken from what this store wrote.
      const cur = await other.get("Worker", "w1");
      const moved = await other.update({ ...cur!, metadata: { ...cur!.metadata, labels: { pool: "b" } } });
      await eventually(() => seen.length === 4, "the fourth watch event");
      expect(seen[3].object).not.toBe(a);
      expect(seen[3].object).toEqual(moved);
      handle.stop();
    } finally {
      await other.close();
      await store.close();
    }
  });

  describe("kinds that expire (ttlSeconds): each put carries a lease", () => {
    const open = (ttlSeconds: Record<string, number>) =>
      openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-test-${process.pid}-${++n}`, ttlSeconds });
    const leaseOf = async (s: EtcdStore, kind: string, name: string) =>
      (await s.etcd.kv.range({ key: Buffer.from(`${s.prefix}/objects/${kind}/${name}`) })).kvs[0]?.lease;

    it("puts of an expiring kind share one lease of the TTL plus its window; other kinds carry none", async () => {
      const store = await open({ Event: 600 });
      try {
        expect([store.expires("Event"), store.expires("Task")]).toEqual([true, false]);
        await store.create(event("e1"));
        await store.txn([
          { op: "create", object: event("e2") },
          { op: "create", object: task("t1") },
        ]);
        const e1 = await store.get("Event", "e1");
        await store.update({ ...e1!, message: "again" });
        const [l1, l2, lt] = [
          await leaseOf(store, "Event", "e1"),
          await leaseOf(store, "Event", "e2"),
          await leaseOf(store, "Task", "t1"),
        ];
        expect(l1).not.toBe("0");
        // Written within one window (a tenth of the TTL, at most a minute): the same lease, kept by an update.
        expect(l2).toBe(l1);
        expect(lt).toBe("0");
        const ttl = await store.etcd.leaseClient.leaseTimeToLive({ ID: l1 });
        expect(Number(ttl.grantedTTL)).toBe(660);
        expect(await store.count("Event")).toBe(2);
      } finally {
        await store.close();
      }
    });

    it("Events written at once share one grant; a write after the window gets a new lease", async () => {
      // TTL 5 s: the window is half a second, the lease granted for 6 s.
      const store = await open({ Event: 5 });
      try {
        await Promise.all(["a", "b", "c", "d"].map((x) => store.create(event(x))));
        const first = new Set(await Promise.all(["a", "b", "c", "d"].map((x) => leaseOf(store, "Event", x))));
        expect(first.size).toBe(1);
        await new Promise((r) => setTimeout(r, 700));
        await store.create(event("later"));
        const later = await leaseOf(store, "Event", "later");
        expect(first.has(later)).toBe(false);
        expect(Number((await store.etcd.leaseClient.leaseTimeToLive({ ID: later })).grantedTTL)).toBe(6);
      } finally {
        await store.close();
      }
    });

    it("etcd deletes an Event once its lease runs out, and a watch sees it go", async () => {
      const store = await open({ Event: 1 });
      try {
        const seen: WatchEvent[] = [];
        const handle = await store.watch("Event", await store.revision(), (e) => seen.push(e));
        await store.create(event("short"));
        await store.create(task("stays"));
        // The lease's TTL is 1 s plus the window, rounded up to whole seconds: 2 s.
        await eventually(
          () => seen.some((e) => e.type === "DELETED" && e.name === "short"),
          "the Event's expiry",
          10_000,
        );
        handle.stop();
        expect(await store.get("Event", "short")).toBeUndefined();
        expect(await store.get("Task", "stays")).toBeDefined();
        expect(await store.count("Event")).toBe(0);
      } finally {
        await store.close();
      }
    }, 20_000);

    it("a lease revoked meanwhile fails no write: the Event gets a new one, a write beside it commits", async () => {
      const store = await open({ Event: 600 });
      try {
        await store.create(event("first"));
        const old = await leaseOf(store, "Event", "first");
        await store.etcd.leaseClient.leaseRevoke({ ID: old });
        expect(await store.get("Event", "first")).toBeUndefined(); // revoking a lease deletes its keys
        // A write in flight, so the two below are decided meanwhile and share one Txn, which etcd refuses for the lease.
        const plug = store.create(task("plug"));
        const [e, t] = await Promise.all([store.create(event("second")), store.create(task("beside"))]);
        await plug;
        expect([e.metadata.name, t.metadata.name]).toEqual(["second", "beside"]);
        const fresh = await leaseOf(store, "Event", "second");
        expect(fresh).not.toBe("0");
        expect(fresh).not.toBe(old);
        expect(await store.get("Task", "beside")).toBeDefined();
      } finally {
        await store.close();
      }
    });
  });

  describe("group commit", () => {
    let store: EtcdStore;
    const key = (k: string) => Buffer.from(`/loom-batch-${process.pid}-${n}/${k}`);
    const put = (k: string, v: string) => ({ request_put: { key: key(k), value: Buffer.from(v) } });
    const value = async (k: string) => (await store.etcd.kv.range({ key: key(k) })).kvs[0]?.value.toString();

    beforeAll(async () => {
      store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: `/loom-batch-store-${process.pid}` });
    });
    afterAll(async () => {
      await store?.close();
    });

    /** A batcher on the real client, as the store builds one, with the revision key of this test. */
    const batcher = (maxBytes = 1024 * 1024) =>
      new TxnBatcher(
        async (compare, success, failure) => {
          const r = await store.etcd.kv.txn({ compare, success, failure });
          return { succeeded: r.succeeded, revision: r.header.revision, responses: r.responses };
        },
        put("revision", ""),
        { maxOps: 128, maxBytes },
      );

    it("writes decided while a Txn is in flight share the next one; a failed compare fails only its own write", async () => {
      n++;
      const b = batcher();
      const plug = b.commit([], [put("plug", "1")]); // in flight: the three below wait for it, together
      const ok1 = b.commit([], [put("a", "1")]);
      const stale = b.commit(
        [{ key: key("b"), target: "Mod", result: "Equal", mod_revision: 999_999 }],
        [put("b", "1")],
      );
      const ok2 = b.commit([], [put("c", "1")]);
      const [p, a, s, c] = await Promise.all([plug, ok1, stale, ok2]);
      expect([p.succeeded, a.succeeded, s.succeeded, c.succeeded]).toEqual([true, true, false, true]);
      // The failed merged Txn named the stale write (its failure branch read the compared
      // keys); the two whose compares held went again together, in one more Txn.
      expect(b.stats).toMatchObject({ txns: 3, writes: 6, merged: 2, split: 1 });
      expect(a.revision).toBe(c.revision);
      expect([await value("a"), await value("b"), await value("c")]).toEqual(["1", undefined, "1"]);
    });

    it("a failed merged Txn tells each stale write so, and commits the others together, however many are stale", async () => {
      n++;
      const b = batcher();
      await b.commit([], [put("shared", "1")]);
      const shared = (await store.etcd.kv.range({ key: key("shared") })).kvs[0].mod_revision;
      const plug = b.commit([], [put("plug", "1")]);
      // Two writes compare the same key at its current mod_revision, two at one it never had.
      const stale = (k: string) =>
        b.commit([{ key: key(k), target: "Mod", result: "Equal", mod_revision: 999_999 }], [put(k, "1")]);
      const fresh = (k: string) =>
        b.commit([{ key: key("shared"), target: "Mod", result: "Equal", mod_revision: shared }], [put(k, "1")]);
      const out = await Promise.all([plug, fresh("f1"), stale("s1"), fresh("f2"), stale("s2")]);
      expect(out.map((o) => o.succeeded)).toEqual([true, true, false, true, false]);
      expect(out[1].revision).toBe(out[3].revision);
      expect([await value("f1"), await value("f2"), await value("s1"), await value("s2")]).toEqual([
        "1",
        "1",
        undefined,
        undefined,
      ]);
    });

    it("never puts two writes of one key in one Txn: they commit one after the other, in order", async () => {
      n++;
      const b = batcher();
      const plug = b.commit([], [put("plug", "1")]);
      const first = b.commit([], [put("k", "first")]);
      const second = b.commit([], [put("k", "second")]);
      const [, x, y] = await Promise.all([plug, first, second]);
      expect(x.succeeded && y.succeeded).toBe(true);
      expect(Number(y.revision)).toBeGreaterThan(Number(x.revision));
      expect(b.stats.txns).toBe(3);
      expect(await value("k")).toBe("second");
    });

    it("a write waiting behind another on a shared key is never passed by a later one on that key", async () => {
      n++;
      const b = batcher();
      const plug = b.commit([], [put("plug", "1")]);
      const a = b.commit([], [put("k1", "a")]);
      const ab = b.commit([], [put("k1", "b"), put("k2", "b")]); // waits behind a (k1)
      const c = b.commit([], [put("k2", "c")]); // shares nothing with a, but k2 with the one waiting
      const [, ra, rb, rc] = await Promise.all([plug, a, ab, c]);
      expect(Number(rb.revision)).toBeGreaterThan(Number(ra.revision));
      expect(Number(rc.revision)).toBeGreaterThan(Number(rb.revision));
      expect([await value("k1"), await value("k2")]).toEqual(["b", "c"]);
    });

    it("a merged Txn etcd refuses for its size is sent again as single Txns, which fit", async () => {
      n++;
      const b = batcher(16 * 1024 * 1024); // the batcher's own limit let through: etcd's is the one that refuses
      const big = "x".repeat(600 * 1024); // three of these pass etcd's default --max-request-bytes (1.5 MiB); one does not
      const plug = b.commit([], [put("plug", "1")]);
      const writes = ["p", "q", "r"].map((k) => b.commit([], [put(k, big)]));
      const out = await Promise.all([plug, ...writes]);
      expect(out.every((o) => o.succeeded)).toBe(true);
      expect(b.stats).toMatchObject({ merged: 1, split: 1 });
      expect((await value("r"))?.length).toBe(big.length);
    });

    it("a store's concurrent writes go out in fewer Txns than writes, every one committed", async () => {
      const before = store.commitStats();
      const written = await Promise.all(Array.from({ length: 32 }, (_, i) => store.create(task(`g${i}`))));
      const after = store.commitStats();
      expect(after.writes - before.writes).toBe(32);
      expect(after.commits - before.commits).toBeLessThan(32);
      expect((await store.list("Task")).items.map((t) => t.metadata.resourceVersion).sort()).toEqual(
        written.map((t) => t.metadata.resourceVersion).sort(),
      );
    });
  });
});
