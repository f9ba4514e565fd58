// A virtualised table: only the rows in view (plus a few) exist in the DOM, so 100,000 tasks
// cost what 40 do. Rows have one fixed height; a spacer gives the scroll bar its full length.
// Keyboard: the table takes focus as one stop (Tab), the arrow keys, Page Up/Down, Home and
// End move the active row (announced through aria-activedescendant), Enter opens it.
import { h } from "./dom.ts";

export type Column<T> = {
  key: string;
  title: string;
  /** A CSS grid track: "12rem", "1fr", "minmax(8rem, 1fr)". */
  width: string;
  cell(row: T): Node | string;
  /** The sort key its header button selects; no button when absent. */
  sort?: string;
};

export type TableOptions<T> = {
  label: string;
  rowHeight: number;
  columns: Column<T>[];
  rowKey(row: T): string;
  onOpen?(row: T): void;
  onSort?(key: string): void;
  sorted?(): { key: string; desc: boolean };
  empty: string;
};

const OVERSCAN = 6;
let ids = 0;

export class VirtualTable<T> {
  readonly el: HTMLElement;
  private readonly body: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly head: HTMLElement;
  private readonly emptyNote: HTMLElement;
  private rows: T[] = [];
  private active = -1;
  private activeKey: string | undefined;
  private frame = 0;
  private readonly id = `vt${++ids}`;

  constructor(private readonly o: TableOptions<T>) {
    const cols = o.columns.map((c) => c.width).join(" ");
    this.head = h("div", { class: "vt-row vt-head", role: "row", "aria-rowindex": 1 });
    this.head.style.gridTemplateColumns = cols;
    this.spacer = h("div", { class: "vt-spacer", role: "rowgroup" });
    this.body = h("div", { class: "vt-body" }, this.spacer);
    this.emptyNote = h("p", { class: "vt-empty", hidden: true }, o.empty);
    this.el = h(
      "div",
      { class: "vt", role: "grid", "aria-label": o.label, tabindex: 0, "aria-rowcount": 1 },
      h("div", { role: "rowgroup" }, this.head),
      this.body,
      this.emptyNote,
    );
    this.body.addEventListener("scroll", () => this.schedule());
    this.el.addEventListener("keydown", (e) => this.key(e));
    new ResizeObserver(() => this.schedule()).observe(this.body);
    this.renderHead();
  }

  /** Replace the rows; the active row stays on the same key when it is still there. */
  setRows(rows: T[]): void {
    this.rows = rows;
    this.el.setAttribute("aria-rowcount", String(rows.length + 1));
    this.spacer.style.height = `${rows.length * this.o.rowHeight}px`;
    // As tall as its rows (the CSS caps it at the window): a short list leaves the room below to what follows.
    this.body.style.height = `${Math.max(1, rows.length) * this.o.rowHeight + 2}px`;
    this.emptyNote.hidden = rows.length > 0;
    if (this.activeKey !== undefined) {
      const i = rows.findIndex((r) => this.o.rowKey(r) === this.activeKey);
      this.active = i >= 0 ? i : Math.min(this.active, rows.length - 1);
    }
    this.renderHead();
    this.schedule();
  }

  get length(): number {
    return this.rows.length;
  }

  private schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.renderRows();
    });
  }

  private renderHead(): void {
    const s = this.o.sorted?.();
    this.head.replaceChildren(
      ...this.o.columns.map((c) => {
        const sortedHere = s && c.sort && s.key === c.sort;
        const label =
          c.sort && this.o.onSort
            ? h(
                "button",
                { type: "button", class: "sort", onclick: () => this.o.onSort!(c.sort!), title: `sort by ${c.title}` },
                c.title,
                sortedHere ? (s.desc ? " ▼" : " ▲") : "",
              )
            : c.title;
        return h(
          "div",
          {
            role: "columnheader",
            class: `vt-cell col-${c.key}`,
            "aria-sort": sortedHere ? (s.desc ? "descending" : "ascending") : undefined,
          },
          label,
        );
      }),
    );
  }

  private renderRows(): void {
    const rh = this.o.rowHeight;
    const first = Math.max(0, Math.floor(this.body.scrollTop / rh) - OVERSCAN);
    const count = Math.ceil((this.body.clientHeight || 600) / rh) + 2 * OVERSCAN;
    const last = Math.min(this.rows.length, first + count);
    const cols = this.o.columns.map((c) => c.width).join(" ");
    const out: HTMLElement[] = [];
    for (let i = first; i < last; i++) {
      const row = this.rows[i];
      const el = h(
        "div",
        {
          class: `vt-row${i === this.active ? " active" : ""}`,
          role: "row",
          id: `${this.id}-r${i}`,
          "aria-rowindex": i + 2,
          "aria-selected": i === this.active ? "true" : undefined,
          "data-key": this.o.rowKey(row),
        },
        this.o.columns.map((c) => h("div", { role: "gridcell", class: `vt-cell col-${c.key}` }, c.cell(row))),
      );
      el.style.gridTemplateColumns = cols;
      el.style.transform = `translateY(${i * rh}px)`;
      el.style.height = `${rh}px`;
      el.addEventListener("click", (e) => {
        this.activate(i);
        if (!(e.target as Element).closest("a,button")) this.o.onOpen?.(row);
      });
      out.push(el);
    }
    this.spacer.replaceChildren(...out);
    if (this.active >= first && this.active < last)
      this.el.setAttribute("aria-activedescendant", `${this.id}-r${this.active}`);
    else this.el.removeAttribute("aria-activedescendant");
  }

  private activate(i: number): void {
    if (!this.rows.length) return;
    this.active = Math.max(0, Math.min(this.rows.length - 1, i));
    this.activeKey = this.o.rowKey(this.rows[this.active]);
    const rh = this.o.rowHeight;
    const top = this.active * rh;
    if (top < this.body.scrollTop) this.body.scrollTop = top;
    else if (top + rh > this.body.scrollTop + this.body.clientHeight)
      this.body.scrollTop = top + rh - this.body.clientHeight;
    this.renderRows();
  }

  private key(e: KeyboardEvent): void {
    if (e.target !== this.el) return; // header buttons and links keep their own keys
    const page = Math.max(1, Math.floor(this.body.clientHeight / this.o.rowHeight) - 1);
    const moves: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: page, PageUp: -page };
    if (e.key in moves) this.activate((this.active < 0 ? -1 : this.active) + moves[e.key]);
    else if (e.key === "Home") this.activate(0);
    else if (e.key === "End") this.activate(this.rows.length - 1);
    else if (e.key === "Enter" && this.active >= 0 && this.rows[this.active]) this.o.onOpen?.(this.rows[this.active]);
    else return;
    e.preventDefault();
  }
}
