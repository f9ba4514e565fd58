// Campaign controller: a Campaign's cases become Tasks. It creates the tasks that are
// missing, updates a still-queued task whose case changed, removes a still-queued task
// whose case left the manifest, and counts tasks per state in the Campaign's status.
// It never duplicates a task: ids are the stable v1 ids, and a create of an existing one
// is a no-op.
import { formatInputError } from "../resources/input-errors.ts";
import { CAMPAIGN_LABEL, expandCampaign } from "../resources/manifest.ts";
import {
  initialStatus,
  isActive,
  isFinal,
  isQueued,
  setCondition,
  type Campaign,
  type CampaignStatus,
  type Task,
} from "../resources/types.ts";
import type { Informer } from "../store/cache.ts";
import type { Store, StoredObject, TxnOp } from "../store/store.ts";
import type { LoomEvent } from "../resources/meta.ts";
import type { Reconciler, Result } from "./controller.ts";
import { jsonClone } from "../resources/json.ts";
import { endLease, markFinal } from "../scheduler/lifecycle.ts";
import { isStoreError } from "../store/errors.ts";

/** The finalizers a DELETE with propagationPolicy Orphan or Foreground sets (Kubernetes' names). */
export const ORPHAN_FINALIZER = "orphan";
export const FOREGROUND_FINALIZER = "foregroundDeletion";

/** Tasks are written in chunks so a 100k-case campaign does not make one giant transaction. */
const CHUNK = 1000;

const ownedBy = (t: Task, campaign: string) =>
  t.metadata.ownerReferences?.some((r) => r.kind === "Campaign" && r.name === campaign) ?? false;

type Expanded = {
  uid: string;
  generation: number;
  desired: Task[];
  errors: ReturnType<typeof expandCampaign>["errors"];
  synced: boolean;
};

export class CampaignReconciler implements Reconciler {
  readonly name = "campaign";
  /** Expansion per campaign generation: a pass that only recounts does not expand again. */
  private readonly expanded = new Map<string, Expanded>();
  constructor(
    private readonly store: Store,
    private readonly cache: Informer,
    private readonly recordEvent: (e: LoomEvent) => void,
  ) {
    cache.addIndex("Task", "campaign", (o) => {
      const l = o.metadata.labels?.[CAMPAIGN_LABEL];
      return l ? [l] : [];
    });
  }

  /** The key of the campaign that owns a task, for mapping task events to campaign passes. */
  static keyOf(o: StoredObject): string | undefined {
    return o.metadata.labels?.[CAMPAIGN_LABEL];
  }

  keys(): string[] {
    return this.cache.list<StoredObject>("Campaign").map((c) => c.metadata.name);
  }

  async reconcile(name: string): Promise<Result> {
    const owned = this.cache
      .byIndex<Task & StoredObject>("Task", "campaign", name, { sorted: false })
      .filter((t) => ownedBy(t, name));
    const campaign = this.cache.get<Campaign & StoredObject>("Campaign", name);
    // Kubernetes' garbage collection: a deleted campaign's tasks go with it (background); one
    // being deleted waits for its finalizer's work (foreground: its tasks deleted first;
    // orphan: its tasks kept, no longer owned by it).
    if (!campaign) {
      this.expanded.delete(name);
      return this.collect(name, owned);
    }
    if (campaign.metadata.deletionTimestamp) return this.finalize(campaign, owned);
    const uid = campaign.metadata.uid ?? "";
    const gen = campaign.metadata.generation ?? 1;
    let memo = this.expanded.get(name);
    if (!memo || memo.uid !== uid || memo.generation !== gen) {
      const x = expandCampaign(campaign);
      memo = { uid, generation: gen, desired: x.tasks, errors: x.errors, synced: false };
      this.expanded.set(name, memo);
    }
    const { desired, errors } = memo;
    const now = new Date().toISOString();
    const status: CampaignStatus = jsonClone(campaign.status ?? {});
    status.conditions ??= [];
    if (errors.length) {
      // All or nothing: an invalid case stops the campaign's changes until it is fixed.
      const msg =
        errors.slice(0, 5).map(formatInputError).join("; ") +
        (errors.length > 5 ? ` (+${errors.length - 5} more)` : "");
      if (
        setCondition(
          status.conditions,
          {
            type: "Valid",
            status: "False",
            reason: "InvalidCase",
            message: msg,
            observedGeneration: campaign.metadata.generation,
          },
          now,
        )
      )
        this.recordEvent({ object: campaign, type: "Warning", reason: "InvalidCase", message: msg });
      return this.writeStatus(campaign, this.counted(status, owned));
    }
    setCondition(
      status.conditions,
      {
        type: "Valid",
        status: "True",
        reason: "CasesValid",
        message: `${desired.length} case(s)`,
        observedGeneration: campaign.metadata.generation,
      },
      now,
    );

    // Already in step with this generation, and nothing owned went missing: only recount.
    if (memo.synced && owned.length === desired.length) return this.writeStatus(campaign, this.counted(status, owned));
    const ops: TxnOp[] = [];
    const wanted = new Set<string>();
    const conflicts: string[] = [];
    let created = 0,
      updated = 0,
      removed = 0;
    for (const d of desired) {
      wanted.add(d.metadata.name);
      const cur = this.cache.get<Task & StoredObject>("Task", d.metadata.name);
      d.metadata.ownerReferences = d.metadata.ownerReferences?.map((r) => ({ ...r, uid: campaign.metadata.uid! }));
      if (!cur) {
        ops.push({ op: "create", object: { ...d, status: initialStatus() } });
        created++;
      } else if (!ownedBy(cur, name)) {
        conflicts.push(d.metadata.name);
      } else if (isQueued(cur.status?.state ?? "queued") && JSON.stringify(cur.spec) !== JSON.stringify(d.spec)) {
        ops.push({
          op: "update",
          object: {
            ...cur,
            spec: d.spec,
            metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, ...d.metadata.labels } },
          },
        });
        updated++;
      }
    }
    for (const t of owned) {
      if (wanted.has(t.metadata.name) || !isQueued(t.status?.state ?? "queued")) continue;
      ops.push({ op: "delete", kind: "Task", name: t.metadata.name, resourceVersion: t.metadata.resourceVersion });
      removed++;
    }
    await this.write(ops);
    memo.synced = !conflicts.length;
    if (created || updated || removed)
      this.recordEvent({
        object: campaign,
        type: "Normal",
        reason: "TasksSynced",
        message: `tasks: ${created} created, ${updated} updated, ${removed} removed`,
      });
    if (conflicts.length) {
      const msg = `task ids already used by other objects: ${conflicts.slice(0, 5).join(", ")}${conflicts.length > 5 ? ` (+${conflicts.length - 5} more)` : ""}`;
      if (
        setCondition(
          status.conditions,
          { type: "TasksConflict", status: "True", reason: "TaskIdInUse", message: msg },
          now,
        )
      )
        this.recordEvent({ object: campaign, type: "Warning", reason: "TaskIdInUse", message: msg });
    } else status.conditions = status.conditions.filter((c) => c.type !== "TasksConflict");
    // Counts come from the cache after our own writes are visible.
    const after = this.cache
      .byIndex<Task & StoredObject>("Task", "campaign", name, { sorted: false })
      .filter((t) => ownedBy(t, name));
    return this.writeStatus(campaign, this.counted(status, after));
  }

  /**
   * Delete a campaign's tasks. A task holding a lease has it cancelled in the same
   * transaction (its reservation released, its Runner fenced off), so the record of why it
   * ended is the last thing watchers see. Tasks that changed meanwhile wait for the next pass.
   */
  private async collect(campaign: string, owned: (Task & StoredObject)[]): Promise<Result> {
    const now = Date.now();
    const ops: TxnOp[][] = owned.map((t) => {
      const del: TxnOp = {
        op: "delete",
        kind: "Task",
        name: t.metadata.name,
        resourceVersion: t.metadata.resourceVersion,
      };
      if (!isActive(t.status?.state)) return [del];
      const why = `campaign ${campaign} was deleted`;
      const status = markFinal(
        endLease(t.status!, "cancelled", now, "cancelled", "OwnerDeleted"),
        now,
        "OwnerDeleted",
        why,
      );
      return [
        { op: "updateStatus", object: { ...t, status } },
        { op: "delete", kind: "Task", name: t.metadata.name },
      ];
    });
    const left = await this.writeEach(ops);
    for (const t of owned) {
      if (!isActive(t.status?.state) || left.has(t.metadata.name)) continue;
      this.recordEvent({
        object: t,
        type: "Normal",
        reason: "OwnerDeleted",
        message: `campaign ${campaign} was deleted: the lease on ${t.status?.lease?.worker} is cancelled and its reservation released; the task is deleted`,
      });
    }
    return left.size ? { requeueAfterMs: 200 } : undefined;
  }

  /** A campaign deleted with propagationPolicy Orphan or Foreground: do its finalizer's work, then delete it. */
  private async finalize(c: Campaign & StoredObject, owned: (Task & StoredObject)[]): Promise<Result> {
    const name = c.metadata.name;
    const finalizers = c.metadata.finalizers ?? [];
    if (finalizers.includes(ORPHAN_FINALIZER)) {
      const ops = owned.map((t): TxnOp[] => {
        const refs = (t.metadata.ownerReferences ?? []).filter((r) => !(r.kind === "Campaign" && r.name === name));
        const { ownerReferences: _refs, ...rest } = t.metadata;
        return [{ op: "update", object: { ...t, metadata: refs.length ? { ...rest, ownerReferences: refs } : rest } }];
      });
      if ((await this.writeEach(ops)).size) return { requeueAfterMs: 200 };
    } else if (finalizers.includes(FOREGROUND_FINALIZER)) {
      const r = await this.collect(name, owned);
      if (r || owned.length) return r ?? { requeueAfterMs: 50 }; // gone once the informer shows it
    }
    const rest = finalizers.filter((f) => f !== ORPHAN_FINALIZER && f !== FOREGROUND_FINALIZER);
    // Another finalizer is someone else's to remove; the campaign stays until it is.
    if (rest.length) {
      if (rest.length !== finalizers.length)
        await this.store.txn([{ op: "update", object: { ...c, metadata: { ...c.metadata, finalizers: rest } } }]);
      return;
    }
    await this.store.txn([{ op: "delete", kind: "Campaign", name, resourceVersion: c.metadata.resourceVersion }]);
  }

  /** Write each group of ops as one transaction, many groups per commit; the names of the tasks whose group lost a race. */
  private async writeEach(groups: TxnOp[][]): Promise<Set<string>> {
    const lost = new Set<string>();
    const nameOf = (g: TxnOp[]) => {
      const o = g[0];
      return o.op === "delete" || o.op === "check" ? o.name : o.object.metadata.name;
    };
    // Groups per commit: as many as fit one transaction of the store (a group is one or two ops).
    const size = Math.max(1, Math.min(CHUNK, Math.floor(this.store.maxWritesPerTxn / 2)));
    for (let i = 0; i < groups.length; i += size) {
      const chunk = groups.slice(i, i + size);
      try {
        await this.store.txn(chunk.flat());
      } catch (e) {
        if (!isStoreError(e, "Conflict") && !isStoreError(e, "NotFound")) throw e;
        // One task changed under us: the others go one by one, the loser on the next pass.
        for (const g of chunk)
          await this.store.txn(g).catch((err: unknown) => {
            if (isStoreError(err, "Conflict")) lost.add(nameOf(g));
            else if (!isStoreError(err, "NotFound")) throw err;
          });
      }
    }
    await this.cache.waitForRevision(await this.store.revision());
    return lost;
  }

  private counted(status: CampaignStatus, tasks: Task[]): CampaignStatus {
    const by: Record<string, number> = {};
    let pending = 0,
      active = 0,
      final = 0;
    for (const t of tasks) {
      const s = t.status?.state ?? "queued";
      by[s] = (by[s] ?? 0) + 1;
      if (isFinal(s)) final++;
      else if (isActive(s)) active++;
      else pending++;
    }
    return { ...status, task_count: tasks.length, pending, active, final, by_state: by };
  }

  private async writeStatus(c: Campaign & StoredObject, status: CampaignStatus): Promise<Result> {
    status.observedGeneration = c.metadata.generation;
    if (JSON.stringify(status) === JSON.stringify(c.status ?? {})) return;
    const [w] = await this.store.txn([{ op: "updateStatus", object: { ...c, status } }]);
    await this.cache.waitForRevision(Number(w.metadata.resourceVersion));
  }

  private async write(ops: TxnOp[]): Promise<void> {
    const size = Math.min(CHUNK, this.store.maxWritesPerTxn);
    for (let i = 0; i < ops.length; i += size) {
      await this.store.txn(ops.slice(i, i + size));
      await this.cache.waitForRevision(await this.store.revision());
    }
  }
}
