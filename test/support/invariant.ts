// Test support: replay a store's history from a watch and record every revision at which a
// worker held more than it may (reservations over capacity, or more active leases than
// max_concurrency), and every task leased twice in one attempt.
import { allocationOf } from "../../src/admission/guard.ts";
import { effectiveCapacity } from "../../src/admission/capacity.ts";
import type { Task, Worker } from "../../src/resources/types.ts";
import type { Store, WatchEvent, WatchHandle } from "../../src/store/store.ts";

export class InvariantRecorder {
  readonly violations: string[] = [];
  /** Highest revision replayed. */
  revision = 0;
  /** task/attempt -> workers that held a lease with that attempt. */
  readonly leasesByAttempt = new Map<string, Set<string>>();
  maxActiveSeen = 0;
  private readonly workers = new Map<string, Worker>();
  private readonly tasks = new Map<string, Task>();
  private handle: WatchHandle | undefined;
  private pendingRev = -1;

  async start(store: Store, from = 0): Promise<void> {
    this.handle = await store.watch(undefined, from, (ev) => this.apply(ev));
  }

  stop(): void {
    this.handle?.stop();
  }

  private apply(ev: WatchEvent): void {
    const o = ev.object;
    const map = o.kind === "Worker" ? this.workers : o.kind === "Task" ? this.tasks : undefined;
    if (!map) return ((this.revision = ev.revision), undefined);
    if (ev.type === "DELETED") map.delete(o.metadata.name);
    else (map as Map<string, unknown>).set(o.metadata.name, o);
    if (o.kind === "Task" && ev.type !== "DELETED") {
      const t = o as unknown as Task;
      const a = allocationOf(t);
      if (a) {
        const key = `${t.metadata.name}#${t.status?.attempt}`;
        const set = this.leasesByAttempt.get(key) ?? new Set();
        set.add(a.worker);
        this.leasesByAttempt.set(key, set);
        if (set.size > 1) this.violations.push(`rev ${ev.revision}: task ${key} leased to ${[...set].join(", ")}`);
      }
    }
    this.revision = ev.revision;
    // Check once all events of a revision are in (they arrive in one synchronous run).
    if (this.pendingRev !== ev.revision) {
      this.pendingRev = ev.revision;
      queueMicrotask(() => this.check(ev.revision));
    }
  }

  private check(rev: number): void {
    const held = new Map<string, { cpu: number; mem: number; active: number; exclusive: boolean }>();
    for (const t of this.tasks.values()) {
      const a = allocationOf(t);
      if (!a) continue;
      const h = held.get(a.worker) ?? { cpu: 0, mem: 0, active: 0, exclusive: false };
      h.cpu += a.lease.reservation.cpu_millis;
      h.mem += a.lease.reservation.memory_mb;
      h.active++;
      h.exclusive ||= a.lease.placement === "exclusive";
      held.set(a.worker, h);
    }
    for (const [name, h] of held) {
      this.maxActiveSeen = Math.max(this.maxActiveSeen, h.active);
      const w = this.workers.get(name);
      if (!w) continue;
      const cap = effectiveCapacity(w).capacity;
      const max = w.spec.max_concurrency ?? w.status?.registration?.max_concurrency ?? 1;
      if (h.cpu > cap.cpu_millis)
        this.violations.push(`rev ${rev}: ${name} reserves ${h.cpu} cpu_millis of ${cap.cpu_millis}`);
      if (h.mem > cap.memory_mb)
        this.violations.push(`rev ${rev}: ${name} reserves ${h.mem} memory_mb of ${cap.memory_mb}`);
      if (h.active > max) this.violations.push(`rev ${rev}: ${name} holds ${h.active} leases, max_concurrency ${max}`);
      if (h.exclusive && h.active > 1)
        this.violations.push(`rev ${rev}: ${name} holds an exclusive lease beside others`);
    }
  }
}
