// Small pieces the views share: bars that always carry their numbers, state badges, plain
// tables for short lists, and age text.
import { h } from "./dom.ts";
import { humanDuration } from "../../src/resources/jsonpath.ts";

/**
 * A reserved-against-capacity bar with its numbers under it (never colour alone). `scale` is
 * this capacity against the largest in the column (0..1): the track is drawn that long, so
 * bars in one column share one scale and compare across rows.
 */
export function bar(
  label: string,
  used: number,
  total: number | undefined,
  unit: string,
  field: string,
  scale = 1,
): HTMLElement {
  const cap = total ?? 0;
  const share = cap > 0 ? Math.min(1, used / cap) : used > 0 ? 1 : 0;
  const fill = h("span", { class: `fill${share >= 0.9 ? " high" : ""}` });
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  const text = `${used}${unit} / ${total === undefined ? "?" : `${total}${unit}`}`;
  const track = h(
    "span",
    {
      class: "track",
      role: "meter",
      "aria-label": `${label} reserved`,
      "aria-valuemin": 0,
      "aria-valuemax": cap,
      "aria-valuenow": Math.min(used, cap),
      "aria-valuetext": text,
    },
    fill,
  );
  track.style.width = `${(Math.max(0, Math.min(1, scale)) * 100).toFixed(1)}%`;
  return h(
    "span",
    {
      class: "meter",
      "data-dim": field,
      "data-used": used,
      "data-total": total ?? "",
      title: `${label}: ${text} reserved`,
    },
    h("span", { class: "lane" }, track),
    h("span", { class: "num" }, text),
  );
}

/** Break opportunities after the separators of generated names (`__`, `_`, `-`, `.`), so a long name wraps where it reads. */
export function breakable(text: string): (string | HTMLElement)[] {
  const out: (string | HTMLElement)[] = [];
  for (const part of text.split(/(?<=__|[-_.](?![_]))/)) out.push(part, h("wbr"));
  out.pop();
  return out;
}

/** A cell's text that wraps onto two lines at most, the whole text in its tooltip. */
export const fullText = (text: string, tip = text) => h("span", { class: "wrap2", title: tip }, breakable(text));

export const STATE_CLASS: Record<string, string> = {
  ready: "ok",
  clean: "ok",
  accepted: "ok",
  admitted: "ok",
  running: "busy",
  leased: "busy",
  exclusive: "busy",
  cordoned: "warn",
  queued: "wait",
  retry_queued: "wait",
  "not ready": "bad",
  unregistered: "muted",
  dirty: "bad",
  run_error: "bad",
  lease_expired: "bad",
  cancelled: "muted",
  blocked: "warn",
  needs_review: "warn",
};

export const badge = (text: string) => h("span", { class: `badge ${STATE_CLASS[text] ?? "muted"}` }, text || "—");

export function table(caption: string, head: string[], rows: (Node | string)[][], empty = "none"): HTMLElement {
  if (!rows.length) return h("p", { class: "empty" }, `${caption}: ${empty}`);
  return h(
    "table",
    { class: "plain" },
    h("caption", {}, caption),
    h(
      "thead",
      {},
      h(
        "tr",
        {},
        head.map((c) => h("th", { scope: "col" }, c)),
      ),
    ),
    h(
      "tbody",
      {},
      rows.map((r) =>
        h(
          "tr",
          {},
          r.map((c) => h("td", {}, c)),
        ),
      ),
    ),
  );
}

export function ago(ts: string | undefined, now = Date.now()): string {
  if (!ts) return "—";
  const t = Date.parse(ts);
  return Number.isNaN(t) ? ts : `${humanDuration(Math.max(0, now - t))} ago`;
}

export const labelChips = (labels: Record<string, string>) => {
  const pairs = Object.entries(labels)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => `${k}=${v}`);
  return h(
    "span",
    { class: "labels", title: pairs.join("\n") || undefined },
    pairs.map((p) => h("span", { class: "chip" }, p)),
  );
};

/** A <select> whose options carry counts; "" is "any". */
export function select(
  label: string,
  value: string,
  options: [string, string][],
  onchange: (v: string) => void,
): HTMLElement {
  // A value no row has (a link to a worker that ran nothing yet) is still the filter in force: show it.
  if (value && !options.some(([v]) => v === value)) options = [[value, `${value} (0)`], ...options];
  const s = h(
    "select",
    { "aria-label": label, onchange: (e: Event) => onchange((e.target as HTMLSelectElement).value) },
    h("option", { value: "" }, "any"),
    options.map(([v, text]) => h("option", { value: v, selected: v === value }, text)),
  );
  return h("label", { class: "field" }, h("span", {}, label), s);
}

export function textInput(
  label: string,
  value: string,
  placeholder: string,
  oninput: (v: string, el: HTMLInputElement) => void,
): HTMLElement {
  const i = h("input", { type: "search", value, placeholder, spellcheck: "false", autocomplete: "off" });
  i.addEventListener("input", () => oninput(i.value, i));
  return h("label", { class: "field" }, h("span", {}, label), i);
}
