// register-worker-hosts: inventory workers posted to the Hub become (or update) Worker
// specs, which is where Direct Runner endpoints live.
import type { Worker } from "../resources/types.ts";
import type { TxnOp } from "../store/store.ts";
import type { SchedulerContext } from "./context.ts";
import { directEndpoint } from "./push.ts";
import { conflictOrTaken } from "../store/retry.ts";

export async function applyWorkers(ctx: SchedulerContext, workers: Worker[], operator?: string) {
  return ctx.readModifyWrite(async () => {
    const ops: TxnOp<Worker>[] = [];
    for (const w of workers) {
      const cur = await ctx.store.get("Worker", w.metadata.name);
      if (!cur) ops.push({ op: "create", object: w });
      else {
        // Declared fields replace the stored ones; a cordon set by an operator stays.
        const spec = { ...w.spec, ...(cur.spec.unschedulable ? { unschedulable: true } : {}) };
        ops.push({ op: "update", object: { ...cur, metadata: { ...cur.metadata, labels: { ...cur.metadata.labels, ...w.metadata.labels }, annotations: { ...cur.metadata.annotations, ...w.metadata.annotations } }, spec } });
      }
    }
    const written = await ctx.commit(ops);
    for (const o of written) ctx.recordEvent({ object: o, type: "Normal", reason: "HostRegistered", message: `worker host registered${operator ? ` by ${operator}` : ""}` });
    return written.map((o) => ({ worker_id: o.metadata.name, endpoint: directEndpoint(o) ?? null, connection_mode: o.spec.connection_mode ?? null }));
  }, { retryable: conflictOrTaken });
}
