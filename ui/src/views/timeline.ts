// Each worker's last hour, below the workers: its leases as bars over time, coloured by state
// (hatched while leased and not yet started), each with its reservation in its label and
// tooltip. Overlapping leases stack in lanes, so a worker's concurrency reads at a glance.
import { humanDuration } from "../../../src/resources/jsonpath.ts";
import { h } from "../dom.ts";
import type { Fleet } from "../fleet.ts";
import { lanes, span, timeAxis, type Bar } from "../charts.ts";
import type { FleetHistory } from "../history-feed.ts";
import { requestText } from "../model.ts";
import { STATE_CLASS } from "../widgets.ts";
import { HistoryPanel } from "./fleet-charts.ts";

export class WorkerTimelines extends HistoryPanel {
  constructor(fleet: Fleet) {
    super(
      fleet,
      "timeline-h",
      "Leases per worker",
      "The last hour, or since shortly before its first lease. One bar per lease, from grant to end: hatched while leased and not yet started, then coloured by its state or outcome. Hover a bar for its task, times and reservation.",
    );
  }

  protected draw(d: FleetHistory): HTMLElement[] {
    // Zoomed to the activity: from a little before the first lease of the hour (2 minutes at least), so a young fleet's bars are not slivers.
    const to = Date.parse(d.to);
    const first = Math.min(to, ...d.workers.flatMap((w) => w.leases.map((l) => Date.parse(l.leased_at))));
    const from = Math.max(Date.parse(d.from), Math.min(to - 2 * 60_000, first - (to - first) * 0.05));
    const byWorker = new Map(d.workers.map((w) => [w.worker, w]));
    const names = [...new Set([...this.fleet.workers.keys(), ...byWorker.keys()])].sort();
    if (!names.length) return [h("p", { class: "empty" }, "No workers.")];
    const rows = names.map((name) => {
      const w = byWorker.get(name);
      const bars: Bar[] = (w?.leases ?? []).map((l) => {
        const start = Date.parse(l.leased_at),
          end = l.ended_at ? Date.parse(l.ended_at) : to;
        const res = requestText(l.reservation);
        return {
          key: `${l.task}#${l.attempt}`,
          start,
          end,
          split: l.started_at ? Date.parse(l.started_at) : end,
          cls: `st-${STATE_CLASS[l.state] ?? "muted"}${l.placement === "exclusive" ? " exclusive" : ""}`,
          // Generated names share their campaign's prefix: the bar shows what follows it (the tooltip has it all).
          label: `${l.task.includes("__") ? l.task.slice(l.task.indexOf("__") + 2) : l.task} · ${res}`,
          tip: `${l.task} (attempt ${l.attempt}): ${l.state}\n${span(start, end)}${l.ended_at ? "" : ", still active"}\n${l.started_at ? `started ${humanDuration(Date.parse(l.started_at) - start)} after the grant` : "not started"}\nreserved: ${res}${l.placement === "exclusive" ? " (exclusive)" : ""}`,
        };
      });
      const count = w
        ? `${w.leases.length}${w.truncated ? ` (+${w.truncated} older)` : ""} lease${w.leases.length === 1 ? "" : "s"}`
        : "no leases";
      return h(
        "div",
        { class: "timeline-row", "data-worker": name },
        h(
          "div",
          { class: "timeline-name" },
          h("a", { href: `#/queue?worker=${encodeURIComponent(name)}` }, name),
          h("span", { class: "help" }, count),
        ),
        lanes(bars, from, to),
      );
    });
    return [
      h("div", { class: "timelines" }, rows, h("div", { class: "timeline-row" }, h("div", {}), timeAxis(from, to))),
    ];
  }
}
