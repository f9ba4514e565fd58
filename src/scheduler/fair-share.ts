// Fair share across queues: a queue's weighted dominant share is the largest fraction of the
// fleet's capacity it holds in any dimension, divided by its weight (DRF, as Kueue's fair
// sharing and Slurm's TRES shares compute it). Decayed usage is an exponential moving
// average of that usage with a half-life, so a queue that ran all night keeps a high share
// for a while after its leases end (Slurm's and HTCondor's usage half-life).
import { RESOURCE_FIELDS } from "../resources/types.ts";
import type { Amounts } from "../admission/queues.ts";
import type { Vector } from "../admission/vector.ts";

/** max over the fleet's non-empty dimensions of used / capacity, divided by weight; 0 when nothing is held. */
export function dominantShare(used: Amounts, fleet: Vector, weight: number): number {
  let top = 0;
  for (const f of RESOURCE_FIELDS) if (fleet[f] > 0) top = Math.max(top, (used[f] ?? 0) / fleet[f]);
  return top / (weight > 0 ? weight : 1);
}

/**
 * Usage averaged with exponential decay: after `dt` ms at a constant `used`, the average
 * moves from `avg` towards `used` by 1 - 2^(-dt / halfLife). At a steady usage it equals
 * that usage; after the usage stops it halves every half-life.
 */
export function decayTowards(avg: Amounts, used: Amounts, dtMs: number, halfLifeMs: number): Amounts {
  const k = halfLifeMs > 0 ? Math.pow(2, -Math.max(0, dtMs) / halfLifeMs) : 0;
  const out: Amounts = {};
  for (const f of RESOURCE_FIELDS) {
    const v = (avg[f] ?? 0) * k + (used[f] ?? 0) * (1 - k);
    if (v > 1e-9) out[f] = v;
  }
  return out;
}

/** "team-b has share 0.62, team-a 0.31: team-a goes first", for the queues given, lowest last. */
export function standingSentence(shares: { queue: string; share: number }[]): string {
  if (shares.length === 0) return "no queues";
  const sorted = [...shares].sort((a, b) => b.share - a.share || (a.queue < b.queue ? -1 : 1));
  const parts = sorted.map((s, i) =>
    i === 0 ? `${s.queue} has share ${s.share.toFixed(2)}` : `${s.queue} ${s.share.toFixed(2)}`,
  );
  const first = sorted.at(-1)!;
  return sorted.length === 1 ? `${parts[0]}` : `${parts.join(", ")}: ${first.queue} goes first`;
}
