// The SQLite store's active leases in memory: by task, by worker (the lease guard reads one
// worker's), and each queue's usage summed (the quota guard reads one queue's). The store
// builds it from the Tasks whose rows carry the lease flag (sqlite.ts), and a write
// transaction reads it, so a lease costs the guards no query, no JSON decode and no
// secondary index in the file.
//
// Every change goes through set(), which hands back what it replaced: a transaction records
// that to undo its changes if it rolls back (SqliteStore.apply), and a store that finds
// another connection's commit, or a failed COMMIT, builds the index again from the flagged Tasks.
import { allocationQueue, type Allocation } from "../admission/guard.ts";
import { addDemand, type Amounts } from "../admission/queues.ts";
import type { LeaseView } from "../admission/view.ts";

export class AllocationIndex {
  private readonly byTask = new Map<string, Allocation>();
  private readonly byWorker = new Map<string, Map<string, LeaseView>>();
  private readonly usage = new Map<string, Amounts>();

  /** The allocation a task holds, if any. */
  get(task: string): Allocation | undefined {
    return this.byTask.get(task);
  }

  /** The leases held on a worker. */
  on(worker: string): LeaseView[] {
    const m = this.byWorker.get(worker);
    return m ? [...m.values()] : [];
  }

  /** What a queue's leases reserve, summed (the same sums as the etcd store's usage records: demandOf). Read it, never change it. */
  queueUsage(queue: string): Readonly<Amounts> {
    return this.usage.get(queue) ?? {};
  }

  /** The task's allocation becomes `next` (undefined: none). Returns the one it replaced. */
  set(task: string, next: Allocation | undefined): Allocation | undefined {
    const prev = this.byTask.get(task);
    if (prev) {
      this.byTask.delete(task);
      const m = this.byWorker.get(prev.worker)!;
      m.delete(task);
      if (m.size === 0) this.byWorker.delete(prev.worker);
      this.move(allocationQueue(prev), prev, -1);
    }
    if (next) {
      this.byTask.set(task, next);
      let m = this.byWorker.get(next.worker);
      if (!m) this.byWorker.set(next.worker, (m = new Map()));
      m.set(task, next.lease);
      this.move(allocationQueue(next), next, 1);
    }
    return prev;
  }

  clear(): void {
    this.byTask.clear();
    this.byWorker.clear();
    this.usage.clear();
  }

  private move(queue: string, a: Allocation, sign: 1 | -1): void {
    let u = this.usage.get(queue);
    if (!u) this.usage.set(queue, (u = {}));
    addDemand(u, a.lease.reservation, sign);
  }
}
