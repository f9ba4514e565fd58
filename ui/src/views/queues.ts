// Queues: one row per Queue object, watched, with what its status says: USED/QUOTA per
// dimension as bars (every bar in a column drawn to one scale, the borrowing limit as a
// dashed stretch past the quota), BORROWED, PENDING, ADMITTED and SHARE, and its
// conditions. The fair-share sentence is the Hub's own (/api/data/queues). Nothing here is
// computed again: the queue controller writes these figures from the leases.
import { json, request } from "../auth.ts";
import type { QueuesReport } from "../../../src/protocol/types.gen.ts";
import { h } from "../dom.ts";
import { API } from "../fleet.ts";
import { ListWatch } from "../list-watch.ts";
import { Refresh } from "../refresh.ts";
import { DIMENSIONS, type Queue } from "../model.ts";
import type { QueueSpecQuota } from "../../../src/resources/types.gen.ts";
import { ago, badge, table } from "../widgets.ts";

type Amounts = Record<string, number>;
type Dim = { key: string; label: string; unit: string };

/** The quota object's dimensions flattened, GPU types as `gpu_types.<type>` (as the Hub names them). */
function flat(q: QueueSpecQuota | undefined): Amounts {
  const out: Amounts = {};
  for (const [k, v] of Object.entries(q ?? {})) if (typeof v === "number") out[k] = v;
  for (const [t, v] of Object.entries(q?.gpu_types ?? {})) out[`gpu_types.${t}`] = v;
  return out;
}

const amounts = (q: Queue) => ({
  quota: flat(q.spec?.quota),
  borrow: flat(q.spec?.borrowing_limit),
  used: flat(q.status?.used),
});

/**
 * One queue's use of one dimension against its quota, drawn to `top` (the column's largest
 * quota plus borrowing limit, or use): the solid track is the quota, the dashed one its
 * borrowing limit. The numbers are always there as text.
 */
export function quotaBar(
  label: string,
  used: number,
  quota: number | undefined,
  borrow: number,
  unit: string,
  key: string,
  top: number,
): HTMLElement {
  const text = `${used}${unit} / ${quota === undefined ? "-" : `${quota}${unit}`}`;
  const tip =
    quota === undefined
      ? `${label}: ${used}${unit} used; this queue sets no quota for it`
      : `${label}: ${used}${unit} used of ${quota}${unit} quota${borrow ? `, may borrow ${borrow}${unit} more` : ""}`;
  const num = h("span", { class: "num" }, text);
  if (quota === undefined)
    return h("span", { class: "meter", "data-dim": key, title: tip }, h("span", { class: "lane" }), num);
  const part = (cls: string, size: number, filled: number) => {
    const fill = h("span", { class: `fill${used >= quota + borrow ? " high" : ""}` });
    fill.style.width = `${(size > 0 ? Math.min(1, Math.max(0, filled) / size) * 100 : 0).toFixed(1)}%`;
    const track = h("span", { class: cls }, fill);
    track.style.width = `${(top > 0 ? (100 * size) / top : 0).toFixed(1)}%`;
    return track;
  };
  const lane = h(
    "span",
    {
      class: "lane quota-lane",
      role: "meter",
      "aria-label": `${label} used`,
      "aria-valuemin": 0,
      "aria-valuemax": quota + borrow,
      "aria-valuenow": Math.min(used, quota + borrow),
      "aria-valuetext": tip,
    },
    part("track", quota, Math.min(used, quota)),
    borrow > 0 ? part("track borrow", borrow, used - quota) : null,
  );
  return h("span", { class: "meter", "data-dim": key, "data-used": used, "data-total": quota, title: tip }, lane, num);
}

export class QueuesView {
  readonly el: HTMLElement;
  private readonly queues = new Map<string, Queue>();
  private readonly watch: ListWatch<Queue>;
  private readonly body = h("div", { "aria-live": "polite" });
  private readonly standing = h("p", { class: "summary" });
  private listed = false;
  /** The Hub's fair-share sentence, again after a queue changes (at most every 2 s). */
  private readonly report = new Refresh(
    () => json<QueuesReport>("/api/data/queues"),
    (r) => {
      if (!r.ok)
        return void this.standing.replaceChildren(
          h("span", { class: "error" }, `Fair share unavailable: ${r.error.message}`),
        );
      // "no queues" is the sentence for no queue with work waiting.
      this.standing.replaceChildren(
        r.value.standing === "no queues"
          ? "No queue has work waiting."
          : `Fair share among the queues with work waiting: ${r.value.standing}.`,
        r.value.half_life_seconds
          ? ` Shares are of usage decayed over a ${r.value.half_life_seconds} s half-life.`
          : "",
      );
    },
    2_000,
  );

  /** `current`: the queue a link came for (from a task's page), marked in the table. */
  constructor(private readonly current: string) {
    this.el = h(
      "section",
      { class: "view", "aria-labelledby": "queues-h" },
      h("h1", { id: "queues-h" }, "Queues"),
      this.standing,
      this.body,
    );
    this.watch = new ListWatch<Queue>({
      path: `${API}/queues`,
      request: (p, init) => request(p, init),
      onReset: (items) => {
        this.listed = true;
        this.queues.clear();
        for (const q of items) this.queues.set(q.metadata.name, q);
        this.render();
      },
      onChange: (type, q) => {
        if (type === "DELETED") this.queues.delete(q.metadata.name);
        else this.queues.set(q.metadata.name, q);
        this.render();
      },
      onPhase: (phase, detail) => {
        if (phase === "retrying" && !this.listed)
          this.body.replaceChildren(h("p", { class: "error" }, `Queues unavailable: ${detail}`));
      },
    });
    this.watch.start();
  }

  dispose(): void {
    this.report.stop();
    this.watch.stop();
  }

  update(): void {}

  private render(): void {
    const all = [...this.queues.values()].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
    if (!all.length) {
      this.standing.replaceChildren();
      return void this.body.replaceChildren(
        h(
          "p",
          { class: "empty" },
          "No Queue objects: every task waits in one queue, by priority, then arrival. Create a Queue to give a team a quota.",
        ),
      );
    }
    this.report.request();
    const rows = all.map((q) => ({ q, ...amounts(q) }));
    const typed = [
      ...new Set(rows.flatMap((r) => Object.keys(r.quota).filter((k) => k.startsWith("gpu_types.")))),
    ].sort();
    // A dimension no queue limits and none uses gets no column (the table stays one screen wide).
    const dims: Dim[] = [
      ...DIMENSIONS.map((d) => ({ key: d.field, label: d.label, unit: d.unit })),
      ...typed.map((k) => ({ key: k, label: `GPU ${k.slice(10)}`, unit: "" })),
    ].filter((d) => rows.some((r) => r.quota[d.key] !== undefined || (r.used[d.key] ?? 0) > 0));
    // One scale per column: the largest quota plus borrowing limit (or use) of any queue.
    const top = Object.fromEntries(
      dims.map((d) => [
        d.key,
        Math.max(
          0,
          ...rows.map((r) =>
            Math.max(
              (r.quota[d.key] ?? 0) + (r.quota[d.key] === undefined ? 0 : (r.borrow[d.key] ?? 0)),
              r.used[d.key] ?? 0,
            ),
          ),
        ),
      ]),
    );
    const trueConds = (q: Queue) => (q.status?.conditions ?? []).filter((c) => c.status === "True");
    const main = table(
      "Queues: use against quota (the dashed stretch is the borrowing limit), and what the queue controller counts",
      [
        "Queue",
        "Weight",
        ...dims.map((d) => d.label),
        "Borrowed",
        "Lent",
        "Pending",
        "Admitted",
        "Share",
        "Reclaim",
        "Conditions",
        "Tasks",
      ],
      rows.map(({ q, quota, borrow, used }) => {
        const st = q.status ?? {};
        const name = q.metadata.name;
        return [
          h("strong", { class: "queue-name" }, name),
          String(q.spec?.weight ?? 1),
          ...dims.map((d) =>
            quotaBar(d.label, used[d.key] ?? 0, quota[d.key], borrow[d.key] ?? 0, d.unit, d.key, top[d.key]),
          ),
          h("span", { "data-field": "borrowed" }, st.borrowed ?? "-"),
          h("span", { "data-field": "lent" }, st.lent ?? "-"),
          h("span", { "data-field": "pending" }, String(st.pending ?? 0)),
          h("span", { "data-field": "admitted" }, String(st.admitted ?? 0)),
          h("span", { "data-field": "share", title: `decayed share ${st.decayed_share ?? 0}` }, String(st.share ?? 0)),
          q.spec?.reclaim ?? "wait",
          h(
            "span",
            { class: "labels" },
            trueConds(q).map((c) =>
              h(
                "span",
                { class: `badge ${c.type === "QuotaExhausted" ? "bad" : "warn"}`, title: c.message ?? "" },
                c.type,
              ),
            ),
          ),
          h(
            "a",
            {
              href: `#/queue?queue=${encodeURIComponent(name)}`,
              class: "queue-tasks",
              "aria-label": `${name}'s tasks`,
            },
            "tasks",
          ),
        ];
      }),
    );
    main.classList.add("queues");
    for (const [i, r] of rows.entries()) {
      const tr = main.querySelectorAll("tbody tr")[i] as HTMLElement;
      tr.dataset.queue = r.q.metadata.name;
      if (r.q.metadata.name === this.current) tr.setAttribute("aria-current", "true");
    }
    const conds = rows.flatMap(({ q }) =>
      (q.status?.conditions ?? []).map((c) => [
        q.metadata.name,
        c.type,
        badge(c.status),
        c.reason ?? "—",
        c.message ?? "—",
        ago(c.lastTransitionTime),
      ]),
    );
    this.body.replaceChildren(
      main,
      h("h2", {}, "Conditions"),
      table("Queue conditions", ["Queue", "Type", "Status", "Reason", "Message", "Since"], conds, "none written yet"),
    );
  }
}
