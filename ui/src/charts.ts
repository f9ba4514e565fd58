// Charts drawn with plain elements (no canvas, no inline style attributes: sizes are set
// through the CSSOM, which the page's Content-Security-Policy allows). Every chart carries its
// numbers as text: a legend with the latest and peak values, and a tooltip on every column
// and bar.
import { h } from "./dom.ts";
import { humanDuration } from "../../src/resources/jsonpath.ts";

export type Series = { name: string; values: number[] };

const clock = (t: number) =>
  new Date(t).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
export const span = (a: number, b: number) => `${clock(a)}–${clock(b)} (${humanDuration(Math.max(0, b - a))})`;

/** Tick labels under a time axis: the window's start, middle and end. */
export function timeAxis(from: number, to: number): HTMLElement {
  return h(
    "div",
    { class: "axis", "aria-hidden": "true" },
    h("span", {}, `−${humanDuration(to - from)}`),
    h("span", {}, `−${humanDuration((to - from) / 2)}`),
    h("span", {}, "now"),
  );
}

const pct = (el: HTMLElement, prop: "height" | "left" | "width", share: number) => {
  el.style[prop] = `${(Math.max(0, Math.min(1, share)) * 100).toFixed(2)}%`;
  return el;
};

/**
 * Columns over time, one per step, stacked by series (colour classes c0..c7 in series
 * order). `times` are the step ends in ms. With one series it is a plain column chart.
 */
const num = (n: number) => String(Math.round(n * 10) / 10);

/** `now` gives each series' (and the total's) current value when it differs from the last column's, as an average over a step does. */
export function stackedColumns(o: {
  label: string;
  unit: string;
  times: number[];
  series: Series[];
  step: number;
  now?: Record<string, number>;
  per?: string;
  nowLabel?: string;
}): HTMLElement {
  const totals = o.times.map((_, i) => o.series.reduce((n, s) => n + (s.values[i] ?? 0), 0));
  const peak = Math.max(0, ...totals);
  const top = niceCeil(peak);
  const cols = o.times.map((t, i) => {
    const parts = o.series.map((s, k) => [s, k, s.values[i] ?? 0] as const).filter(([, , v]) => v > 0);
    const tip = `${span(t - o.step, t)}: ${num(totals[i])} ${o.unit}${parts.length > 1 ? `\n${parts.map(([s, , v]) => `${s.name} ${num(v)}`).join("\n")}` : ""}`;
    return h(
      "div",
      { class: "col", title: tip, "data-total": totals[i] },
      parts.map(([s, k, v]) =>
        pct(h("span", { class: `seg c${k % 8}`, "data-series": s.name }), "height", top ? v / top : 0),
      ),
    );
  });
  const latest = (s: Series) => (o.now ? (o.now[s.name] ?? 0) : (s.values.at(-1) ?? 0));
  const nowLabel = o.nowLabel ?? "now";
  const legend = h(
    "ul",
    { class: "legend" },
    o.series.map((s, k) =>
      h(
        "li",
        { "data-series": s.name },
        h("span", { class: `swatch c${k % 8}`, "aria-hidden": "true" }),
        `${s.name}: ${nowLabel} ${num(latest(s))}, peak ${num(Math.max(0, ...s.values))}${o.per ?? ""}`,
      ),
    ),
  );
  const grid = h(
    "div",
    { class: "plot" },
    h("span", { class: "ymax", "aria-hidden": "true" }, num(top)),
    h("div", { class: "columns" }, cols),
  );
  const nowTotal = o.now ? Object.values(o.now).reduce((a, b) => a + b, 0) : (totals.at(-1) ?? 0);
  const summary = `${o.label}: ${nowLabel} ${num(nowTotal)} ${o.unit}, peak ${num(peak)}${o.per ?? ""}`;
  return h(
    "figure",
    { class: "chart", role: "group", "aria-label": summary },
    h("figcaption", {}, summary),
    grid,
    timeAxis(o.times[0] - o.step, o.times.at(-1) ?? 0),
    o.series.length > 1 || o.series[0]?.name ? legend : null,
  );
}

/** 1, 2, 5 × 10ⁿ at or above n (an axis top that reads well). */
export function niceCeil(n: number): number {
  if (n <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(n));
  return [1, 2, 5, 10].map((m) => m * p).find((x) => x >= n)!;
}

export type Bar = { start: number; end: number; split?: number; cls: string; label: string; tip: string; key: string };

/**
 * Bars over a time window, packed into as few lanes as they need (a lease that overlaps
 * another goes below it). A bar's part before `split` is drawn hatched (leased, not yet
 * running).
 */
export function lanes(bars: Bar[], from: number, to: number): HTMLElement {
  const ends: number[] = [];
  const placed = [...bars]
    .sort((a, b) => a.start - b.start)
    .map((b) => {
      let lane = ends.findIndex((e) => e <= b.start);
      if (lane < 0) lane = ends.push(0) - 1;
      ends[lane] = b.end;
      return { b, lane };
    });
  const width = to - from;
  const rows = Array.from({ length: Math.max(1, ends.length) }, () => h("div", { class: "lane-row" }));
  for (const { b, lane } of placed) {
    const s = Math.max(b.start, from),
      e = Math.min(b.end, to);
    const el = h(
      "div",
      { class: `tbar ${b.cls}`, title: b.tip, "data-key": b.key },
      h("span", { class: "tlabel" }, b.label),
    );
    pct(el, "left", (s - from) / width);
    pct(el, "width", Math.max(e - s, 0) / width);
    if (b.split !== undefined && b.split > s) {
      const hatch = h("span", { class: "leased-part", "aria-hidden": "true" });
      pct(hatch, "width", e > s ? (Math.min(b.split, e) - s) / (e - s) : 1);
      el.prepend(hatch);
    }
    rows[lane].append(el);
  }
  return h("div", { class: "lanes" }, rows);
}
