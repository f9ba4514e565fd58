// The page's copy of the fleet: workers, task rows and campaigns, each kept by one
// ListWatch. Changes are coalesced into one notification per animation frame, so a burst of
// watch events costs one redraw.
import { request } from "./auth.ts";
import { ListWatch, type ChangeType, type Phase } from "./list-watch.ts";
import { taskRow, workerObj, type Campaign, type Task, type TaskRow, type Worker, type WorkerObj } from "./model.ts";

export const API = "/apis/loom.dev/v1alpha1";

type Slice<O, R> = { map: Map<string, R>; toRow(o: O): R };
export type KindName = "workers" | "tasks" | "campaigns";
export type CampaignObj = { name: string; campaignId: string };

export class Fleet {
  readonly workers = new Map<string, WorkerObj>();
  readonly tasks = new Map<string, TaskRow>();
  readonly campaigns = new Map<string, CampaignObj>();
  /** Bumped per kind on every change, so views redo only what changed. */
  readonly versions: Record<KindName, number> = { workers: 0, tasks: 0, campaigns: 0 };
  readonly phases: Record<KindName, { phase: Phase; detail: string }> = {
    workers: { phase: "listing", detail: "" },
    tasks: { phase: "listing", detail: "" },
    campaigns: { phase: "listing", detail: "" },
  };
  readonly watches: Record<KindName, ListWatch<any>>;
  private readonly listeners = new Set<() => void>();
  private frame = 0;

  constructor(onUnauthorized: () => void) {
    const make = <O extends { metadata: { name: string } }, R>(kind: KindName, s: Slice<O, R>) =>
      new ListWatch<O>({
        path: `${API}/${kind}`,
        request: (path, init) => request(path, init),
        onReset: (items) => {
          s.map.clear();
          for (const o of items) s.map.set(o.metadata.name, s.toRow(o));
          this.changed(kind);
        },
        onChange: (type: ChangeType, o) => {
          if (type === "DELETED") s.map.delete(o.metadata.name);
          else s.map.set(o.metadata.name, s.toRow(o));
          this.changed(kind);
        },
        onPhase: (phase, detail) => {
          this.phases[kind] = { phase, detail };
          if (phase === "unauthorized") onUnauthorized();
          this.notifySoon();
        },
      });
    this.watches = {
      workers: make<Worker, WorkerObj>("workers", { map: this.workers, toRow: workerObj }),
      tasks: make<Task, TaskRow>("tasks", { map: this.tasks, toRow: taskRow }),
      campaigns: make<Campaign, CampaignObj>("campaigns", {
        map: this.campaigns,
        toRow: (c) => ({ name: c.metadata.name, campaignId: c.spec.campaign_id }),
      }),
    };
  }

  start(): void {
    for (const w of Object.values(this.watches)) w.start();
  }

  stop(): void {
    for (const w of Object.values(this.watches)) w.stop();
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(kind: KindName): void {
    this.versions[kind]++;
    this.notifySoon();
  }

  private notifySoon(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      for (const fn of [...this.listeners]) fn();
    });
  }
}
