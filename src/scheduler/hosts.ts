// register-worker-hosts: inventory workers posted to the Hub become (or update) Worker
// specs, which is where Direct Runner endpoints live.
import type { Worker } from "../resources/types.ts";
import type { TxnOp } from "../store/store.ts";
import type { SchedulerContext } from "./context.ts";
import { directEndpoint } from "./direct-endpoint.ts";
import { conflictOrTaken } from "../store/retry.ts";

export async function applyWorkers(ctx: SchedulerContext, workers: Worker[], operator?: string) {
  return ctx.readModifyWrite(
    async (commit) => {
      const ops: TxnOp<Worker>[] = [];
      for (const w of workers) {
        const cur = await ctx.store.get("Worker", w.metadata.name);
        if (!cur) ops.push({ op: "create", object: w });
        else {
          // Declared fields replace the stored ones; a cordon set by an operator stays.
          const spec = { ...w.spec, ...(cur.spec.unschedulable ? { unschedulable: true } : {}) };
          ops.push({
            op: "update",
            object: {
              ...cur,
              metadata: {
                ...cur.metadata,
                labels: { ...cur.metadata.labels, ...w.metadata.labels },
                annotations: { ...cur.metadata.annotations, ...w.metadata.annotations },
              },
              spec,
            },
          });
        }
      }
      const written = await commit(ops);
      for (const o of written)
        ctx.recordEvent({
          object: o,
          type: "Normal",
          reason: "HostRegistered",
          message: `worker host registered${operator ? ` by ${operator}` : ""}`,
        });
      return written.map(hostItem);
    },
    { retryable: conflictOrTaken },
  );
}

/**
 * One registered host as v1 answers it: its concurrency, capacity and capabilities as
 * declared, and `endpoint` the object of connection facts v1 keeps (worker_url, token env,
 * host, ssh_port, command_port, private_host). `push_url` is Loom's: where a push goes.
 */
export function hostItem(w: Worker) {
  const s = w.spec;
  const endpoint: Record<string, unknown> = {};
  if (s.worker_url) endpoint.worker_url = s.worker_url;
  if (s.direct_api_token_env) endpoint.direct_api_token_env = s.direct_api_token_env;
  if (s.host) endpoint.host = s.host;
  if (s.port) endpoint.ssh_port = s.port;
  if (s.command_port ?? s.serve_port) endpoint.command_port = s.command_port ?? s.serve_port;
  if (s.private_host) endpoint.private_host = s.private_host;
  return {
    host_id: w.metadata.name,
    worker_id: w.metadata.name,
    connection_mode: s.connection_mode ?? "ssh-start",
    max_concurrency: s.max_concurrency ?? 1,
    initial_concurrency: s.initial_concurrency ?? 1,
    concurrency_policy: s.concurrency_policy ?? "fixed",
    resource_capacity: s.resource_capacity ?? {},
    capabilities: s.capabilities ?? [],
    endpoint,
    push_url: directEndpoint(w) ?? null,
  };
}
