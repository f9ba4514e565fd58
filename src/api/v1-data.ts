// The rest of v1's read API under /api/data/ (what v1's `summary` and `worker-cache` read),
// answered from the same informer cache and store as the resource API: worker-cache,
// worker-hosts, active-workers, new-results, error-rate, control-log and oracle-outcomes.
// Loom runs no Oracle children, so the Oracle paths answer that plainly.
import type { FastifyInstance } from "fastify";
import type { Worker } from "../resources/types.ts";
import { HubError } from "../protocol/errors.ts";
import { directEndpoint } from "../scheduler/push.ts";
import type { StoredObject } from "../store/store.ts";

type Q = Record<string, string | undefined>;
const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

/** A whole-number query parameter within bounds, or a 400 naming it. */
function intParam(q: Q, name: string, dflt: number, min: number, max: number): number {
  const raw = q[name];
  if (raw === undefined || raw === "") return dflt;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new HubError(400, `invalid_${name}`, { field: name, detail: `must be an integer from ${min} to ${max}` });
  return n;
}

/** The task fields v1's error-rate may group by. */
const GROUP_BY = [
  "state",
  "case_id",
  "run_id",
  "setting_id",
  "package_id",
  "lease_worker_id",
  "task_kind",
  "campaign_id",
  "required_capability",
] as const;

export async function v1DataRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const scheduler = hub.scheduler;
  const workers = () => hub.cache.list("Worker").sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  const status = (w: Worker) => scheduler.capacity(w).status;

  f.get("/api/data/worker-cache", async () => ({
    workers: workers().map((w) => {
      const live = scheduler.liveness(w.metadata.name);
      return {
        worker_id: w.metadata.name,
        status: status(w),
        last_seen_at: iso(live?.lastSeen),
        source_cache: live?.health?.source_cache ?? null,
      };
    }),
  }));

  f.get("/api/data/worker-hosts", async (req) => {
    const mode = (req.query as Q).connection_mode?.trim();
    const hosts = workers()
      .filter((w) => w.spec.host !== undefined && (!mode || w.spec.connection_mode === mode))
      .map((w) => ({
        host_id: w.metadata.name,
        worker_id: w.metadata.name,
        ...w.spec,
        endpoint: directEndpoint(w) ?? null,
        updated_at: w.metadata.creationTimestamp ?? null,
      }));
    return { hosts };
  });

  f.get("/api/data/active-workers", async (req) => {
    const maxAge = intParam(req.query as Q, "max_age_seconds", 120, 0, 10 ** 9);
    const cutoff = Date.now() - maxAge * 1000;
    const rows = workers()
      .map((w) => ({ w, live: scheduler.liveness(w.metadata.name) }))
      .filter(({ w, live }) => !w.spec.unschedulable && live && live.lastSeen >= cutoff)
      .sort((a, b) => b.live!.lastSeen - a.live!.lastSeen)
      .map(({ w, live }) => ({
        ...scheduler.capacity(w),
        last_seen_at: iso(live!.lastSeen),
        current_runs: live!.currentRuns,
        capabilities: w.spec.capabilities ?? w.status?.registration?.capabilities ?? [],
      }));
    return { workers: rows, cutoff: iso(cutoff) };
  });

  f.get("/api/data/new-results", async (req) => {
    const q = req.query as Q;
    const cursor = intParam(q, "cursor", 0, 0, Number.MAX_SAFE_INTEGER);
    const limit = intParam(q, "limit", 100, 1, 500);
    // A result's cursor is the store revision that created it: increasing, never reused.
    const { items } = await hub.store.list("Result");
    const results = items
      .map((r): Record<string, unknown> & { cursor: number } => ({
        cursor: Number(r.metadata.resourceVersion),
        result_id: r.metadata.name,
        ...(r.spec as Record<string, unknown>),
      }))
      .filter((r) => r.cursor > cursor)
      .sort((a, b) => a.cursor - b.cursor)
      .slice(0, limit)
      .map(({ path: _path, ...r }) => r);
    return { cursor, next_cursor: results.at(-1)?.cursor ?? cursor, results };
  });

  f.get("/api/data/error-rate", async (req) => {
    const q = req.query as Q;
    const by = q.by ?? "state";
    if (!(GROUP_BY as readonly string[]).includes(by))
      throw new HubError(400, "unsupported_group_by", { allowed: [...GROUP_BY] });
    const windowSeconds = intParam(q, "window_seconds", 86400, 1, 10 ** 9);
    const since = Date.now() - windowSeconds * 1000;
    const buckets = new Map<string, { total: number; errors: number }>();
    for (const t of hub.cache.list("Task")) {
      if (Date.parse(t.metadata.creationTimestamp ?? "") < since && !t.status?.attempts?.length) continue;
      const state = t.status?.state ?? "queued";
      const key =
        by === "state"
          ? state
          : by === "lease_worker_id"
            ? (t.status?.lease?.worker ?? "")
            : String((t.spec as Record<string, unknown>)[by] ?? "");
      const b = buckets.get(key) ?? { total: 0, errors: 0 };
      b.total++;
      if (state === "run_error" || state === "needs_review") b.errors++;
      buckets.set(key, b);
    }
    const rows = [...buckets].map(([bucket, b]) => ({ bucket, ...b, error_rate: b.total ? b.errors / b.total : 0 }));
    rows.sort((a, b) => b.errors - a.errors || b.total - a.total);
    return { by, window_seconds: windowSeconds, rows };
  });

  f.get("/api/data/control-log", async (req) => {
    const q = req.query as Q;
    const limit = intParam(q, "limit", 100, 1, 500);
    // The Hub's control log is its Events, newest first.
    const { items } = await hub.store.list("Event");
    const logs = (
      items as (StoredObject & {
        involvedObject?: { kind: string; name: string };
        type?: string;
        reason?: string;
        message?: string;
        lastTimestamp?: string;
        count?: number;
      })[]
    )
      .filter((e) => !q.level || e.type?.toLowerCase() === q.level.toLowerCase())
      .sort((a, b) => String(b.lastTimestamp).localeCompare(String(a.lastTimestamp)))
      .slice(0, limit)
      .map((e) => ({
        time: e.lastTimestamp ?? null,
        level: e.type ?? null,
        event: e.reason ?? null,
        message: e.message ?? null,
        target_type: e.involvedObject?.kind ?? null,
        target_id: e.involvedObject?.name ?? null,
        count: e.count ?? 1,
      }));
    return { logs };
  });

  f.get("/api/data/oracle-outcomes", async () => ({ outcomes: [], total: 0, detail: "Loom runs no Oracle children" }));
  f.post("/api/oracles/dispatch", async () => {
    throw new HubError(501, "oracle_dispatch_not_supported", {
      detail: "Loom does not run Oracle children; an oracle in a manifest is kept in the task payload",
    });
  });
}
