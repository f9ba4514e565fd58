// Workers: one row per worker with a bar per dimension (reserved against capacity, numbers
// beside it), active/limit, its state and labels. Sort by name, a label, use of a dimension
// or active count; filter by a label selector.
import { h } from "../dom.ts";
import type { Fleet } from "../fleet.ts";
import {
  DIMENSIONS,
  labelKeys,
  parseSelector,
  sortWorkers,
  workerRows,
  type WorkerRow,
  type WorkerSort,
} from "../model.ts";
import { VirtualTable, type Column } from "../virtual-table.ts";
import { WorkerTimelines } from "./timeline.ts";
import { badge, bar, labelChips, textInput } from "../widgets.ts";

export class WorkersView {
  readonly el: HTMLElement;
  private sort: WorkerSort = { key: "name", desc: false };
  private selector = parseSelector("");
  private seen = "";
  private readonly table: VirtualTable<WorkerRow>;
  private readonly count = h("p", { class: "count", "aria-live": "polite" });
  private readonly sortSelect = h("select", {});
  private readonly error = h("p", { class: "error", role: "alert", hidden: true });
  /** The largest capacity (and limit) of each column over the whole fleet: every bar in a column is drawn to it. */
  private largest: Record<string, number> = {};
  private readonly timelines: WorkerTimelines;

  constructor(
    private readonly fleet: Fleet,
    open: (name: string) => void,
  ) {
    const columns: Column<WorkerRow>[] = [
      {
        key: "name",
        title: "Worker",
        width: "minmax(9rem, 1.2fr)",
        sort: "name",
        cell: (w) => h("a", { href: `#/queue?worker=${encodeURIComponent(w.name)}`, tabindex: -1 }, w.name),
      },
      { key: "state", title: "State", width: "7.5rem", cell: (w) => badge(w.state) },
      {
        key: "active",
        title: "Active / limit",
        width: "9rem",
        sort: "active",
        cell: (w) => bar("Active tasks", w.activeCount, w.limit, "", "active", this.scaleOf("active", w.limit)),
      },
      ...DIMENSIONS.map((d): Column<WorkerRow> => ({
        key: d.field,
        title: d.label,
        width: "minmax(10rem, 1fr)",
        sort: `use:${d.field}`,
        cell: (w) =>
          bar(
            d.label,
            w.reserved[d.field],
            w.capacity[d.field],
            d.unit,
            d.field,
            this.scaleOf(d.field, w.capacity[d.field]),
          ),
      })),
      { key: "labels", title: "Labels", width: "minmax(8rem, 1.2fr)", cell: (w) => labelChips(w.labels) },
    ];
    this.table = new VirtualTable<WorkerRow>({
      label: "Workers",
      rowHeight: 44,
      columns,
      rowKey: (w) => w.name,
      onOpen: (w) => open(w.name),
      onSort: (key) => this.setSort(key),
      sorted: () => this.sort,
      empty: "No workers match.",
    });
    this.sortSelect.addEventListener("change", () => this.setSort(this.sortSelect.value, false));
    const filter = textInput("Label selector", "", "e.g. pool=gpu,!draining", (v, input) => {
      const s = parseSelector(v);
      input.setAttribute("aria-invalid", String(!s.ok));
      this.error.hidden = s.ok;
      if (!s.ok) return void (this.error.textContent = s.error);
      this.selector = s;
      this.update(true);
    });
    this.el = h(
      "section",
      { class: "view", "aria-labelledby": "workers-h" },
      h("h1", { id: "workers-h" }, "Workers"),
      h(
        "div",
        { class: "toolbar" },
        filter,
        h("label", { class: "field" }, h("span", {}, "Sort by"), this.sortSelect),
        this.count,
      ),
      this.error,
      this.table.el,
      (this.timelines = new WorkerTimelines(fleet)).el,
    );
  }

  dispose(): void {
    this.timelines.dispose();
  }

  private scaleOf(column: string, capacity: number | undefined): number {
    const top = this.largest[column] ?? 0;
    return top > 0 ? (capacity ?? 0) / top : 1;
  }

  private setSort(key: string, toggle = true): void {
    this.sort = {
      key: key as WorkerSort["key"],
      desc: toggle && this.sort.key === key ? !this.sort.desc : key.startsWith("use:") || key === "active",
    };
    this.update(true);
  }

  update(force = false): void {
    this.timelines.update();
    const v = `${this.fleet.versions.workers}`;
    if (!force && v === this.seen) return;
    this.seen = v;
    const all = workerRows(this.fleet.workers.values());
    this.largest = { active: Math.max(0, ...all.map((w) => w.limit ?? 0)) };
    for (const d of DIMENSIONS) this.largest[d.field] = Math.max(0, ...all.map((w) => w.capacity[d.field] ?? 0));
    const match = this.selector.ok ? this.selector.match : () => true;
    const rows = sortWorkers(
      all.filter((w) => match(w.labels)),
      this.sort,
    );
    this.renderSortOptions(all);
    this.count.textContent = `${rows.length} of ${all.length} workers`;
    this.table.setRows(rows);
  }

  private renderSortOptions(rows: WorkerRow[]): void {
    const opts: [string, string][] = [
      ["name", "name"],
      ["active", "active tasks"],
      ...DIMENSIONS.map((d): [string, string] => [`use:${d.field}`, `${d.label} use`]),
      ...labelKeys(rows).map((k): [string, string] => [`label:${k}`, `label ${k}`]),
    ];
    const sig = opts.map((o) => o[0]).join("|");
    if (this.sortSelect.dataset.sig !== sig) {
      this.sortSelect.replaceChildren(...opts.map(([v, t]) => h("option", { value: v }, t)));
      this.sortSelect.dataset.sig = sig;
    }
    this.sortSelect.value = this.sort.key;
  }
}
