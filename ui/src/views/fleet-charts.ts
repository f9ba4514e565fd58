// The fleet over the last hour, below the queue: how many tasks waited, by reason, and how
// many leases were granted per step. Both come from /api/data/history, which derives them
// from the Hub's own tasks and Events (no Prometheus needed).
import { h } from "../dom.ts";
import type { Fleet } from "../fleet.ts";
import { stackedColumns } from "../charts.ts";
import { HistoryFeed, type FleetHistory } from "../history-feed.ts";

/** A panel that redraws from the history feed; subclasses say what to draw. */
export abstract class HistoryPanel {
  readonly el: HTMLElement;
  protected readonly body = h("div", { class: "history-body" });
  private readonly feed = new HistoryFeed(() => this.render());
  private readonly timer: ReturnType<typeof setInterval>;
  private drawn: FleetHistory | undefined;

  constructor(
    protected readonly fleet: Fleet,
    id: string,
    title: string,
    note: string,
  ) {
    this.el = h(
      "section",
      { class: "history", "aria-labelledby": id },
      h("h2", { id }, title),
      h("p", { class: "help" }, note),
      this.body,
    );
    this.timer = setInterval(() => this.update(), 1_000); // the feed fetches only when stale
  }

  update(): void {
    this.feed.want(this.fleet.versions.tasks);
  }

  dispose(): void {
    clearInterval(this.timer);
  }

  private render(): void {
    if (this.feed.error && !this.feed.data)
      return void this.body.replaceChildren(h("p", { class: "error" }, `History unavailable: ${this.feed.error}`));
    const d = this.feed.data;
    if (!d || d === this.drawn) return;
    this.drawn = d;
    this.body.replaceChildren(...this.draw(d));
  }

  protected abstract draw(d: FleetHistory): HTMLElement[];
}

export class FleetCharts extends HistoryPanel {
  constructor(fleet: Fleet) {
    super(
      fleet,
      "fleet-h",
      "The last hour",
      "Queued tasks by their Admitted reason (on average over each minute: a task queued for half of it counts ½), and leases granted in each minute. Hover a column for its numbers.",
    );
  }

  protected draw(d: FleetHistory): HTMLElement[] {
    const times = d.times.map((t) => Date.parse(t));
    const step = d.step_seconds * 1000;
    const depth = d.queue_depth.length
      ? stackedColumns({
          label: "Queued tasks",
          unit: "queued",
          times,
          step,
          now: d.queued_now,
          per: " (average over a minute)",
          series: d.queue_depth.map((q) => ({ name: q.reason, values: q.counts })),
        })
      : h("p", { class: "empty" }, "No task waited in the last hour.");
    const leases = stackedColumns({
      label: `Leases granted per ${d.step_seconds === 60 ? "minute" : `${d.step_seconds} s`}`,
      unit: "leases",
      times,
      step,
      nowLabel: "this minute",
      series: [{ name: "", values: d.leases_granted }],
    });
    depth.classList.add("queue-depth");
    leases.classList.add("leases-rate");
    return [h("div", { class: "charts" }, depth, leases)];
  }
}
