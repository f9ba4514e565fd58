// A strict reader of the Prometheus text exposition format (version 0.0.4), for tests:
// prom-client writes the format but ships no reader. Every line must be a HELP, a TYPE or a
// sample of a declared family; histograms must have cumulative buckets ending in +Inf = count.
export type Sample = { name: string; labels: Record<string, string>; value: number };
export type Family = { name: string; type: string; help: string; samples: Sample[] };

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+-?\d+)?$/;
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;

function num(s: string, line: string): number {
  if (s === "+Inf") return Infinity;
  if (s === "-Inf") return -Infinity;
  if (s === "NaN") return NaN;
  const n = Number(s);
  if (s === "" || Number.isNaN(n)) throw new Error(`not a number: ${s} in ${JSON.stringify(line)}`);
  return n;
}

function labels(body: string, line: string): Record<string, string> {
  const out: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < body.length) {
    const at = LABEL.lastIndex;
    const m = LABEL.exec(body);
    if (!m || m.index !== at) throw new Error(`bad labels in ${JSON.stringify(line)}`);
    if (m[1] in out) throw new Error(`label ${m[1]} repeated in ${JSON.stringify(line)}`);
    out[m[1]] = m[2].replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    if (m[3] === "") break;
  }
  return out;
}

/** The family a sample name belongs to (histogram and summary series carry suffixes). */
function familyOf(name: string, families: Map<string, Family>): Family | undefined {
  if (families.has(name)) return families.get(name);
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (!name.endsWith(suffix)) continue;
    const f = families.get(name.slice(0, -suffix.length));
    if (f && (f.type === "histogram" || f.type === "summary")) return f;
  }
  return undefined;
}

export function parsePrometheusText(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    if (line.startsWith("#")) {
      const m = /^# (HELP|TYPE) (\S+) ?(.*)$/.exec(line);
      if (!m) continue; // a plain comment
      const [, what, name, rest] = m;
      if (!NAME.test(name)) throw new Error(`bad metric name ${name}`);
      const f = families.get(name) ?? { name, type: "untyped", help: "", samples: [] };
      families.set(name, f);
      if (what === "HELP") f.help = rest;
      else {
        if (!["counter", "gauge", "histogram", "summary", "untyped"].includes(rest))
          throw new Error(`bad type ${rest} for ${name}`);
        f.type = rest;
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${JSON.stringify(line)}`);
    const f = familyOf(m[1], families);
    if (!f) throw new Error(`sample ${m[1]} has no # TYPE before it`);
    f.samples.push({ name: m[1], labels: m[3] ? labels(m[3], line) : {}, value: num(m[4], line) });
  }
  for (const f of families.values()) if (f.type === "histogram") checkHistogram(f);
  return families;
}

function checkHistogram(f: Family): void {
  const series = new Map<string, Sample[]>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    if (!series.has(key)) series.set(key, []);
    series.get(key)!.push(s);
  }
  for (const [key, ss] of series) {
    const buckets = ss.filter((s) => s.name === `${f.name}_bucket`);
    const count = ss.find((s) => s.name === `${f.name}_count`);
    if (!count || !ss.some((s) => s.name === `${f.name}_sum`))
      throw new Error(`${f.name}${key}: histogram without _sum/_count`);
    let prev = -Infinity;
    let last = 0;
    for (const b of buckets) {
      const le = num(b.labels.le ?? "", f.name);
      if (le <= prev) throw new Error(`${f.name}${key}: buckets out of order`);
      if (b.value < last) throw new Error(`${f.name}${key}: buckets not cumulative`);
      prev = le;
      last = b.value;
    }
    if (prev !== Infinity || last !== count.value)
      throw new Error(`${f.name}${key}: the +Inf bucket must equal _count`);
  }
}

/** The value of one sample, matching every given label. */
export function sampleValue(
  families: Map<string, Family>,
  name: string,
  want: Record<string, string> = {},
): number | undefined {
  for (const f of families.values())
    for (const s of f.samples)
      if (s.name === name && Object.entries(want).every(([k, v]) => s.labels[k] === v)) return s.value;
  return undefined;
}
