// Queue controller: each Queue's status shows what its active leases hold, what it borrows
// and lends, its pending and admitted counts, and its fair share, all read from the
// scheduler's ledger (which sums the leases), and conditions saying whether it borrows or
// has used up its quota. Written only when a figure changes; task changes are coalesced,
// so a busy queue costs one status write per pass, not one per lease.
import { TYPED_GPU, type Amounts } from "../admission/queues.ts";
import { RESOURCE_FIELDS, setCondition, type QueueSpecQuota, type QueueStatus } from "../resources/types.ts";
import { jsonClone } from "../resources/json.ts";
import type { ControllerServices } from "../scheduler/controller-services.ts";
import { isStoreError } from "../store/errors.ts";
import type { Reconciler, Result } from "./controller.ts";

/** Amounts in the Queue schema's shape (GPU types under gpu_types). */
export function quotaObject(a: Amounts): QueueSpecQuota {
  const out: QueueSpecQuota = {};
  for (const f of RESOURCE_FIELDS) if (a[f]) out[f] = a[f];
  for (const [k, v] of Object.entries(a))
    if (k.startsWith(TYPED_GPU) && v) (out.gpu_types ??= {})[k.slice(TYPED_GPU.length)] = v;
  return out;
}

/** `cpu_millis=500,gpu_count=1`, or `-` for nothing. */
export function amountsText(a: Amounts): string {
  const parts = Object.entries(a)
    .filter(([, v]) => v > 0)
    .map(([k, v]) => `${k}=${v}`);
  return parts.length ? parts.join(",") : "-";
}

/** Two decimals: a share that moves in the third is not news worth a write. */
const round = (x: number) => Math.round(x * 100) / 100;

/** What the queue controller uses: Queue objects, each queue's figures, the clock. */
export type QueueControllerDeps = Pick<ControllerServices, "store" | "cache" | "now"> & {
  readonly queues: Pick<ControllerServices["queues"], "figures">;
};

export class QueueStatusReconciler implements Reconciler {
  readonly name = "queue";
  constructor(private readonly deps: QueueControllerDeps) {}

  keys(): string[] {
    try {
      return this.deps.cache.list("Queue").map((q) => q.metadata.name);
    } catch {
      return []; // an informer without the Queue kind
    }
  }

  async reconcile(name: string): Promise<Result> {
    const deps = this.deps;
    const q = deps.cache.get("Queue", name);
    if (!q || q.kind !== "Queue") return;
    const f = deps.queues.figures(name);
    const iso = new Date(deps.now()).toISOString();
    const st: QueueStatus = jsonClone(q.status ?? {});
    st.observedGeneration = q.metadata.generation;
    st.used = quotaObject(f.used);
    st.borrowed = amountsText(f.borrowed);
    st.lent = amountsText(f.lent);
    st.pending = f.pending;
    st.admitted = f.admitted;
    st.share = round(f.share);
    st.decayed_share = round(f.decayed_share);
    st.conditions ??= [];
    const borrowing = Object.keys(f.borrowed).length > 0;
    setCondition(
      st.conditions,
      borrowing
        ? {
            type: "Borrowing",
            status: "True",
            reason: "AboveQuota",
            message: `uses ${st.borrowed} past its quota, on quota other queues leave unused`,
          }
        : { type: "Borrowing", status: "False", reason: "WithinQuota", message: "uses no more than its quota" },
      iso,
    );
    const full = Object.entries(f.limits?.quota ?? {})
      .filter(([d, n]) => (f.used[d] ?? 0) >= n)
      .map(([d]) => d);
    setCondition(
      st.conditions,
      full.length
        ? {
            type: "QuotaExhausted",
            status: "True",
            reason: "queue_quota_exhausted",
            message: `all of its nominal ${full.join(", ")} is in use`,
          }
        : {
            type: "QuotaExhausted",
            status: "False",
            reason: "QuotaAvailable",
            message: "some of its nominal quota is free",
          },
      iso,
    );
    if (JSON.stringify(st) === JSON.stringify(q.status ?? {})) return;
    try {
      await deps.store.updateStatus({ ...q, status: st });
    } catch (e) {
      if (!isStoreError(e, "Conflict") && !isStoreError(e, "NotFound")) throw e;
      return { requeueAfterMs: 50 };
    }
  }
}
