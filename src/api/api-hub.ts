// What the routes use of the running Hub (hub.ts provides it), and what fastify carries for them.
import type { Principal } from "./auth.ts";
import type { Leadership } from "../roles/leader.ts";
import type { HealthCheck } from "../observability/health.ts";
import type { HubMetrics } from "../observability/metrics.ts";
import type { Scheduler } from "../scheduler/scheduler.ts";
import type { Informer } from "../store/cache.ts";
import type { Store } from "../store/store.ts";
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
  readonly scheduler: Scheduler;
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
