// Which Hub replica runs the singleton work (lease expiry, the push dispatcher, admission
// conditions, GitOps sync, Event GC). A Hub on SQLite is the only replica, so it always
// leads; on etcd the replicas elect one (etcd-leader.ts).
//
// Correctness never depends on there being one leader at a time: every singleton write is a
// compare-and-swap on what it read (an expiry on the task's resourceVersion and lease_until,
// a push on the lease it writes before sending), so two replicas that both believe they lead
// for a moment waste work but cannot double a lease. Leadership keeps that work in one place.

export type HubReplica = { id: string; url: string; started_at: string; leader: boolean };

export interface Leadership {
  /** This replica's identity. */
  readonly identity: string;
  /** The store backend's name for this arrangement, shown by /api/healthz. */
  readonly mode: "single" | "elected";
  isLeader(): boolean;
  /** The identity of the replica that leads now, if known. */
  leader(): string | undefined;
  /** Called with true when this replica starts leading and false when it stops. */
  onChange(cb: (leading: boolean) => void): () => void;
  /** Announce this replica (its URL) and start taking part. */
  start(url: string): Promise<void>;
  /** Every live replica, leader marked. */
  replicas(): Promise<HubReplica[]>;
  /** Stop leading (another replica takes over at once) and leave the registry. */
  close(): Promise<void>;
}

/** The single Hub of an embedded store: always the leader. */
export class SoleLeader implements Leadership {
  readonly mode = "single";
  private url = "";
  private readonly startedAt = new Date().toISOString();
  constructor(readonly identity: string) {}
  isLeader(): boolean {
    return true;
  }
  leader(): string {
    return this.identity;
  }
  /** It leads from the start and never stops: nothing to report. */
  onChange(): () => void {
    return () => undefined;
  }
  async start(url: string): Promise<void> {
    this.url = url;
  }
  async replicas(): Promise<HubReplica[]> {
    return [{ id: this.identity, url: this.url, started_at: this.startedAt, leader: true }];
  }
  async close(): Promise<void> {}
}
