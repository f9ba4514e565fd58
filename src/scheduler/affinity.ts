// Source-cache affinity (informational): does the worker already hold the task's pinned
// source? Computed from the task's source descriptor and the worker's last heartbeat.
import { createHash } from "node:crypto";
import type { Task } from "../resources/types.ts";
import type { LiveRecord } from "./liveness.ts";

export type CacheAffinity = {
  cache_key: string | null;
  cache_hit: boolean;
  worker_cache_enabled: boolean;
  reason: "task_has_no_immutable_source" | "worker_cache_disabled" | "cache_hit" | "cache_miss";
};

const FULL_SHA = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/i;

function canonicalUrl(raw: string): string {
  try {
    const u = new URL(raw);
    u.username = "";
    u.password = "";
    u.search = "";
    u.hash = "";
    return u.toString();
  } catch {
    return raw.split(/[?#]/)[0].replace(/\/\/[^/@]*@/, "//");
  }
}

/** `git-sha256:<hex>` for a source pinned to a full commit; null for anything movable. */
export function sourceCacheKey(payload: Record<string, unknown> | undefined): string | null {
  const src = (payload?.source_descriptor ?? payload?.source) as Record<string, unknown> | undefined;
  if (!src || typeof src !== "object") return null;
  const url = src.url ?? src.repo_url ?? src.repository;
  const commit = [src.resolved_commit, src.commit, src.ref].find((c) => typeof c === "string" && FULL_SHA.test(c)) as
    string | undefined;
  if (typeof url !== "string" || !commit) return null;
  const body = JSON.stringify({
    canonical_url: canonicalUrl(url),
    commit: commit.toLowerCase(),
    schema_version: 1,
    type: "git",
  });
  return `git-sha256:${createHash("sha256").update(body).digest("hex")}`;
}

export function cacheAffinity(task: Task, live: LiveRecord | undefined): CacheAffinity {
  return affinityFor(sourceCacheKey(task.spec.payload), live);
}

/** The same, for a key already computed: task-admission asks it of every worker for one task. */
export function affinityFor(key: string | null, live: LiveRecord | undefined): CacheAffinity {
  const enabled = live?.cacheEnabled ?? false;
  if (!key)
    return { cache_key: null, cache_hit: false, worker_cache_enabled: enabled, reason: "task_has_no_immutable_source" };
  if (!enabled)
    return { cache_key: key, cache_hit: false, worker_cache_enabled: false, reason: "worker_cache_disabled" };
  const hit = live!.cacheKeys.has(key);
  return { cache_key: key, cache_hit: hit, worker_cache_enabled: true, reason: hit ? "cache_hit" : "cache_miss" };
}
