// The queue: tasks by state with the Admitted reason, the Hub's queue position and the
// requested resources, in claim order (priority, then arrival). Filters: campaign, queue, state,
// reason, worker, label selector and name. The filters live in the location hash, so a view can be linked to.
import { json } from "../auth.ts";
import { h } from "../dom.ts";
import type { Fleet } from "../fleet.ts";
import {
  countBy,
  filterTasks,
  parseSelector,
  requestText,
  stateMatches,
  type TaskFilter,
  type TaskRow,
} from "../model.ts";
import { VirtualTable, type Column } from "../virtual-table.ts";
import { FleetCharts } from "./fleet-charts.ts";
import { Refresh } from "../refresh.ts";
import { ago, badge, breakable, fullText, labelChips, select, textInput } from "../widgets.ts";

const STATE_GROUPS: [string, string][] = [
  ["pending", "pending (queued, retry_queued)"],
  ["active", "active (leased, running)"],
  ["final", "final"],
];

export class QueueView {
  readonly el: HTMLElement;
  private filter: TaskFilter;
  private selectorText: string;
  private seen = "";
  private readonly table: VirtualTable<TaskRow>;
  private readonly summary = h("div", { class: "states", role: "group", "aria-label": "Tasks by state" });
  private readonly filters = h("div", { class: "toolbar" });
  private readonly count = h("p", { class: "count", "aria-live": "polite" });
  private readonly error = h("p", { class: "error", role: "alert", hidden: true });
  private readonly charts: FleetCharts;
  /** Each queued task's position as the Hub computes it (tasks ahead that compete for the same workers, plus one). */
  private positions = new Map<string, number>();
  private readonly positionsRefresh = new Refresh(
    () => json<{ positions: Record<string, number> }>("/api/data/queue-positions"),
    (r) => {
      if (!r.ok) return; // the column keeps what it showed; the next change asks again
      this.positions = new Map(Object.entries(r.value.positions));
      this.update(true);
    },
    1_000,
  );

  constructor(
    private readonly fleet: Fleet,
    params: URLSearchParams,
    private readonly open: (name: string) => void,
  ) {
    this.selectorText = params.get("labels") ?? "";
    const sel = parseSelector(this.selectorText);
    this.filter = {
      campaign: params.get("campaign") ?? "",
      state: params.get("state") ?? "",
      reason: params.get("reason") ?? "",
      worker: params.get("worker") ?? "",
      queue: params.get("queue") ?? "",
      text: params.get("q") ?? "",
      selector: sel.ok ? sel.match : () => true,
    };
    const columns: Column<TaskRow>[] = [
      {
        key: "name",
        title: "Task",
        width: "minmax(16rem, 2.2fr)",
        cell: (t) =>
          h(
            "a",
            { href: `#/task/${encodeURIComponent(t.name)}`, tabindex: -1, class: "wrap2", title: t.name },
            breakable(t.name),
          ),
      },
      { key: "state", title: "State", width: "7.5rem", cell: (t) => badge(t.state) },
      {
        key: "reason",
        title: "Admitted reason",
        width: "minmax(13rem, 1.4fr)",
        cell: (t) => fullText(t.reason || "—", t.message || t.reason || "no Admitted condition yet"),
      },
      {
        key: "position",
        title: "Position",
        width: "6rem",
        cell: (t) => h("span", { class: "num" }, String(this.positions.get(t.name) ?? "—")),
      },
      {
        key: "requests",
        title: "Requests",
        width: "minmax(15rem, 1.8fr)",
        cell: (t) => fullText(`${t.placement === "exclusive" ? "exclusive · " : ""}${requestText(t.requests)}`),
      },
      // Once final, the worker that ran the last attempt (what `loom get tasks` prints).
      {
        key: "worker",
        title: "Worker",
        width: "minmax(8rem, 1fr)",
        cell: (t) =>
          t.worker
            ? fullText(t.worker, t.reservation ? `holds a lease on ${t.worker}` : `last ran on ${t.worker}`)
            : "—",
      },
      {
        key: "campaign",
        title: "Campaign",
        width: "minmax(8rem, 1fr)",
        cell: (t) => (t.campaign ? fullText(t.campaign) : "—"),
      },
      { key: "labels", title: "Labels", width: "minmax(6rem, .8fr)", cell: (t) => labelChips(t.labels) },
      { key: "age", title: "Age", width: "6rem", cell: (t) => ago(t.created) },
    ];
    this.table = new VirtualTable<TaskRow>({
      label: "Tasks",
      rowHeight: 44,
      columns,
      rowKey: (t) => t.name,
      onOpen: (t) => this.open(t.name),
      empty: "No tasks match these filters.",
    });
    this.el = h(
      "section",
      { class: "view", "aria-labelledby": "queue-h" },
      h("h1", { id: "queue-h" }, "Queue"),
      this.summary,
      this.filters,
      this.error,
      this.count,
      this.table.el,
      (this.charts = new FleetCharts(fleet)).el,
    );
  }

  dispose(): void {
    this.positionsRefresh.stop();
    this.charts.dispose();
  }

  private set(k: keyof Omit<TaskFilter, "selector">, v: string): void {
    this.filter[k] = v;
    this.syncHash();
    this.update(true);
  }

  /** Keep the filters in the hash without a navigation (the view stays as it is). */
  private syncHash(): void {
    const p = new URLSearchParams();
    for (const k of ["campaign", "queue", "state", "reason", "worker"] as const)
      if (this.filter[k]) p.set(k, this.filter[k]);
    if (this.filter.text) p.set("q", this.filter.text);
    if (this.selectorText) p.set("labels", this.selectorText);
    const q = p.toString();
    history.replaceState(null, "", `#/queue${q ? `?${q}` : ""}`);
  }

  update(force = false): void {
    this.charts.update();
    const v = `${this.fleet.versions.tasks}`;
    if (v !== this.seen) this.positionsRefresh.request();
    if (!force && v === this.seen) return;
    this.seen = v;
    const all = [...this.fleet.tasks.values()];
    const rows = filterTasks(all, this.filter);
    this.renderSummary(all);
    this.renderFilters(all);
    this.count.textContent = `${rows.length} of ${all.length} tasks`;
    this.table.setRows(rows);
  }

  private renderSummary(all: TaskRow[]): void {
    const by = [...countBy(all, (t) => t.state)].sort(([a], [b]) => a.localeCompare(b));
    const chip = (value: string, text: string, n: number) =>
      h(
        "button",
        {
          type: "button",
          class: `state-chip${this.filter.state === value ? " on" : ""}`,
          "aria-pressed": String(this.filter.state === value),
          "data-state": value,
          onclick: () => this.set("state", this.filter.state === value ? "" : value),
        },
        text,
        h("span", { class: "n" }, String(n)),
      );
    this.summary.replaceChildren(chip("", "all", all.length), ...by.map(([s, n]) => chip(s, s, n)));
  }

  private renderFilters(all: TaskRow[]): void {
    // Rebuilding the inputs would drop focus and half-typed text: build once, refresh menus only.
    if (!this.filters.childElementCount) {
      const labels = textInput("Label selector", this.selectorText, "e.g. loom.dev/campaign=x", (v, input) => {
        const s = parseSelector(v);
        input.setAttribute("aria-invalid", String(!s.ok));
        this.error.hidden = s.ok;
        if (!s.ok) return void (this.error.textContent = s.error);
        this.selectorText = v;
        this.filter.selector = s.match;
        this.syncHash();
        this.update(true);
      });
      const text = textInput("Name contains", this.filter.text, "task name", (v) => this.set("text", v));
      this.filters.append(h("span", { class: "menus" }), labels, text);
    }
    const menus = this.filters.firstElementChild!;
    const opts = (m: Map<string, number>) =>
      [...m]
        .filter(([k]) => k)
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([k, n]): [string, string] => [k, `${k} (${n})`]);
    const active = document.activeElement;
    if (active && menus.contains(active)) return; // never swap a menu out from under the keyboard
    const queues = countBy(all, (t) => t.queue);
    menus.replaceChildren(
      select("Campaign", this.filter.campaign, opts(countBy(all, (t) => t.campaign)), (v) => this.set("campaign", v)),
      select(
        "State",
        this.filter.state,
        [
          ...STATE_GROUPS.map(([g, t]): [string, string] => [
            g,
            `${t} (${all.filter((x) => stateMatches(g, x.state)).length})`,
          ]),
          ...opts(countBy(all, (t) => t.state)),
        ],
        (v) => this.set("state", v),
      ),
      select("Reason", this.filter.reason, opts(countBy(all, (t) => t.reason)), (v) => this.set("reason", v)),
      select("Worker", this.filter.worker, opts(countBy(all, (t) => t.worker)), (v) => this.set("worker", v)),
      // Only once tasks name queues: a fleet without them keeps the menus it had.
      ...(queues.size > 1 || this.filter.queue
        ? [select("Queue", this.filter.queue ?? "", opts(queues), (v) => this.set("queue", v))]
        : []),
    );
  }
}
