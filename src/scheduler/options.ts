// What a scheduler is built with: its settings, its observer, the Event recorder and the
// clock (the Hub passes them in; the context that holds them stays inside scheduler/).
import type { LoomEvent } from "../resources/meta.ts";

export type SchedulerOptions = {
  /** A worker whose last call is older than this is not Ready. */
  heartbeatGraceSeconds: number;
  /** Attempts a task gets when its leases keep expiring and it has no retry_policy. */
  defaultMaxAttempts: number;
  /** Where result ZIPs are kept. */
  resultsDir: string;
  /** A queued task that fits nowhere this long nominates a worker (default 60); a task's spec.nominate_after_seconds wins. */
  nominateAfterSeconds?: number;
  /** Fair share across queues from usage decayed over this half-life; 0 or unset: from current usage. */
  fairShareHalfLifeSeconds?: number;
};

/** What the scheduler reports about its own work (the Hub passes its metrics in). */
export type SchedulerObserver = {
  /** `error` is what the commit threw, when it failed. */
  commit(seconds: number, ops: number, error?: unknown): void;
  claim(seconds: number, granted: number): void;
  /** A claim's commit lost a race and the claim decided again. */
  claimRaceLost?(): void;
};

/** What the scheduler is built with besides the store; each defaults to doing nothing (tests). */
export type SchedulerDeps = {
  recordEvent?: (e: LoomEvent) => void;
  observer?: SchedulerObserver;
  /** The clock (ms since epoch). */
  now?: () => number;
  /** This replica's place among the live replicas (the Hub follows them); default: the only one. */
  stripe?: () => { index: number; count: number };
};
