// Is an idle Direct Runner alive? v1's Direct Runner heartbeats only when it registers and
// after each push it finishes, so an idle one goes quiet for as long as it has no work, and
// a Hub that has just started has heard nothing from it. Heartbeats alone would call it
// dead. For a worker with a Direct Runner endpoint whose last call is stale, the Hub asks
// the Runner itself (GET /api/healthz, RUNNER_PROTOCOL 1c) before it refuses or admits; an
// answer from the right worker counts as a call. What the Hub knew before a restart (the
// Worker's stored last_heartbeat_at) is carried over while it is within the grace period.
import type { Worker } from "../resources/types.ts";
import type { SchedulerContext } from "./context.ts";
import { directEndpoint, runnerToken, type PushOptions } from "./direct-endpoint.ts";

/** How long a probe may take: a Runner that cannot answer this fast is not taken as alive. */
export const PROBE_TIMEOUT_MS = 2000;
/** After a probe that failed, the next one waits this long (unless an operator's push asks). */
export const PROBE_RETRY_MS = 10_000;

type ProbeState = { inflight?: Promise<boolean>; failedAt?: number };
const state = new WeakMap<SchedulerContext, Map<string, ProbeState>>();

function probesOf(ctx: SchedulerContext): Map<string, ProbeState> {
  let m = state.get(ctx);
  if (!m) state.set(ctx, (m = new Map()));
  return m;
}

/**
 * True if the worker is alive: its last call is within the grace period, or its Direct
 * Runner answers GET /api/healthz as this worker. `force` skips the wait after a failed probe.
 */
export async function confirmDirectRunner(
  ctx: SchedulerContext,
  w: Worker,
  o: PushOptions,
  opts: { force?: boolean } = {},
): Promise<boolean> {
  const name = w.metadata.name;
  if (ctx.liveness.ready(name, ctx.now())) return true;
  const url = directEndpoint(w);
  if (!url || !w.status?.registration) return false;
  const probes = probesOf(ctx);
  const p = probes.get(name) ?? {};
  probes.set(name, p);
  if (p.inflight) return p.inflight;
  if (!opts.force && p.failedAt !== undefined && ctx.now() - p.failedAt < PROBE_RETRY_MS) return false;
  p.inflight = probe(ctx, w, url, o).finally(() => (p.inflight = undefined));
  const ok = await p.inflight;
  if (ok) probes.delete(name);
  else p.failedAt = ctx.now();
  return ok;
}

async function probe(ctx: SchedulerContext, w: Worker, url: string, o: PushOptions): Promise<boolean> {
  const name = w.metadata.name;
  let token: string;
  try {
    token = runnerToken(w, o);
  } catch {
    return false; // the push itself says why it cannot deliver
  }
  const last = ctx.liveness.get(name)?.lastSeen;
  try {
    const res = await (o.fetchImpl ?? fetch)(`${url}/api/healthz`, {
      headers: { authorization: `Bearer ${token}` },
      signal: AbortSignal.timeout(PROBE_TIMEOUT_MS),
    });
    const body = (await res.json().catch(() => undefined)) as { ok?: unknown; worker_id?: unknown } | undefined;
    // Another Runner listening at this address is not this worker.
    if (!res.ok || body?.ok !== true || (body.worker_id !== undefined && body.worker_id !== name)) return false;
  } catch {
    return false;
  }
  ctx.liveness.touch(name, ctx.now());
  const quiet = last === undefined ? "no call since the Hub started" : `no call since ${new Date(last).toISOString()}`;
  ctx.recordEvent({
    object: w,
    type: "Normal",
    reason: "RunnerAnswered",
    message: `${quiet}; its Direct Runner answered GET /api/healthz, so it counts as alive`,
  });
  return true;
}

/** Ask every quiet Direct Runner among `workers` at once (not one timeout after another). */
export async function confirmDirectRunners(ctx: SchedulerContext, workers: Worker[], o: PushOptions): Promise<void> {
  const now = ctx.now();
  const quiet = workers.filter(
    (w) =>
      directEndpoint(w) && w.status?.registration && !w.spec.unschedulable && !ctx.liveness.ready(w.metadata.name, now),
  );
  await Promise.all(quiet.map((w) => confirmDirectRunner(ctx, w, o)));
}

/**
 * Before a push decides: the named worker (an operator's push always asks again), or,
 * without one, every Direct Runner the push could choose.
 */
export async function confirmBeforePush(ctx: SchedulerContext, o: PushOptions, workerId?: string): Promise<void> {
  if (!workerId) return confirmDirectRunners(ctx, ctx.cache.list("Worker"), o);
  const w = ctx.worker(workerId);
  if (w) await confirmDirectRunner(ctx, w, o, { force: true });
}

/**
 * After a restart: each registered worker's stored last_heartbeat_at, if still within the
 * grace period, is taken as its last call, so a Runner heard from just before the restart
 * is not called dead for the gap. An older one is left out: that worker must call again.
 */
export function rememberLiveness(ctx: SchedulerContext): void {
  const now = ctx.now();
  for (const w of ctx.cache.list("Worker")) {
    const at = Date.parse(w.status?.last_heartbeat_at ?? "");
    if (!w.status?.registration || Number.isNaN(at) || at > now || now - at > ctx.liveness.graceMs) continue;
    if (!ctx.liveness.get(w.metadata.name)) ctx.liveness.touch(w.metadata.name, at);
  }
}
