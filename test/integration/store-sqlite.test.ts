// The SQLite backend: the shared store contract on a temp file, plus what only this
// backend promises (durability settings, the bounded event log, list at scale).
import { statSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore, type SqliteStore } from "../../src/store/sqlite.ts";
import type { StoredObject, TxnOp, WatchEvent } from "../../src/store/store.ts";
import { eventually, storeContract, storeError, task, worker } from "../store-contract.ts";

async function tempDb(): Promise<{ dir: string; file: string }> {
  const dir = await mkdtemp(join(tmpdir(), "loom-store-"));
  return { dir, file: join(dir, "loom.db") };
}

storeContract("sqlite", async () => {
  const { dir, file } = await tempDb();
  return {
    store: openSqliteStore(file),
    reopen: async () => openSqliteStore(file),
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
});

describe("sqlite store specifics", () => {
  const open: SqliteStore[] = [];
  const dirs: string[] = [];
  async function fresh(opts?: Parameters<typeof openSqliteStore>[1]) {
    const { dir, file } = await tempDb();
    dirs.push(dir);
    const s = openSqliteStore(file, opts);
    open.push(s);
    return { store: s, file };
  }
  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    for (const d of dirs.splice(0)) await rm(d, { recursive: true, force: true });
  });
  /** Task `name` leased on worker w1 with `cpu` millicores reserved, written through `s`. */
  const leaseOnW1 = async (s: SqliteStore, name: string, cpu: number) =>
    s.updateStatus({
      ...(await s.get<StoredObject>("Task", name))!,
      status: {
        state: "leased",
        attempt: 1,
        lease: {
          worker: "w1",
          epoch: 1,
          mode: "pull",
          leased_at: "2026-01-01T00:00:00.000Z",
          lease_until: "2026-01-01T01:00:00.000Z",
          placement: "shared",
          reservation: { cpu_millis: cpu, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
        },
      },
    });

  it("uses WAL, synchronous=NORMAL (durability comes from the group flush) and a busy timeout", async () => {
    const { store } = await fresh();
    expect(store.backend).toBe("sqlite");
    expect(store.pragmas()).toEqual({ journalMode: "wal", synchronous: 1, busyTimeout: 5000 });
  });

  it("answers a write only once a WAL flush covering it has completed, and flushes concurrent writes in groups", async () => {
    const { store } = await fresh();
    const before = store.commitStats().commits;
    const written = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        store.create(task(`t${i}`)).then((o) => ({ o, durable: store.durableRevision() })),
      ),
    );
    for (const { o, durable } of written) expect(durable).toBeGreaterThanOrEqual(Number(o.metadata.resourceVersion));
    const flushes = store.commitStats().commits - before;
    expect(flushes).toBeGreaterThanOrEqual(1);
    expect(flushes).toBeLessThan(100);
  });

  it("checkpoints the WAL in the background, so commits never do and the WAL stays small", async () => {
    const { store, file } = await fresh();
    // SQLite's own checkpoint inside commits is off: the worker thread does it.
    expect(store.pragmaValue("wal_autocheckpoint")).toBe(0);
    const walBytes = () => statSync(`${file}-wal`).size;
    const big = "x".repeat(200_000);
    let n = 0;
    const batch = async () => {
      for (let i = 0; i < 10; i++)
        await store.create({ ...task(`big${n++}`), metadata: { name: `big${n}`, annotations: { blob: big } } });
    };
    const sizes: number[] = [];
    for (let round = 0; round < 4; round++) {
      const rounds = store.checkpointStats().rounds;
      await batch(); // about 2 MB of pages
      await eventually(() => store.checkpointStats().rounds > rounds, "a checkpoint round");
      sizes.push(walBytes());
    }
    expect(store.checkpointStats().failures).toBe(0);
    // Without checkpoints the WAL would hold all four batches (8 MB and more); each round
    // copies what is committed, and the next transaction starts the WAL over.
    expect(Math.max(...sizes)).toBeLessThan(5_000_000);
    expect((await store.get("Task", `big${n}`))?.metadata.annotations?.blob).toBe(big);
  });

  it("starts the WAL over under writes that never pause, so it stays bounded however long the load lasts", async () => {
    const restart = 2 * 1024 * 1024;
    const { store, file } = await fresh({ checkpointEveryMs: 100, walRestartBytes: restart });
    const walBytes = () => statSync(`${file}-wal`).size;
    const blob = "y".repeat(20_000);
    const names = Array.from({ length: 50 }, (_, i) => `busy${i}`);
    for (const n of names) await store.create({ ...task(n), metadata: { name: n, annotations: { blob } } });
    // Four writers, each with its next write in flight as soon as the last is answered: some
    // group is open nearly all the time, so the background rounds never catch up on their own.
    let written = 0;
    let largest = 0;
    const last = new Map<string, string>();
    const writer = async (w: number) => {
      for (let i = 0; written < 16 * restart; i++) {
        const name = names[(w * 13 + i) % names.length];
        const value = `${w}-${i}-${blob}`;
        await store.update({ ...task(name), metadata: { name, annotations: { blob: value } } });
        last.set(name, value);
        written += value.length;
        largest = Math.max(largest, walBytes());
      }
    };
    await Promise.all([0, 1, 2, 3].map(writer));
    const stats = store.checkpointStats();
    expect(stats.failures).toBe(0);
    expect(stats.finished).toBeGreaterThan(0);
    // The rounds sync the database file themselves (SQLite does only after a round that
    // copied every frame), so a finish on the Hub's thread syncs one round's leftovers.
    expect(stats.databaseSyncs).toBeGreaterThan(0);
    // 32 MB of values went through the WAL. Never started over, it grew past 60 MB (each value
    // is stored in the row and in the event log); started over, it holds the restart size
    // and what one round's interval adds to it.
    expect(largest).toBeLessThan(written / 2);
    for (const [name, value] of last) expect((await store.get("Task", name))?.metadata.annotations?.blob).toBe(value);
  });

  it("encodes an event's watch line once and hands every watcher the same bytes", async () => {
    const { store } = await fresh();
    const seen: WatchEvent[][] = [[], []];
    const handles = await Promise.all(seen.map((into) => store.watch("Task", 0, (ev) => into.push(ev))));
    const created = await store.create(task("shared"));
    await eventually(() => seen.every((s) => s.length === 1), "both watchers got the event");
    const [a, b] = seen.map((s) => s[0]);
    expect(a.line!("ADDED")).toBe(b.line!("ADDED"));
    expect(JSON.parse(a.line!("ADDED").toString("utf8"))).toEqual({ type: "ADDED", object: created });
    expect(a.line!("ADDED").toString("utf8").endsWith("}\n")).toBe(true);
    for (const h of handles) h.stop();
  });

  it("keeps at most eventLogLimit events, compacting automatically", async () => {
    const { store } = await fresh({ eventLogLimit: 20 });
    for (let i = 0; i < 100; i++) {
      await store.create(worker(`w${i}`));
      expect(store.eventLogSize()).toBeLessThanOrEqual(20);
    }
    expect(await store.revision()).toBe(100);
    const compacted = store.compactedRevision();
    expect(compacted).toBeGreaterThanOrEqual(80);
    expect(store.eventLogSize()).toBe(100 - compacted);
    expect((await store.list("Worker")).items).toHaveLength(100);
    expect((await storeError(store.watch(undefined, compacted - 1, () => undefined))).reason).toBe("Gone");
    const events: WatchEvent[] = [];
    await store.watch(undefined, compacted, (e) => events.push(e));
    await eventually(() => events.length === 100 - compacted, "the retained log");
    expect(events.map((e) => e.revision)).toEqual(Array.from({ length: 100 - compacted }, (_, i) => compacted + 1 + i));
  });

  it("a txn larger than the limit still commits, and the log stays bounded", async () => {
    const { store } = await fresh({ eventLogLimit: 5 });
    const live: WatchEvent[] = [];
    await store.watch(undefined, 0, (e) => live.push(e));
    await store.txn(Array.from({ length: 12 }, (_, i) => ({ op: "create", object: task(`t${i}`) })));
    expect(store.eventLogSize()).toBeLessThanOrEqual(5);
    expect(store.compactedRevision()).toBe(1);
    // A watcher that was already streaming still gets every event: live delivery does not read the log.
    await eventually(() => live.length === 12, "12 live events");
    expect((await store.list("Task")).items).toHaveLength(12);
  });

  it("explicit compaction is clamped to the head and persists across reopen", async () => {
    const { store, file } = await fresh();
    for (let i = 0; i < 5; i++) await store.create(worker(`w${i}`));
    await store.compact(1000);
    expect(store.compactedRevision()).toBe(5);
    expect(store.eventLogSize()).toBe(0);
    await store.compact(2); // older than what is already compacted: no change
    expect(store.compactedRevision()).toBe(5);
    await store.close();
    const again = openSqliteStore(file);
    open.push(again);
    expect(again.compactedRevision()).toBe(5);
    expect(await again.revision()).toBe(5);
    expect((await storeError(again.watch(undefined, 4, () => undefined))).code).toBe(410);
  });

  it("stores each object's JSON once, in the log, and keeps a compacted object's event only while it is current", async () => {
    const { store, file } = await fresh({ eventLogLimit: 20 });
    for (let i = 0; i < 30; i++) await store.create(worker(`w${i}`));
    // w0..w9 were written before the cutoff: their events left the log but stay for the rows.
    expect(store.compactedRevision()).toBeGreaterThanOrEqual(10);
    let w0 = (await store.get("Worker", "w0"))!;
    for (let i = 0; i < 40; i++)
      w0 = await store.update({ ...w0, spec: { ...(w0.spec as object), max_concurrency: 3 + i } });
    await store.delete("Worker", "w1");
    const db = new Database(file, { readonly: true });
    try {
      const columns = db.prepare("SELECT name FROM pragma_table_info('objects')").pluck().all();
      expect(columns).toEqual(["kind", "name", "seq", "revision", "lease"]);
      // Every row holds the log's events plus one event per current object below the cutoff, nothing more.
      const compacted = store.compactedRevision();
      const rows = db.prepare("SELECT count(*) FROM events").pluck().get() as number;
      const kept = db.prepare("SELECT count(*) FROM objects WHERE revision <= ?").pluck().get(compacted) as number;
      expect(kept).toBeGreaterThan(0);
      expect(rows).toBe(store.eventLogSize() + kept);
      expect(db.prepare("SELECT count(*) FROM events WHERE name = 'w1' AND revision <= ?").pluck().get(compacted)).toBe(
        0,
      );
      // Every current object points at an event holding its own revision.
      const pointed = db
        .prepare(
          "SELECT o.name, json_extract(e.json, '$.metadata.resourceVersion') AS rv, o.revision FROM objects o JOIN events e ON e.seq = o.seq",
        )
        .all() as { name: string; rv: string; revision: number }[];
      expect(pointed).toHaveLength(29);
      for (const p of pointed) expect(Number(p.rv), p.name).toBe(p.revision);
    } finally {
      db.close();
    }
    await store.close();
    const again = openSqliteStore(file);
    open.push(again);
    expect((await again.get("Worker", "w0"))!.spec).toMatchObject({ max_concurrency: 42 });
    expect(await again.get("Worker", "w1")).toBeUndefined();
    expect((await again.get("Worker", "w2"))!.metadata.resourceVersion).toBe("3");
    expect((await again.list("Worker")).items.map((w) => w.metadata.name)).toHaveLength(29);
  });

  it("upgrades a store whose objects rows hold their own JSON, keeping every object, the log and the leases", async () => {
    const { dir, file } = await tempDb();
    dirs.push(dir);
    // The earlier layout, as a Loom before schema version 2 wrote it: the JSON in the row and in the log.
    const db = new Database(file);
    db.pragma("journal_mode = WAL");
    db.exec(`
      CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), revision INTEGER NOT NULL, compacted INTEGER NOT NULL, event_count INTEGER NOT NULL);
      CREATE TABLE objects (kind TEXT NOT NULL, name TEXT NOT NULL, json TEXT NOT NULL, revision INTEGER NOT NULL, PRIMARY KEY (kind, name));
      CREATE TABLE events (seq INTEGER PRIMARY KEY, revision INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT NOT NULL, type TEXT NOT NULL, json TEXT NOT NULL);
      CREATE INDEX events_by_revision ON events (revision);
      CREATE TABLE allocations (task TEXT PRIMARY KEY, worker TEXT NOT NULL, lease TEXT NOT NULL);
      CREATE INDEX allocations_by_worker ON allocations (worker);
    `);
    const obj = (name: string, rev: number, max: number) =>
      JSON.stringify({
        ...worker(name, undefined, { max_concurrency: max }),
        metadata: { name, resourceVersion: String(rev), uid: `u-${name}` },
      });
    const put = db.prepare("INSERT OR REPLACE INTO objects (kind, name, json, revision) VALUES ('Worker', ?, ?, ?)");
    const log = db.prepare("INSERT INTO events (revision, kind, name, type, json) VALUES (?, 'Worker', ?, ?, ?)");
    // Revisions 1-3 create a, b, c; 4 updates a; 5 deletes c. The log was compacted at 2.
    put.run("a", obj("a", 4, 5), 4);
    put.run("b", obj("b", 2, 2), 2);
    log.run(3, "c", "ADDED", obj("c", 3, 2));
    log.run(4, "a", "MODIFIED", obj("a", 4, 5));
    log.run(5, "c", "DELETED", obj("c", 5, 2));
    db.exec("INSERT INTO meta VALUES (1, 5, 2, 3)");
    db.pragma("user_version = 1");
    db.close();

    const store = openSqliteStore(file);
    open.push(store);
    expect(store.pragmaValue("user_version")).toBe(3);
    expect(await store.revision()).toBe(5);
    expect(store.compactedRevision()).toBe(2);
    expect(store.eventLogSize()).toBe(3);
    expect((await store.get("Worker", "a"))!.spec).toMatchObject({ max_concurrency: 5 });
    expect((await store.get("Worker", "b"))!.metadata.resourceVersion).toBe("2");
    expect((await store.list("Worker")).items.map((w) => w.metadata.name)).toEqual(["a", "b"]);
    // The log replays as before: b's kept event sits at its own revision, below the cutoff.
    const seen: string[] = [];
    await store.watch(undefined, 2, (e) => seen.push(`${e.type} ${e.name} ${e.revision}`));
    await eventually(() => seen.length === 3, "the log after the upgrade");
    expect(seen).toEqual(["ADDED c 3", "MODIFIED a 4", "DELETED c 5"]);
    // Writes go on at the next revision, and b's kept event goes once b is written again.
    const b = (await store.get("Worker", "b"))!;
    expect(
      (await store.update({ ...b, spec: { ...(b.spec as object), max_concurrency: 7 } })).metadata.resourceVersion,
    ).toBe("6");
    await store.close();
    const raw = new Database(file, { readonly: true });
    try {
      expect(raw.prepare("SELECT count(*) FROM events WHERE revision <= 2").pluck().get()).toBe(0);
      expect(raw.prepare("SELECT name FROM pragma_table_info('objects')").pluck().all()).not.toContain("json");
    } finally {
      raw.close();
    }
    const again = openSqliteStore(file);
    open.push(again);
    expect((await again.get("Worker", "b"))!.spec).toMatchObject({ max_concurrency: 7 });
  });

  it("refuses a store written by a later schema version, and leaves it as it was", async () => {
    const { dir, file } = await tempDb();
    dirs.push(dir);
    const db = new Database(file);
    db.pragma("user_version = 9");
    db.close();
    expect(() => openSqliteStore(file)).toThrow(
      /schema version 9, written by a later Loom; this one reads versions up to 3/,
    );
    const raw = new Database(file, { readonly: true });
    try {
      expect(raw.pragma("user_version", { simple: true })).toBe(9);
      expect(raw.prepare("SELECT count(*) FROM sqlite_master").pluck().get()).toBe(0);
    } finally {
      raw.close();
    }
  });

  it("writes of one group see each other's revisions and log size, and a failed one moves neither", async () => {
    const { store, file } = await fresh({ eventLogLimit: 10 });
    // apply() commits synchronously: while the first write's flush runs, the rest join one open group.
    const flushes = store.commitStats().commits;
    const applied = [];
    for (let i = 0; i < 8; i++) {
      applied.push(await store.apply([{ op: "create", object: worker(`w${i}`) }]));
      expect(await store.revision()).toBe(i + 1);
      expect(store.eventLogSize()).toBe(i + 1);
    }
    const failed = await storeError(store.apply([{ op: "create", object: worker("w0") }]));
    expect(failed.reason).toBe("AlreadyExists");
    expect(await store.revision()).toBe(8);
    // Past the limit inside the same group: the log is compacted, and the group sees it.
    const big = await store.apply(Array.from({ length: 6 }, (_, i) => ({ op: "create", object: task(`t${i}`) })));
    expect(big.revision).toBe(9);
    expect(store.eventLogSize()).toBeLessThanOrEqual(10);
    const compacted = store.compactedRevision();
    expect(compacted).toBeGreaterThan(0);
    const listed = await store.list("Worker");
    expect(listed.revision).toBe(9);
    expect(listed.items).toHaveLength(8);
    expect(applied.map((a) => a.revision)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    await Promise.all([...applied, big].map((a) => a.durable));
    expect(store.commitStats().commits - flushes).toBeLessThanOrEqual(3);
    // What the group kept in memory reached the row: another connection, and a reopen, agree.
    const other = openSqliteStore(file);
    open.push(other);
    expect(await other.revision()).toBe(9);
    expect(other.compactedRevision()).toBe(compacted);
    expect(other.eventLogSize()).toBe(store.eventLogSize());
    await store.close();
    const again = openSqliteStore(file);
    open.push(again);
    expect(await again.revision()).toBe(9);
    expect((await again.create(worker("w9"))).metadata.resourceVersion).toBe("10");
  });

  it("a second connection to the same file sees commits at once and never reuses a revision", async () => {
    const { store, file } = await fresh();
    const other = openSqliteStore(file);
    open.push(other);
    await store.create(worker("w1"));
    expect((await other.get<StoredObject>("Worker", "w1"))?.metadata.resourceVersion).toBe("1");
    const t = await other.create(task("t1"));
    const w2 = await store.create(worker("w2"));
    expect(t.metadata.resourceVersion).toBe("2");
    expect(w2.metadata.resourceVersion).toBe("3");
  });

  it("a write decides against another connection's commit, never against what this one wrote before it", async () => {
    const { store, file } = await fresh();
    const other = openSqliteStore(file);
    open.push(other);
    const mine = await store.create(worker("w1"));
    const theirs = await other.update({ ...mine, spec: { ...(mine.spec as object), max_concurrency: 9 } });
    // A stale resourceVersion is refused, and a write without one keeps the other connection's spec change.
    expect((await storeError(store.update({ ...mine, metadata: { ...mine.metadata } }))).reason).toBe("Conflict");
    const status: StoredObject = await store.updateStatus({
      ...theirs,
      metadata: { name: "w1" },
      status: { reported_active: 1 },
    });
    expect(status.spec).toMatchObject({ max_concurrency: 9 });
    expect(status.metadata.resourceVersion).toBe("3");
    // Deleted over there: this connection no longer finds it.
    await other.delete("Worker", "w1");
    expect((await storeError(store.updateStatus({ ...status, metadata: { name: "w1" } }))).reason).toBe("NotFound");
  });

  it("the lease guard counts the leases another connection granted and released", async () => {
    const { store, file } = await fresh();
    const other = openSqliteStore(file);
    open.push(other);
    const cap = { cpu_millis: 1000, memory_mb: 1024, disk_mb: 0, gpu_count: 0 };
    await store.create(worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 1, resource_capacity: cap }));
    for (const n of ["t1", "t2", "t3"]) await store.create(task(n));
    // This connection has read its leases (none) before the other grants one.
    await leaseOnW1(store, "t1", 300);
    await leaseOnW1(other, "t2", 600);
    expect((await storeError(leaseOnW1(store, "t3", 200))).message).toContain("cpu_millis");
    // The other connection releases t2: this one sees the room.
    await other.delete("Task", "t2");
    await leaseOnW1(store, "t3", 700);
  });

  /**
   * A store file of an earlier schema version: worker w1 (1000 millicores), tasks t1-t4, t1 and
   * t2 leased on w1 with 300 each; `downgrade` rewrites the file as that version left it.
   */
  async function earlierStore(downgrade: (raw: Database.Database) => void): Promise<string> {
    const { dir, file } = await tempDb();
    dirs.push(dir);
    const cap = { cpu_millis: 1000, memory_mb: 1024, disk_mb: 0, gpu_count: 0 };
    const first = openSqliteStore(file);
    await first.create(worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 1, resource_capacity: cap }));
    for (const n of ["t1", "t2", "t3", "t4"]) await first.create(task(n));
    await leaseOnW1(first, "t1", 300);
    await leaseOnW1(first, "t2", 300);
    await first.close();
    const raw = new Database(file);
    downgrade(raw);
    raw.close();
    return file;
  }

  /** Opens it: the upgraded store holds t1's and t2's leases (600 millicores of w1's 1000). */
  async function openWithTwoLeases(file: string): Promise<SqliteStore> {
    const store = openSqliteStore(file);
    open.push(store);
    expect(store.pragmaValue("user_version")).toBe(3);
    expect((await storeError(leaseOnW1(store, "t3", 500))).message).toContain("cpu_millis");
    await leaseOnW1(store, "t3", 400);
    expect((await storeError(leaseOnW1(store, "t4", 1))).message).toContain("cpu_millis");
    return store;
  }

  it("builds the lease index of a store written before it existed from the leases its Tasks hold", async () => {
    // As a Loom before schema version 1 left it: the leases in the Tasks alone.
    const file = await earlierStore((raw) => {
      raw.exec("ALTER TABLE objects DROP COLUMN lease");
      raw.pragma("user_version = 0");
    });
    await openWithTwoLeases(file);
  });

  it("flags the leased Tasks of a store that kept its leases in an allocations table, and drops the table", async () => {
    // As schema version 2 left it: no flag column, the leases in a table of their own.
    const file = await earlierStore((raw) => {
      raw.exec(`
        ALTER TABLE objects DROP COLUMN lease;
        CREATE TABLE allocations (task TEXT PRIMARY KEY, worker TEXT NOT NULL, lease TEXT NOT NULL);
        INSERT INTO allocations VALUES ('t1', 'w1', '{}'), ('t2', 'w1', '{}');
      `);
      raw.pragma("user_version = 2");
    });
    const store = await openWithTwoLeases(file);
    await store.close();
    const after = new Database(file, { readonly: true });
    try {
      expect(after.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'allocations'").pluck().get()).toBe(0);
      expect(after.prepare("SELECT name FROM objects WHERE lease = 1 ORDER BY name").pluck().all()).toEqual([
        "t1",
        "t2",
        "t3",
      ]);
    } finally {
      after.close();
    }
  });

  it("keeps a Task's lease flag with its row: set by a grant, kept by a start, cleared by a release or a delete", async () => {
    const { store, file } = await fresh();
    const cap = { cpu_millis: 1000, memory_mb: 1024, disk_mb: 0, gpu_count: 0 };
    await store.create(worker("w1", undefined, { max_concurrency: 4, initial_concurrency: 1, resource_capacity: cap }));
    for (const n of ["t1", "t2"]) await store.create(task(n));
    const flags = () => {
      const raw = new Database(file, { readonly: true });
      try {
        return raw.prepare("SELECT name, lease FROM objects WHERE kind = 'Task' ORDER BY name").raw().all();
      } finally {
        raw.close();
      }
    };
    await leaseOnW1(store, "t1", 300);
    await leaseOnW1(store, "t2", 300);
    expect(flags()).toEqual([
      ["t1", 1],
      ["t2", 1],
    ]);
    const t1 = (await store.get<StoredObject & { status: Record<string, unknown> }>("Task", "t1"))!;
    await store.updateStatus({ ...t1, status: { ...t1.status, state: "running" } });
    const t2 = (await store.get<StoredObject & { status: Record<string, unknown> }>("Task", "t2"))!;
    await store.updateStatus({ ...t2, status: { state: "returned", attempt: 1 } });
    expect(flags()).toEqual([
      ["t1", 1],
      ["t2", 0],
    ]);
    await store.delete("Task", "t1");
    expect(flags()).toEqual([["t2", 0]]);
  });

  it("decides on the caller's copy of an object only when it is at the row's revision", async () => {
    const { store, file } = await fresh();
    const first = await store.create(worker("w1"));
    const second = await store.update({ ...first, spec: { ...(first.spec as object), max_concurrency: 7 } });
    await store.close();
    // A new connection: nothing decoded yet, so every read below goes to the row.
    const again = openSqliteStore(file);
    open.push(again);
    const status = (o: StoredObject, n: number): TxnOp => ({
      op: "updateStatus",
      object: { ...o, metadata: { name: o.metadata.name }, status: { reported_active: n } },
    });
    // A copy behind the row is not decided on: the write keeps the stored spec.
    const stale = await again.apply([status(first, 1)], { known: () => first, readOnlyResults: true });
    expect(stale.results[0].spec).toMatchObject({ max_concurrency: 7 });
    // A caller that believes there is none still finds the stored object.
    const third = (await again.apply([status(second, 2)], { known: () => null })).results[0];
    expect(third.metadata.resourceVersion).toBe("4");
    await again.close();
    const last = openSqliteStore(file);
    open.push(last);
    // A copy at the row's revision stands in for decoding it: the write shares its parts.
    const copy = structuredClone(third);
    const shared = await last.apply([status(copy, 3)], { known: () => copy, readOnlyResults: true });
    expect(shared.results[0].spec).toBe(copy.spec);
    expect(shared.results[0].status).toEqual({ reported_active: 3 });
    expect((await last.get("Worker", "w1"))!.spec).toEqual(second.spec);
  });

  it("rejects writes and reads after close", async () => {
    const { store } = await fresh();
    await store.close();
    await expect(store.get("Worker", "w1")).rejects.toThrow(/closed/);
    await expect(store.create(worker("w1"))).rejects.toThrow(/closed/);
    await store.close(); // idempotent
  });

  it("a list is one snapshot while writes land during it, and shows every write applied before it", async () => {
    const { store } = await fresh();
    const N = 20_000;
    const ops: TxnOp[] = [];
    for (let j = 0; j < N; j++) ops.push({ op: "create", object: worker(`w${String(j).padStart(6, "0")}`) });
    await store.txn(ops);
    const at = await store.revision();
    // Writes start while the list is decoding (it yields to I/O every few milliseconds).
    const listing = store.list("Worker");
    let writes = 0;
    const writing = (async () => {
      for (let k = 0; k < 20; k++) {
        await new Promise((r) => setImmediate(r));
        await store.create(worker(`x${k}`));
        await store.delete("Worker", `w${String(k).padStart(6, "0")}`);
        writes += 2;
      }
    })();
    const [all] = await Promise.all([listing, writing]);
    expect(writes).toBe(40);
    expect(all.revision).toBe(at);
    expect(all.items).toHaveLength(N);
    expect(all.items.some((w) => w.metadata.name.startsWith("x"))).toBe(false);
    expect(all.items[0].metadata.name).toBe("w000000");
    // A write applied while a WAL flush is in flight sits in a group not committed yet: a
    // list of this process shows it, as it shows everything this process applied.
    const first = store.create(task("a"));
    const applied = await store.apply([{ op: "create", object: task("b") }]);
    const tasks = await store.list("Task");
    expect(tasks.items.map((t) => t.metadata.name)).toEqual(["a", "b"]);
    expect(tasks.revision).toBe(applied.revision);
    await applied.durable;
    await first;
    const later = await store.list("Worker");
    expect(later.items).toHaveLength(N);
    expect(later.items.filter((w) => w.metadata.name.startsWith("x"))).toHaveLength(20);
  }, 120_000);

  it("lists and selects among 20k objects in name order", async () => {
    const { store } = await fresh();
    const N = 20_000;
    const batch = 5_000;
    for (let i = 0; i < N; i += batch) {
      const ops: TxnOp[] = [];
      for (let j = i; j < i + batch; j++)
        ops.push({ op: "create", object: worker(`w${String(j).padStart(6, "0")}`, { shard: String(j % 10) }) });
      await store.txn(ops);
    }
    const all = await store.list("Worker");
    expect(all.items).toHaveLength(N);
    expect(all.items[0].metadata.name).toBe("w000000");
    expect(all.items[N - 1].metadata.name).toBe("w019999");
    const shard = await store.list("Worker", { labelSelector: "shard=3" });
    expect(shard.items).toHaveLength(N / 10);
    expect(shard.items.every((w) => w.metadata.labels?.shard === "3")).toBe(true);
    for (let i = 0; i < 100; i++) {
      const name = `w${String((i * 97) % N).padStart(6, "0")}`;
      expect((await store.get("Worker", name))?.metadata.name).toBe(name);
    }
  }, 120_000);
});
