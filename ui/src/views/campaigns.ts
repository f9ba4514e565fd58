// Campaigns: progress by state, counted from the tasks each campaign owns (the same tasks the
// queue shows, so the two never disagree), with the numbers beside every bar segment.
import { h } from "../dom.ts";
import type { Fleet } from "../fleet.ts";
import { campaignRows, type CampaignRow } from "../model.ts";
import { table } from "../widgets.ts";

export class CampaignsView {
  readonly el: HTMLElement;
  private readonly list = h("div");
  private seen = "";

  constructor(private readonly fleet: Fleet) {
    this.el = h(
      "section",
      { class: "view", "aria-labelledby": "campaigns-h" },
      h("h1", { id: "campaigns-h" }, "Campaigns"),
      this.list,
    );
  }

  update(): void {
    const v = `${this.fleet.versions.campaigns}/${this.fleet.versions.tasks}`;
    if (v === this.seen) return;
    this.seen = v;
    const rows = campaignRows(this.fleet.campaigns.values(), this.fleet.tasks.values());
    this.list.replaceChildren(
      table(
        "Campaign progress by task state",
        ["Campaign", "Progress", "Final", "Active", "Pending", "By state"],
        rows.map((c) => [
          h(
            "a",
            { href: `#/queue?campaign=${encodeURIComponent(c.campaignId)}` },
            c.name,
            c.declared ? "" : " (dispatched)",
          ),
          progress(c),
          `${c.final} / ${c.total}`,
          String(c.active),
          String(c.pending),
          h(
            "span",
            { class: "labels" },
            [...c.byState]
              .sort(([a], [b]) => a.localeCompare(b))
              .map(([s, n]) =>
                h(
                  "a",
                  {
                    class: "chip",
                    href: `#/queue?campaign=${encodeURIComponent(c.campaignId)}&state=${encodeURIComponent(s)}`,
                  },
                  `${s} ${n}`,
                ),
              ),
          ),
        ]),
        "no campaigns yet",
      ),
    );
  }
}

function progress(c: CampaignRow): HTMLElement {
  const seg = (cls: string, n: number) => {
    const s = h("span", { class: `seg ${cls}` });
    s.style.width = `${c.total ? (100 * n) / c.total : 0}%`;
    return s;
  };
  const pct = c.total ? Math.round((100 * c.final) / c.total) : 0;
  return h(
    "span",
    { class: "meter" },
    h(
      "span",
      {
        class: "track stacked",
        role: "meter",
        "aria-label": `${c.name} finished`,
        "aria-valuemin": 0,
        "aria-valuemax": c.total,
        "aria-valuenow": c.final,
        "aria-valuetext": `${c.final} of ${c.total} final, ${c.active} active, ${c.pending} pending`,
      },
      seg("final", c.final),
      seg("active", c.active),
      seg("pending", c.pending),
    ),
    h("span", { class: "num" }, `${pct}%`),
  );
}
