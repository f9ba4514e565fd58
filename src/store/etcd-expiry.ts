// Kinds whose objects etcd deletes by itself once they have not been written for their time
// to live (Events): every put of such an object carries an etcd lease, and when the lease
// expires etcd deletes its keys, which every watch sees as DELETED. Nothing has to list the
// objects to find the old ones, and they go even while no Hub runs.
//
// One lease per kind is granted per window (a tenth of the TTL, at most a minute) and shared
// by every put in that window, so a busy Hub asks for a lease once a window, not once a
// write. Its TTL is the kind's time to live plus the window: an object lives at least its TTL
// after its last write, and at most one window longer. A lease is handed out only within its
// window, far from its end, so a put never carries one that has already expired; if etcd no
// longer knows it anyway (it was revoked), forget() makes the next put ask for a new one.
import type { TxnOp } from "./store.ts";

/** etcd's answer to a put carrying a lease it does not know (etcd3 names it EtcdLeaseInvalidError); nothing was applied. */
export const leaseUnknown = (e: unknown): boolean =>
  /requested lease not found/.test(String((e as Error)?.message ?? e));

/** The longest a lease is handed out for, after it was granted. */
const MAX_WINDOW_MS = 60_000;

type Granted = { id: string; at: number };

export class ExpiryLeases {
  private readonly current = new Map<string, Granted>();
  private readonly granting = new Map<string, Promise<Granted>>();

  /**
   * `ttlSeconds`: the kinds that expire, each with its time to live; `grant` asks etcd for a
   * lease of a TTL in seconds and resolves with its ID.
   */
  constructor(
    private readonly ttlSeconds: ReadonlyMap<string, number>,
    private readonly grant: (ttlSeconds: number) => Promise<string>,
  ) {
    for (const [kind, ttl] of ttlSeconds)
      if (!Number.isInteger(ttl) || ttl < 1)
        throw new Error(
          `etcd store: the time to live of ${kind} must be a whole number of seconds, at least 1, got ${ttl}`,
        );
  }

  expires(kind: string): boolean {
    return this.ttlSeconds.has(kind);
  }

  /** The lease each expiring kind that `ops` puts carries, by kind; undefined when they put none. */
  async forOps(ops: TxnOp[]): Promise<Map<string, string> | undefined> {
    if (this.ttlSeconds.size === 0) return undefined;
    let leases: Map<string, string> | undefined;
    for (const op of ops) {
      const kind = op && typeof op === "object" && "object" in op ? op.object?.kind : undefined;
      if (kind === undefined || !this.ttlSeconds.has(kind) || leases?.has(kind)) continue;
      (leases ??= new Map()).set(kind, await this.leaseFor(kind));
    }
    return leases;
  }

  /** etcd did not know a lease a put carried: the next put of that kind gets a new one. */
  forget(): void {
    this.current.clear();
  }

  private window(kind: string): number {
    return Math.min(MAX_WINDOW_MS, (this.ttlSeconds.get(kind)! * 1000) / 10);
  }

  private async leaseFor(kind: string): Promise<string> {
    const cur = this.current.get(kind);
    if (cur && Date.now() - cur.at < this.window(kind)) return cur.id;
    let pending = this.granting.get(kind);
    if (!pending) {
      // Timed from before the grant: the lease's TTL runs from when etcd granted it.
      const at = Date.now();
      const ttl = this.ttlSeconds.get(kind)! + Math.ceil(this.window(kind) / 1000);
      pending = this.grant(ttl).then(
        (id) => {
          this.granting.delete(kind);
          const g = { id, at };
          this.current.set(kind, g);
          return g;
        },
        (e: unknown) => {
          this.granting.delete(kind);
          throw e;
        },
      );
      this.granting.set(kind, pending);
    }
    return (await pending).id;
  }
}
