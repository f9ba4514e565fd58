// Leadership among Hub replicas on etcd: an election through an etcd lease (the etcd3
// Election API), and a registry key per replica held by its own lease, so `loom get hubs`
// lists the replicas alive now. A replica that dies stops renewing; its keys vanish one TTL
// later and the next candidate is elected.
import type { Etcd3, Lease, Namespace } from "etcd3";
import type { Campaign, ElectionObserver } from "etcd3/lib/election.js";
import type { HubReplica, Leadership } from "./leader.ts";

export type EtcdLeadershipOptions = {
  /** Seconds without renewal after which a replica counts as dead. Default 3 (takeover < 5 s). */
  ttlSeconds?: number;
  /** Seconds before a replica whose campaign failed campaigns again. Default 1. */
  retrySeconds?: number;
  log?: (msg: string) => void;
};

export class EtcdLeadership implements Leadership {
  readonly mode = "elected";
  private readonly ns: Namespace;
  private readonly ttl: number;
  private readonly retryMs: number;
  private readonly listeners = new Set<(leading: boolean) => void>();
  private leading = false;
  private current: string | undefined;
  private campaign: Campaign | undefined;
  private observer: ElectionObserver | undefined;
  private refresh: NodeJS.Timeout | undefined;
  private registration: Lease | undefined;
  private retry: NodeJS.Timeout | undefined;
  private closed = false;
  private url = "";
  private readonly startedAt = new Date().toISOString();

  constructor(
    client: Etcd3,
    prefix: string,
    readonly identity: string,
    private readonly opts: EtcdLeadershipOptions = {},
  ) {
    this.ns = client.namespace(`${prefix}/`);
    this.ttl = opts.ttlSeconds ?? 3;
    this.retryMs = (opts.retrySeconds ?? 1) * 1000;
  }

  isLeader(): boolean {
    return this.leading;
  }
  leader(): string | undefined {
    // While elected, this replica is the leader whatever the observer last reported: its
    // change events may name a candidate queued behind us.
    return this.leading ? this.identity : this.current;
  }
  onChange(cb: (leading: boolean) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  async start(url: string): Promise<void> {
    this.url = url;
    await this.register();
    this.observer = await this.ns.election("leader", this.ttl).observe();
    this.current = this.observer.leader();
    this.observer.on("change", (id) => (this.current = id));
    this.observer.on("error", (e) => this.opts.log?.(`leader observer failed: ${e.message}`));
    // The observer's events can be missed (a watch re-established under load): read the
    // leader key once per TTL as well, so every replica's view settles within one.
    this.refresh = setInterval(() => {
      if (this.closed || this.leading) return;
      void this.ns
        .election("leader", this.ttl)
        .leader()
        .then(
          (id) => {
            if (!this.closed && !this.leading && id !== undefined) this.current = id;
          },
          () => undefined,
        );
    }, this.ttl * 1000);
    this.refresh.unref();
    this.runCampaign();
  }

  private async register(): Promise<void> {
    if (this.closed) return;
    const lease = (this.registration = this.ns.lease(this.ttl));
    lease.on("lost", () => {
      this.opts.log?.("replica registration lost; registering again");
      if (!this.closed) setTimeout(() => void this.register().catch(() => undefined), this.retryMs).unref();
    });
    const me: Omit<HubReplica, "leader"> = { id: this.identity, url: this.url, started_at: this.startedAt };
    await lease.put(`hubs/${this.identity}`).value(JSON.stringify(me));
  }

  private runCampaign(): void {
    if (this.closed) return;
    const c = (this.campaign = this.ns.election("leader", this.ttl).campaign(this.identity));
    c.on("elected", () => {
      if (this.closed || c !== this.campaign) return;
      this.current = this.identity;
      this.set(true);
    });
    c.on("error", (e) => {
      if (c !== this.campaign) return;
      // Our lease is gone: another replica may already lead. Stop at once, then try again.
      this.opts.log?.(`leader campaign failed: ${e.message}`);
      this.set(false);
      this.campaign = undefined;
      this.retry = setTimeout(() => this.runCampaign(), this.retryMs);
      this.retry.unref();
    });
  }

  private set(leading: boolean): void {
    if (this.leading === leading) return;
    this.leading = leading;
    this.opts.log?.(leading ? `replica ${this.identity} leads` : `replica ${this.identity} stopped leading`);
    for (const cb of this.listeners) cb(leading);
  }

  async replicas(): Promise<HubReplica[]> {
    const all = await this.ns.getAll().prefix("hubs/").strings();
    const leader = (await this.ns.election("leader", this.ttl).leader()) ?? this.current;
    return Object.values(all)
      .map((v) => JSON.parse(v) as Omit<HubReplica, "leader">)
      .map((r) => ({ ...r, leader: r.id === leader }))
      .sort((a, b) => (a.id < b.id ? -1 : 1));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.retry);
    clearInterval(this.refresh);
    this.set(false);
    this.listeners.clear();
    // Resigning and revoking hand over at once instead of after one TTL.
    await this.campaign?.resign().catch(() => undefined);
    await this.observer?.cancel().catch(() => undefined);
    await this.registration?.revoke().catch(() => undefined);
  }
}
