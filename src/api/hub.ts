// The Hub as the routes see it: what they use of it, the settings they read, and the one
// rule every Runner route shares (a per-worker token acts only as its own worker). Its own
// module, so app.ts and the route plugins it registers import this and not each other.
import type { Leadership } from "../roles/leader.ts";
import type { HealthCheck } from "../observability/health.ts";
import type { HubMetrics } from "../observability/metrics.ts";
import { HubError } from "../protocol/errors.ts";
import type { SchedulerApi } from "../scheduler/scheduler.ts";
import type { Informer } from "../store/cache.ts";
import type { Store } from "../store/store.ts";
import type { Principal } from "./auth.ts";
import type { WatchStream } from "./watch.ts";

/** The settings the routes read. */
export type ApiSettings = {
  runnerTokenEnv: string;
  directTokenEnv: string[];
  env?: NodeJS.ProcessEnv;
  uploadLimitBytes: number;
  uploadConcurrency: number;
  uploadQueue: number;
  uploadWaitMs: number;
};

/** What the routes use of the running Hub; the composition root (hub.ts) provides it. */
export interface ApiHub {
  readonly store: Store;
  readonly cache: Informer;
  /** Typed verbs and reads only: the scheduler's context stays inside scheduler/. */
  readonly scheduler: SchedulerApi;
  readonly gitops: { rejectedFiles(): string[] } | undefined;
  readonly leadership: Leadership;
  readonly metrics: HubMetrics;
  readonly checks: { livez: HealthCheck[]; readyz: HealthCheck[] };
  readonly opts: ApiSettings;
  readonly authRequired: boolean;
  /** Aborted when the Hub shuts down. */
  readonly stopping: AbortSignal;
  /** Open watch streams of the resource API (the API adds and removes them). */
  readonly watchStreams: Set<WatchStream>;
}

declare module "fastify" {
  interface FastifyInstance {
    hub: ApiHub;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}

/** A per-worker token may act only as its own worker. */
export function assertActsAs(req: { principal: Principal }, workerId: unknown): void {
  if (req.principal.kind === "worker" && req.principal.workerId !== workerId) {
    throw new HubError(403, "forbidden", {
      detail: `this token belongs to worker ${req.principal.workerId}`,
      worker_id: workerId,
    });
  }
}
