// Task-lease controller: a lease that reaches its lease_until without a renewal ends, and the
// task is requeued with attempt+1 (or ends lease_expired once attempts run out). The key is
// a task name. A task change queues its key for the moment its lease falls due, so expiry
// happens at lease_until, not at the next sweep over all tasks; a renewal moves lease_until
// later and the early wake-up only queues the key again for the new time. The decision reads
// lease_until from the store's object, so a new leader never expires a lease early.
import { currentRenewal, leaseDue, RENEWAL_KIND } from "../scheduler/renewal.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import type { Task } from "../resources/types.ts";
import type { Reconciler, Result } from "./controller.ts";
import { isStoreError } from "../store/errors.ts";

/** A wake-up this late after lease_until makes sure the clock has passed it. */
const SLACK_MS = 5;

/** What the lease controller uses: tasks with their renewals, the clock, and the expiry itself. */
export type LeaseExpiryDeps = Pick<
  ControllerServices,
  "store" | "now" | "task" | "tasksInState" | "renewal" | "expireLease"
>;

export class LeaseExpiry implements Reconciler {
  readonly name = "lease-expiry";
  constructor(private readonly deps: LeaseExpiryDeps) {}

  /** Every task holding an active lease. */
  keys(): string[] {
    return [...this.deps.tasksInState("leased"), ...this.deps.tasksInState("running")].map((t) => t.metadata.name);
  }

  /** How long from now until this task's lease falls due, if it holds one. */
  delayOf(t: Task): number | undefined {
    const due = leaseDue(t, this.deps.renewal(t.metadata.name));
    return due === undefined ? undefined : Math.max(0, due - this.deps.now() + SLACK_MS);
  }

  /** Whether a renewal is left from a lease that has ended, or from a task that is gone (reconcile deletes it). */
  leftBehind(name: string, t: Task | undefined): boolean {
    const r = this.deps.renewal(name);
    return r !== undefined && (t === undefined || !currentRenewal(t, r));
  }

  /** A renewal left behind is deleted (as it was read: a new renewal stays). */
  private async dropRenewal(name: string, t: Task | undefined): Promise<Result> {
    if (!this.leftBehind(name, t)) return;
    const r = this.deps.renewal(name)!;
    try {
      await this.deps.store.delete(RENEWAL_KIND, r.metadata.name, { resourceVersion: r.metadata.resourceVersion });
    } catch (e) {
      if (!isStoreError(e, "NotFound") && !isStoreError(e, "Conflict")) throw e;
    }
    return { writes: 1 };
  }

  async reconcile(name: string): Promise<Result> {
    const t = this.deps.task(name);
    if (!t) return this.dropRenewal(name, undefined);
    const wait = this.delayOf(t);
    if (wait === undefined) return this.dropRenewal(name, t); // no active lease: nothing to expire
    if (wait > SLACK_MS) return { requeueAfterMs: wait };
    const expired = await this.deps.expireLease(name);
    if (expired) return { writes: 1 };
    // Not due after all (renewed meanwhile): look again when the lease as it stands falls due.
    const fresh = this.deps.task(name);
    const again = fresh && this.delayOf(fresh);
    return again === undefined ? undefined : { requeueAfterMs: again };
  }
}
