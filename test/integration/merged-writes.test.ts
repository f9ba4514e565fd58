// Task status writes made in one turn of the event loop go to the store as one transaction,
// and each caller still learns its own outcome: a write the store refuses fails alone, and
// two writes of one task in the same turn both land, the second decided again on the first.
// On the embedded store and on a real etcd.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { Task, TaskStatus } from "../../src/resources/types.ts";
import { SchedulerContext } from "../../src/scheduler/context.ts";
import { Informer } from "../../src/store/cache.ts";
import { isStoreError } from "../../src/store/errors.ts";
import { openEtcdStore } from "../../src/store/etcd.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import type { Store, StoredObject } from "../../src/store/store.ts";
import { etcdMissing, startEtcd, type EtcdCluster } from "../support/etcd.ts";

const A = "loom.dev/v1alpha1";

type Backend = { name: string; skip?: string; open(dir: string): Promise<{ store: Store; stop(): Promise<void> }> };
const backends: Backend[] = [
  {
    name: "sqlite",
    open: async (dir) => {
      const store = openSqliteStore(join(dir, "loom.db"));
      return { store, stop: () => store.close() };
    },
  },
  {
    name: "etcd",
    skip: etcdMissing,
    open: async () => {
      const etcd: EtcdCluster = await startEtcd();
      const store = await openEtcdStore({ endpoints: etcd.endpoints, prefix: "/loom-merged" });
      return {
        store,
        stop: async () => {
          await store.close();
          await etcd.stop();
        },
      };
    },
  },
];

for (const b of backends) {
  describe.skipIf(b.skip)(`status writes of one turn, merged (${b.name})`, () => {
    let dir: string;
    let store: Store;
    let stop: () => Promise<void>;
    let cache: Informer;
    let ctx: SchedulerContext;
    /** Every store transaction the context committed: its op count, and whether it failed. */
    let commits: { ops: number; failed: boolean }[];

    beforeEach(async () => {
      dir = await mkdtemp(join(tmpdir(), "loom-merged-"));
      ({ store, stop } = await b.open(dir));
      for (const name of ["a", "b", "c"])
        await store.create({
          apiVersion: A,
          kind: "Task",
          metadata: { name },
          spec: { required_capability: "", execution_profile: { placement: "shared", resources: {} }, payload: {} },
          status: { state: "queued", attempt: 1 },
        });
      cache = new Informer(store, ["Task"]);
      await cache.start();
      commits = [];
      ctx = new SchedulerContext(
        store,
        cache,
        { heartbeatGraceSeconds: 60, defaultMaxAttempts: 3, resultsDir: join(dir, "results") },
        {
          observer: { commit: (_s, ops, error) => commits.push({ ops, failed: error !== undefined }), claim: () => {} },
        },
      );
    });
    afterEach(async () => {
      cache.stop();
      await stop();
      await rm(dir, { recursive: true, force: true });
    });

    const task = (name: string) => cache.get<Task & StoredObject>("Task", name)!;
    /** Set one field of the task's status; resolves with how many times `fn` decided. */
    const setField = async (name: string, change: Partial<TaskStatus>): Promise<number> => {
      let decided = 0;
      await ctx.updateTask(name, (t) => {
        decided++;
        return { status: { ...t.status, ...change }, result: undefined };
      });
      return decided;
    };

    it("writes of three tasks in one turn commit at one revision", async () => {
      const before = await store.revision();
      await Promise.all([
        setField("a", { issues: ["one"] }),
        setField("b", { issues: ["two"] }),
        setField("c", { issues: ["three"] }),
      ]);
      const revs = ["a", "b", "c"].map((n) => task(n).metadata.resourceVersion);
      expect(new Set(revs).size).toBe(1);
      expect(Number(revs[0])).toBeGreaterThan(before);
      expect(["a", "b", "c"].map((n) => task(n).status?.issues)).toEqual([["one"], ["two"], ["three"]]);
    });

    it("a turn's writes past what one transaction holds go in a few, each within the store's limits", async () => {
      const names = Array.from({ length: 150 }, (_, i) => `many-${i}`);
      for (const part of [names.slice(0, 75), names.slice(75)])
        await store.txn(
          part.map((name) => ({
            op: "create" as const,
            object: {
              apiVersion: A,
              kind: "Task",
              metadata: { name },
              spec: { required_capability: "", execution_profile: { placement: "shared", resources: {} }, payload: {} },
              status: { state: "queued", attempt: 1 },
            },
          })),
        );
      await cache.waitForRevision(await store.revision());
      commits = [];
      await Promise.all(names.map((n) => setField(n, { issues: [n] })));
      expect(names.every((n) => task(n).status?.issues?.[0] === n)).toBe(true);
      // Sent in as few transactions as the store's limit allows, none of them refused for its size.
      const most = Math.min(names.length, Math.floor(store.maxWritesPerTxn / 3));
      expect(commits).toHaveLength(Math.ceil(names.length / most));
      expect(commits.every((c) => !c.failed && c.ops <= most)).toBe(true);
    });

    it("a write the store refuses fails alone; the others of its turn land", async () => {
      const results = await Promise.allSettled([
        setField("a", { issues: ["kept"] }),
        setField("b", { state: "no-such-state" } as unknown as Partial<TaskStatus>),
        setField("c", { issues: ["kept too"] }),
      ]);
      expect(results[0].status).toBe("fulfilled");
      expect(results[2].status).toBe("fulfilled");
      expect(results[1].status).toBe("rejected");
      const err = (results[1] as PromiseRejectedResult).reason;
      expect(isStoreError(err, "Invalid")).toBe(true);
      expect(String(err.message)).toMatch(/status\.state/);
      expect(task("a").status?.issues).toEqual(["kept"]);
      expect(task("c").status?.issues).toEqual(["kept too"]);
      // Nothing of the refused write was stored.
      expect(task("b").status?.state).toBe("queued");
    });

    it("two writes of one task in one turn both land, the second decided again on the first", async () => {
      const [first, second] = await Promise.all([
        setField("a", { issues: ["first"] }),
        setField("a", { finished_at: "2030-01-01T00:00:00.000Z" }),
      ]);
      expect(task("a").status?.issues).toEqual(["first"]);
      expect(task("a").status?.finished_at).toBe("2030-01-01T00:00:00.000Z");
      // The second was decided on the task before the first landed, then again after it.
      expect(first + second).toBe(3);
    });
  });
}
