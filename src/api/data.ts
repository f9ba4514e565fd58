// The contract's data API and the Hub's health and meta: worker-capacity, task-admission.
import type { FastifyInstance } from "fastify";
import { HubError } from "../protocol/errors.ts";
import { parseChanges } from "../protocol/parse.ts";
import { largeRepliesAsBytes } from "./large-reply.ts";
import { replySchema } from "./reply-schemas.ts";

export const CORE_PREVIEW_VERSION = "0.4.0";
import { PRODUCT_VERSION } from "../version.ts";

export { PRODUCT_VERSION };
/** v1's Hub capability names, as v1 clients look for them (loom_contract's hub list, in its order). */
export const V1_CAPABILITIES = [
  "hub-api-v1",
  "inventory-v1",
  "manifest-dispatch-v1",
  "bearer-auth",
  "leases",
  "fixed-concurrency",
  "adaptive-concurrency",
  "resource-reservations-v1",
  "shared-host-placement",
  "direct-runner-push",
  "attempt-result-retention",
  "task-extensions-v1",
  "immutable-source-descriptor-v1",
  "cache-affinity-v1",
  "worker-cache-inventory-v1",
  "oracle-v1",
  "trajectory-export-v1",
  "reward-contract-v1",
  "result-export-selectors-v1",
];
/** v1's CLI contract version: the verbs and flags of its Hub CLI, which `loom` keeps. */
export const CLI_CONTRACT_VERSION = 1;
/** Loom's own capability names, served after v1's. */
export const LOOM_CAPABILITIES = [
  "worker-register",
  "worker-heartbeat",
  "task-claim",
  "task-claim-long-poll",
  "task-start",
  "task-renew",
  "result-upload",
  "task-complete",
  "task-fail",
  "result-download",
  "task-dispatch",
  "dispatch-repo-run",
  "task-list",
  "task-counts",
  "worker-capacity",
  "task-admission",
  "resource-admission",
  "direct-push",
  "lease-expiry",
  "fencing",
  "per-worker-tokens",
];
export const CAPABILITIES = [...V1_CAPABILITIES, ...LOOM_CAPABILITIES];

export async function dataRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const scheduler = hub.scheduler;
  // task-admission and worker-capacity grow with the fleet: large replies go out as bytes.
  largeRepliesAsBytes(f);

  f.get("/api/healthz", async () => {
    // `synced` claims that the store reflects every declared file: not while one is rejected.
    const rejected = hub.gitops?.rejectedFiles() ?? [];
    return {
      ok: true,
      time: new Date().toISOString(),
      core_preview_version: CORE_PREVIEW_VERSION,
      hub_api_version: 1,
      capabilities: CAPABILITIES,
      store: hub.store.backend,
      synced: hub.cache.synced && rejected.length === 0,
      informer_synced: hub.cache.synced,
      gitops: {
        rejected_files: rejected,
        ...(rejected.length
          ? {
              message: `${rejected.length} watched file(s) rejected; their previous state stays applied (see loom get events)`,
            }
          : {}),
      },
      replica: hub.leadership.identity,
      leader: hub.leadership.leader() ?? null,
      leading: hub.leadership.isLeader(),
    };
  });
  // The Hub replicas alive now (one on SQLite), the leader marked: `loom get hubs`.
  f.get("/api/hubs", async () => ({ items: await hub.leadership.replicas() }));
  f.get("/api/meta", async () => ({
    service: "hub",
    product_version: PRODUCT_VERSION,
    core_preview_version: CORE_PREVIEW_VERSION,
    cli_contract_version: CLI_CONTRACT_VERSION,
    hub_api_version: 1,
    runner_api_version: 1,
    inventory_schema_version: 1,
    manifest_schema_version: 1,
    dispatch_schema_version: 1,
    api_version: 1,
    capabilities: CAPABILITIES,
    auth_required: hub.authRequired,
    runner_token_env: hub.opts.runnerTokenEnv,
    store: hub.store.backend,
  }));

  // These two grow with the fleet (1.8 MB for 2,000 workers). JSON.stringify, one worker at
  // a time (large-reply.ts), writes them several times faster than a serializer generated
  // from a schema.
  f.get("/api/data/worker-capacity", async () => scheduler.workerCapacity());

  f.get("/api/data/task-admission", async (req) => {
    const taskId = (req.query as Record<string, string | undefined>).task_id;
    if (!taskId) throw new HubError(400, "task_id_required");
    return scheduler.taskAdmissionReply(taskId);
  });

  // Every queue's usage, quota, borrowing, counts and fair share: `loom get queues`, `describe queue`, the UI.
  f.get("/api/data/queues", async () => scheduler.queuesReport());

  // What-if over a copy of the current state; nothing is written.
  f.post("/api/simulate", async (req) => scheduler.simulate(parseChanges(req.body)));

  // worker -> the starving task it is held for, with what it waits on: the stored
  // nominations, as every claim on any replica sees them.
  f.get("/api/data/nominations", replySchema("nominations"), async () => scheduler.nominations());

  // Every queued task's queue_position, for `loom get tasks -o wide`.
  f.get("/api/data/queue-positions", async () => ({ positions: Object.fromEntries(scheduler.queuePositions()) }));
}
