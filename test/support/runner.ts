// Test support: options for an in-process Runner (pull loop or Direct Runner) on loopback.
import type { HubClient } from "../../src/runner/client.ts";
import type { DirectOptions } from "../../src/runner/direct.ts";

/** A one-slot Runner with fast retries; `extra` overrides any field. */
export function runnerOptions(
  client: HubClient,
  workerId: string,
  workDir: string,
  log: (l: string) => void,
  extra: Partial<DirectOptions> = {},
): DirectOptions {
  return {
    client,
    workerId,
    workDir,
    capabilities: ["linux", "*"],
    maxConcurrency: 1,
    initialConcurrency: 1,
    concurrencyPolicy: "fixed",
    leaseSeconds: 60,
    scrubEnv: [],
    log,
    claimWaitSeconds: 0,
    pollSeconds: 1,
    once: false,
    maxTasks: 0,
    graceSeconds: 5,
    host: "127.0.0.1",
    port: 0,
    retryDelaysMs: [50],
    killGraceMs: 200,
    maxBackoffMs: 200,
    ...extra,
  };
}
