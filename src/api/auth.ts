// Bearer / X-Loom-Token authentication. Tokens are compared in constant time (both sides
// hashed first, so lengths leak nothing) and never logged. The Hub token opens every path;
// an optional per-worker Runner token lets a Runner act only as its own worker_id.
import { createHash, timingSafeEqual } from "node:crypto";
import type { FastifyRequest } from "fastify";

export type Principal = { kind: "anonymous" } | { kind: "admin" } | { kind: "worker"; workerId: string };

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

export function tokenEquals(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token a request presents, from `Authorization: Bearer` (any case) or `X-Loom-Token`. */
export function presentedToken(req: FastifyRequest): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === "string") {
    const m = /^bearer\s+(.+)$/i.exec(auth.trim());
    if (m) return m[1].trim();
  }
  const x = req.headers["x-loom-token"];
  return typeof x === "string" && x ? x : undefined;
}

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
  const given = presentedToken(req);
  if (given === undefined) return cfg.hubToken ? undefined : { kind: "admin" };
  if (cfg.hubToken && tokenEquals(given, cfg.hubToken)) return { kind: "admin" };
  // Check every worker token, so timing does not reveal which one matched.
  let match: string | undefined;
  for (const [workerId, token] of workerTokens) if (tokenEquals(given, token) && match === undefined) match = workerId;
  if (match !== undefined) return { kind: "worker", workerId: match };
  return cfg.hubToken ? undefined : { kind: "admin" };
}

export const isLoopback = (host: string) => host === "localhost" || host === "::1" || host === "[::1]" || /^127\./.test(host);
