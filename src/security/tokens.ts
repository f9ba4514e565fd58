// Tokens and loopback: the access rules the Hub API and the Direct Runner API share.
// Tokens are compared in constant time (both sides hashed first, so neither the length
// nor a prefix leaks) and never logged.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

export function tokenEquals(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

/** The token a request presents, from `Authorization: Bearer` (any case) or `X-Loom-Token`. */
export function presentedToken(headers: IncomingHttpHeaders): string | undefined {
  const auth = headers.authorization;
  if (typeof auth === "string") {
    const m = /^bearer\s+(.+)$/i.exec(auth.trim());
    if (m) return m[1].trim();
  }
  const x = headers["x-loom-token"];
  return typeof x === "string" && x ? x : undefined;
}

/** Whether a listen address only accepts connections from this host (IPv4-mapped IPv6 included). */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^(::ffff:)?127\./.test(h);
}
