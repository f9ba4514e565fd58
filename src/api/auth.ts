// Who is calling the Hub (security/tokens.ts reads and compares the token). The Hub token opens every path;
// an optional per-worker Runner token lets a Runner act only as its own worker_id.
import type { FastifyRequest } from "fastify";
import { presentedToken, tokenEquals } from "../security/tokens.ts";

export type Principal = { kind: "anonymous" } | { kind: "admin" } | { kind: "worker"; workerId: string };

export type AuthConfig = {
  /** The Hub token; undefined means the Hub is open (only allowed on loopback). */
  hubToken?: string;
  /** worker_id -> token, for Runners that may act only as themselves. */
  workerTokens?: Record<string, string>;
};

/** Who is calling, or undefined when a token is required and none matches. */
export function authenticate(req: FastifyRequest, cfg: AuthConfig): Principal | undefined {
  const workerTokens = Object.entries(cfg.workerTokens ?? {});
  if (!cfg.hubToken && !workerTokens.length) return { kind: "admin" };
  const given = presentedToken(req.headers);
  if (given === undefined) return cfg.hubToken ? undefined : { kind: "admin" };
  if (cfg.hubToken && tokenEquals(given, cfg.hubToken)) return { kind: "admin" };
  // Check every worker token, so timing does not reveal which one matched.
  let match: string | undefined;
  for (const [workerId, token] of workerTokens) if (tokenEquals(given, token) && match === undefined) match = workerId;
  if (match !== undefined) return { kind: "worker", workerId: match };
  return cfg.hubToken ? undefined : { kind: "admin" };
}
