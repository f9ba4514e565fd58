// Small pieces the views share: bars that always carry their numbers, state badges, plain
// tables for short lists, and age text.
import { h } from "./dom.ts";
import { humanDuration } from "../../src/resources/jsonpath.ts";

/** A reserved-against-capacity bar with its numbers beside it (never colour alone). */
export function bar(label: string, used: number, total: number | undefined, unit: string, field: string): HTMLElement {
  const cap = total ?? 0;
  const share = cap > 0 ? Math.min(1, used / cap) : used > 0 ? 1 : 0;
  const fill = h("span", { class: `fill${share >= 0.9 ? " high" : ""}` });
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  const text = `${used}${unit} / ${total === undefined ? "?" : `${total}${unit}`}`;
  return h(
    "span",
    { class: "meter", "data-dim": field, "data-used": used, "data-total": total ?? "" },
    h("span", { class: "track", role: "meter", "aria-label": `${label} reserved`, "aria-valuemin": 0, "aria-valuemax": cap, "aria-valuenow": Math.min(used, cap), "aria-valuetext": text }, fill),
    h("span", { class: "num" }, text),
  );
}

const STATE_CLASS: Record<string, string> = {
  ready: "ok", clean: "ok", accepted: "ok", admitted: "ok", running: "busy", leased: "busy", exclusive: "busy",
  cordoned: "warn", queued: "wait", retry_queued: "wait", "not ready": "bad", unregistered: "muted",
  dirty: "bad", run_error: "bad", lease_expired: "bad", cancelled: "muted", blocked: "warn", needs_review: "warn",
};

export const badge = (text: string) => h("span", { class: `badge ${STATE_CLASS[text] ?? "muted"}` }, text || "—");

export function table(caption: string, head: string[], rows: (Node | string)[][], empty = "none"): HTMLElement {
  if (!rows.length) return h("p", { class: "empty" }, `${caption}: ${empty}`);
  return h(
    "table",
    { class: "plain" },
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))),
  );
}

export function ago(ts: string | undefined, now = Date.now()): string {
  if (!ts) return "—";
  const t = Date.parse(ts);
  return Number.isNaN(t) ? ts : `${humanDuration(Math.max(0, now - t))} ago`;
}

export const labelChips = (labels: Record<string, string>) =>
  h("span", { class: "labels" }, Object.entries(labels).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => h("span", { class: "chip" }, `${k}=${v}`)));

/** A <select> whose options carry counts; "" is "any". */
export function select(label: string, value: string, options: [string, string][], onchange: (v: string) => void): HTMLElement {
  const s = h("select", { onchange: (e: Event) => onchange((e.target as HTMLSelectElement).value) }, h("option", { value: "" }, "any"), options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)));
  return h("label", { class: "field" }, h("span", {}, label), s);
}

export function textInput(label: string, value: string, placeholder: string, oninput: (v: string, el: HTMLInputElement) => void): HTMLElement {
  const i = h("input", { type: "search", value, placeholder, spellcheck: "false", autocomplete: "off" });
  i.addEventListener("input", () => oninput(i.value, i));
  return h("label", { class: "field" }, h("span", {}, label), i);
}
