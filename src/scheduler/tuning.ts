// Desired concurrency from results (RUNNER_PROTOCOL 4, "Concurrency policies").
// fixed: only resource or rate-limit trouble lowers it, by one, never below 1.
// adaptive: a baseline from the first healthy solo run, then step up on healthy complete
// batches and back off on unhealthy results.
import type { Worker, WorkerStatus } from "../resources/types.ts";
import { isStoreError } from "../store/errors.ts";
import type { LockedCommit, SchedulerContext } from "./context.ts";
import { effectiveSettings } from "./workers.ts";
import type { BatchTally } from "./batches.ts";

export type ResultFacts = { verdict: string; issues: string[]; entries: Map<string, Buffer> | null };

const LOWERING_ISSUES = ["terminal_resource_insufficient", "rate_limited"];

type Observed = {
  desired?: number;
  batchId?: string;
  batchSize?: number;
  cpuSeconds?: number;
  wallSeconds?: number;
  maxRssMb?: number;
};

function observe(entries: Map<string, Buffer> | null): Observed {
  if (!entries) return {};
  const name = [...entries.keys()].sort().find((n) => n.endsWith("worker-result.json"));
  if (!name) return {};
  try {
    const wr = JSON.parse(entries.get(name)!.toString("utf8"));
    const cc = wr.controller_concurrency ?? {};
    const ru = wr.resource_usage ?? {};
    return {
      desired: cc.desired_concurrency,
      batchId: cc.claim_batch_id,
      batchSize: cc.claim_batch_size,
      cpuSeconds: ru.cpu_seconds,
      wallSeconds: ru.duration_seconds,
      maxRssMb: ru.max_rss_mb,
    };
  } catch {
    return {};
  }
}

export function nextDesired(
  w: Worker,
  facts: ResultFacts,
  batches: BatchTally,
): { desired: number; tuning?: WorkerStatus["tuning"] } | undefined {
  const s = effectiveSettings(w);
  const healthy = facts.verdict === "clean" && facts.issues.length === 0;
  const cur = s.desired_concurrency;
  if (s.concurrency_policy === "fixed") {
    if (healthy || !facts.issues.some((i) => LOWERING_ISSUES.includes(i))) return undefined;
    return { desired: Math.max(1, cur - 1) };
  }
  const o = observe(facts.entries);
  const observed = typeof o.desired === "number" ? o.desired : cur;
  const t = { ...(w.status?.tuning ?? {}) };
  const max = s.max_concurrency;
  const batch = o.batchId && o.batchSize ? batches.count(o.batchId, o.batchSize, healthy) : undefined;
  if (!healthy) {
    const good = t.good ?? 0;
    const next = observed <= 1 ? 1 : good >= observed ? observed - 1 : Math.floor((good + observed) / 2);
    t.bad = observed;
    return { desired: Math.min(Math.max(1, next), max), tuning: t };
  }
  if (t.theoretical === undefined && observed === 1 && o.wallSeconds && o.wallSeconds > 0) {
    const host = (w.status?.registration?.host_resources ?? {}) as Record<string, number>;
    const cpuBound = (host.cpu_count ?? 1) / Math.max((o.cpuSeconds ?? 0) / o.wallSeconds, 0.05);
    const memBound = o.maxRssMb && host.mem_total_mb ? (0.8 * host.mem_total_mb) / o.maxRssMb : Infinity;
    t.theoretical = Math.min(cpuBound, memBound);
  }
  // Within a batch, only the result that completes a clean batch may step up.
  if (o.batchId && o.batchSize && (!batch || batch.unhealthy > 0))
    return t.theoretical !== w.status?.tuning?.theoretical ? { desired: cur, tuning: t } : undefined;
  t.good = Math.max(t.good ?? 0, observed);
  const good = t.good;
  const theo = t.theoretical ?? max;
  let next = cur;
  if (good < theo) {
    next = Math.max(good + 1, Math.ceil((good + theo) / 2));
    if (t.bad !== undefined && next >= t.bad) next = Math.max(good, t.bad - 1);
  } else if (good < Math.min(max, theo + 10)) next = good + 1;
  return { desired: Math.min(Math.max(1, next), max), tuning: t };
}

export async function adjustConcurrency(
  ctx: SchedulerContext,
  workerId: string,
  facts: ResultFacts,
  commit: LockedCommit = ctx.commit.bind(ctx),
): Promise<void> {
  const w = ctx.worker(workerId);
  if (!w) return;
  const next = nextDesired(w, facts, ctx.batches);
  if (!next) return;
  const same =
    next.desired === w.status?.desired_concurrency &&
    JSON.stringify(next.tuning ?? w.status?.tuning) === JSON.stringify(w.status?.tuning);
  if (same) return;
  const status = {
    ...(w.status ?? {}),
    desired_concurrency: next.desired,
    ...(next.tuning ? { tuning: next.tuning } : {}),
  };
  try {
    const [written] = await commit([{ op: "updateStatus", object: { ...w, status } }]);
    if (next.desired !== w.status?.desired_concurrency)
      ctx.recordEvent({
        object: written,
        type: "Normal",
        reason: "ConcurrencyTuned",
        message: `desired concurrency ${w.status?.desired_concurrency ?? "?"} -> ${next.desired} (${effectiveSettings(w).concurrency_policy})`,
      });
  } catch (e) {
    // A concurrent write to the worker wins, or the worker is gone; the next result tunes again.
    if (isStoreError(e, "Conflict") || isStoreError(e, "NotFound")) return;
    // The result itself is recorded already, so its reply stands; the worker says what failed.
    ctx.recordEvent({
      object: w,
      type: "Warning",
      reason: "ConcurrencyTuneFailed",
      message: `desired concurrency not written: ${e instanceof Error ? e.message : String(e)}`,
    });
  }
}
