// Copy one store into another (SQLite to etcd when a site grows to several Hubs): names,
// labels, annotations, specs and status are kept; uids, creation times and resourceVersions
// are the target's own. Workers go first, so a leased Task's lease passes the target's guard.
import { loadCrds } from "../resources/crds.ts";
import type { Store, StoredObject } from "./store.ts";

/** Objects per target transaction: well inside etcd's default request limits. */
const CHUNK = 100;

export type MigrateReport = { kinds: Record<string, number>; total: number };

export async function migrateStore(
  from: Store,
  to: Store,
  onProgress: (kind: string, copied: number) => void = () => {},
): Promise<MigrateReport> {
  // TaskLease: the lease renewals (scheduler/renewal.ts); without them a renewed lease would end at its grant-time lease_until.
  const kinds = [
    "Worker",
    ...[...loadCrds().keys()].filter((k) => k !== "Worker" && k !== "Task"),
    "Task",
    "TaskLease",
    "Event",
  ];
  for (const kind of kinds) {
    const there = (await to.list(kind)).items.length;
    if (there > 0)
      throw new Error(
        `the target already holds ${there} ${kind} object(s); migrate into an empty store (or another prefix)`,
      );
  }
  const report: MigrateReport = { kinds: {}, total: 0 };
  for (const kind of kinds) {
    const { items } = await from.list(kind);
    const size = Math.min(CHUNK, to.maxWritesPerTxn);
    for (let i = 0; i < items.length; i += size) {
      await to.txn(items.slice(i, i + size).map((o) => ({ op: "create" as const, object: portable(o) })));
      onProgress(kind, Math.min(i + size, items.length));
    }
    report.kinds[kind] = items.length;
    report.total += items.length;
  }
  return report;
}

/** The object without what the target assigns itself. */
function portable(o: StoredObject): StoredObject {
  const { uid: _u, resourceVersion: _r, creationTimestamp: _c, generation: _g, ...metadata } = o.metadata;
  return { ...o, metadata };
}
