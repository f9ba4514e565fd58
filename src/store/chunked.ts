// Batches larger than one transaction of the store (etcd's --max-txn-ops), written so that
// the caller's promise still holds.
import { isStoreError } from "./errors.ts";
import { chunks } from "./ops.ts";
import type { Store, StoredObject, TxnOp } from "./store.ts";

/**
 * Commit creates (and checks) all or none. What fits one transaction is one transaction.
 * A larger batch is written in chunks, and when a chunk fails the objects the earlier
 * chunks created are deleted again, each only while it is still as written (a task
 * leased in between stays, and the error names it). `commit` is how the caller writes one
 * chunk (the scheduler's commit waits for its informer).
 */
export async function createAllOrNothing<T extends StoredObject>(
  store: Store,
  ops: TxnOp<T>[],
  commit: (ops: TxnOp<T>[]) => Promise<T[]>,
): Promise<T[]> {
  if (ops.length <= store.maxWritesPerTxn) return commit(ops);
  const bad = ops.find((o) => o.op !== "create" && o.op !== "check");
  if (bad) throw new Error(`createAllOrNothing: a ${bad.op} cannot be undone; split only creates and checks`);
  const written: T[] = [];
  try {
    for (const chunk of chunks(ops, store.maxWritesPerTxn)) written.push(...(await commit(chunk)));
    return written;
  } catch (e) {
    const kept = await undoCreates(store, written);
    if (kept.length && e instanceof Error)
      e.message += `; ${kept.length} object(s) created by the earlier part changed before they could be removed: ${kept.slice(0, 10).join(", ")}`;
    throw e;
  }
}

/** Delete what was created, each at the resourceVersion it was created at; returns the names that moved on. */
async function undoCreates(store: Store, created: StoredObject[]): Promise<string[]> {
  const kept: string[] = [];
  const ops: TxnOp[] = created.map((o) => ({
    op: "delete",
    kind: o.kind,
    name: o.metadata.name,
    resourceVersion: o.metadata.resourceVersion,
  }));
  for (const chunk of chunks(ops, store.maxWritesPerTxn)) {
    try {
      await store.txn(chunk);
    } catch {
      for (const op of chunk) {
        await store.txn([op]).catch((e: unknown) => {
          if (!isStoreError(e, "NotFound") && op.op === "delete") kept.push(op.name);
        });
      }
    }
  }
  return kept;
}
