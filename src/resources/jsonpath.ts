// The JSONPath subset that CRD printer columns use, and kubectl's HumanDuration. The
// server-side Table and `loom get` both evaluate columns with these, so they agree.

/** apimachinery's HumanDuration: two or three significant figures ("90s", "5m30s", "6d4h"). */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  // Clocks a second apart still read as "now".
  if (seconds < -1) return "<invalid>";
  if (seconds < 0) return "0s";
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 8) return hours % 24 === 0 ? `${days}d` : `${days}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${days}d`;
  const years = Math.floor(days / 365);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${years}y` : `${years}y${days % 365}d`;
  return `${years}y`;
}

export type Step =
  { key: string } | { index: number } | { filter: { path: string[]; value: string } } | { wildcard: true };

function unquote(s: string): string {
  const t = s.trim();
  if ((t.startsWith('"') && t.endsWith('"')) || (t.startsWith("'") && t.endsWith("'"))) return t.slice(1, -1);
  return t;
}

/** `.a.b`, `.a[0]`, `.a[*]`, `.a['x.y']`, `.a[?(@.type=="Ready")].status`; `{...}` braces are allowed. */
export function parseJsonPath(expr: string): Step[] {
  let s = expr.trim();
  if (s.startsWith("{") && s.endsWith("}")) s = s.slice(1, -1).trim();
  if (s.startsWith("$")) s = s.slice(1);
  const steps: Step[] = [];
  let i = 0;
  const fail = (why: string): never => {
    throw new Error(`invalid JSONPath ${JSON.stringify(expr)}: ${why} at ${i}`);
  };
  while (i < s.length) {
    if (s[i] === ".") {
      i++;
      const m = /^[A-Za-z0-9_\-/]+/.exec(s.slice(i));
      if (!m) fail("a field name must follow '.'");
      steps.push({ key: m![0] });
      i += m![0].length;
    } else if (s[i] === "[") {
      const end = s.indexOf("]", s[i + 1] === "?" ? s.indexOf(")", i) : i);
      if (end < 0) fail("unclosed '['");
      const inner = s.slice(i + 1, end).trim();
      i = end + 1;
      if (inner === "*") steps.push({ wildcard: true });
      else if (/^-?\d+$/.test(inner)) steps.push({ index: Number(inner) });
      else if (/^(['"]).*\1$/.test(inner)) steps.push({ key: inner.slice(1, -1) });
      else {
        const f = /^\?\(\s*@((?:\.[A-Za-z0-9_-]+)+)\s*==\s*(.+?)\s*\)$/.exec(inner);
        if (!f) fail(`unsupported selector [${inner}]`);
        steps.push({ filter: { path: f![1].slice(1).split("."), value: unquote(f![2]) } });
      }
    } else fail(`unexpected ${JSON.stringify(s[i])}`);
  }
  return steps;
}

const getIn = (o: unknown, path: string[]): unknown =>
  path.reduce<unknown>((v, k) => (v && typeof v === "object" ? (v as Record<string, unknown>)[k] : undefined), o);

/** Every value the expression selects (filters and wildcards may select several). */
export function evalJsonPath(obj: unknown, expr: string | Step[]): unknown[] {
  const steps = typeof expr === "string" ? parseJsonPath(expr) : expr;
  let cur: unknown[] = [obj];
  for (const st of steps) {
    const next: unknown[] = [];
    for (const v of cur) {
      if (v === null || v === undefined) continue;
      if ("key" in st) {
        if (typeof v === "object" && !Array.isArray(v) && st.key in v)
          next.push((v as Record<string, unknown>)[st.key]);
      } else if ("index" in st) {
        if (Array.isArray(v)) {
          const x = v[st.index < 0 ? v.length + st.index : st.index];
          if (x !== undefined) next.push(x);
        }
      } else if ("wildcard" in st) {
        if (Array.isArray(v)) next.push(...v);
        else if (typeof v === "object") next.push(...Object.values(v));
      } else if (Array.isArray(v)) {
        next.push(...v.filter((x) => String(getIn(x, st.filter.path)) === st.filter.value));
      }
    }
    cur = next;
  }
  return cur.filter((v) => v !== undefined && v !== null);
}
