// Order statistics for latency samples. Percentiles use the nearest-rank method, so a p99
// of 100 samples is the 99th smallest: a real observation, never an interpolation.
export function percentile(xs: ArrayLike<number>, p: number): number {
  if (!xs.length) return NaN;
  const s = Float64Array.from(xs).sort();
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))];
}

export const median = (xs: ArrayLike<number>) => percentile(xs, 50);

/** Milliseconds since the epoch with sub-millisecond precision; comparable across processes on one machine. */
export const nowMs = () => performance.timeOrigin + performance.now();

export function fmt(v: number, unit = ""): string {
  if (!Number.isFinite(v)) return "n/a";
  const abs = Math.abs(v);
  const s =
    abs >= 1000
      ? Math.round(v).toLocaleString("en")
      : abs >= 10
        ? v.toFixed(1)
        : abs >= 1
          ? v.toFixed(2)
          : v.toFixed(3);
  return unit ? `${s} ${unit}` : s;
}
