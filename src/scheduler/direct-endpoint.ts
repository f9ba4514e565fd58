// Where the Hub reaches a worker's Direct Runner, and the token it pushes with: what a push
// (push.ts) and a liveness probe (direct-liveness.ts) both need.
import type { Worker } from "../resources/types.ts";
import { HubError } from "../protocol/errors.ts";

/** Where a worker's Direct Runner listens, if it has one. */
export function directEndpoint(w: Worker): string | undefined {
  const s = w.spec;
  if (s.worker_url) return s.worker_url.replace(/\/+$/, "");
  if (s.connection_mode !== "direct-worker-api") return undefined;
  const host = s.private_host || s.host;
  if (!host) return undefined;
  return `http://${host}:${s.command_port ?? s.serve_port ?? 9876}`;
}

export type PushOptions = {
  defaultTokenEnv: string;
  env?: NodeJS.ProcessEnv;
  /**
   * Which variables a Worker's direct_api_token_env may name: exact names, or prefixes ending
   * in "*". The Hub sends the value to the worker's URL, which the API can set, so any other
   * name (the Hub's own token, a cloud key) would be a way to read the Hub's secrets.
   */
  allowedTokenEnv?: readonly string[];
  fetchImpl?: typeof fetch;
};

export const DEFAULT_ALLOWED_TOKEN_ENV = ["LOOM_DIRECT_TOKEN_*"] as const;

export function tokenEnvAllowed(name: string, o: PushOptions): boolean {
  if (name === o.defaultTokenEnv) return true;
  return (o.allowedTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV).some((p) =>
    p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p,
  );
}

export function runnerToken(w: Worker, o: PushOptions): string {
  const name = w.spec.direct_api_token_env || o.defaultTokenEnv;
  if (!tokenEnvAllowed(name, o))
    throw new HubError(403, "token_env_not_allowed", {
      field: "spec.direct_api_token_env",
      worker_id: w.metadata.name,
      token_env: name,
      detail: `the Hub pushes only with variables the operator allows (loom hub --direct-token-env; now: ${(o.allowedTokenEnv ?? DEFAULT_ALLOWED_TOKEN_ENV).join(", ")})`,
    });
  const v = (o.env ?? process.env)[name];
  if (!v)
    throw new HubError(400, "runner_token_missing", {
      detail: `the Hub's environment has no ${name}`,
      token_env: name,
    });
  return v;
}
