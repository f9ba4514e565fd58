// Kubernetes label selectors, parsed once and matched many times. The syntax and the
// matching rules are kubectl's, so `loom get -l ...` and the API accept what people
// already type against a real cluster.
import { StoreError } from "./errors.ts";

export type LabelOperator = "Equals" | "NotEquals" | "Exists" | "DoesNotExist" | "In" | "NotIn";
export type LabelRequirement = { key: string; operator: LabelOperator; values: string[] };
/** Requirements ANDed together; an empty selector matches everything. */
export type LabelSelector = LabelRequirement[];
export type Labels = Record<string, string> | undefined;

const NAME_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const PREFIX_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

type Token =
  | { t: "ident"; v: string; at: number }
  | { t: "=" | "==" | "!=" | "!" | "(" | ")" | ","; at: number }
  | { t: "eof"; at: number };

const SPECIAL = new Set(["=", "!", "(", ")", ","]);

function tokenize(s: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === "=") {
      out.push(s[i + 1] === "=" ? { t: "==", at: i } : { t: "=", at: i });
      i += s[i + 1] === "=" ? 2 : 1;
      continue;
    }
    if (c === "!") {
      out.push(s[i + 1] === "=" ? { t: "!=", at: i } : { t: "!", at: i });
      i += s[i + 1] === "=" ? 2 : 1;
      continue;
    }
    if (c === "(" || c === ")" || c === ",") {
      out.push({ t: c, at: i });
      i++;
      continue;
    }
    const start = i;
    while (i < s.length && !/\s/.test(s[i]) && !SPECIAL.has(s[i])) i++;
    out.push({ t: "ident", v: s.slice(start, i), at: start });
  }
  out.push({ t: "eof", at: s.length });
  return out;
}

const show = (tok: Token) => (tok.t === "eof" ? "end of selector" : tok.t === "ident" ? `"${tok.v}"` : `"${tok.t}"`);

function bad(selector: string, problem: string): StoreError {
  return new StoreError("BadRequest", 400, `invalid label selector "${selector}": ${problem}`);
}

function checkKey(selector: string, key: string): string {
  const slash = key.indexOf("/");
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined && (prefix.length === 0 || prefix.length > 253 || !PREFIX_RE.test(prefix)))
    throw bad(selector, `invalid label key "${key}": the prefix must be a lowercase DNS subdomain`);
  if (!NAME_RE.test(name))
    throw bad(
      selector,
      `invalid label key "${key}": the name must be 1-63 characters of A-Z a-z 0-9 - _ . starting and ending with a letter or digit`,
    );
  return key;
}

function checkValue(selector: string, value: string): string {
  if (value !== "" && !NAME_RE.test(value))
    throw bad(
      selector,
      `invalid label value "${value}": must be empty or 1-63 characters of A-Z a-z 0-9 - _ . starting and ending with a letter or digit`,
    );
  return value;
}

/** Parse a selector such as `env=prod,tier!=db,gpu,!cordoned,zone in (a,b)`. Throws BadRequest (400). */
export function parseLabelSelector(selector: string): LabelSelector {
  const toks = tokenize(selector);
  let p = 0;
  const peek = () => toks[p];
  const next = () => toks[p++];
  const reqs: LabelSelector = [];
  if (peek().t === "eof") return reqs;

  for (;;) {
    const first = next();
    if (first.t === "!") {
      const k = next();
      if (k.t !== "ident") throw bad(selector, `expected a label key after "!", found ${show(k)}`);
      reqs.push({ key: checkKey(selector, k.v), operator: "DoesNotExist", values: [] });
    } else if (first.t === "ident") {
      const key = checkKey(selector, first.v);
      const op = peek();
      if (op.t === "," || op.t === "eof") {
        reqs.push({ key, operator: "Exists", values: [] });
      } else if (op.t === "=" || op.t === "==" || op.t === "!=") {
        next();
        const v = peek();
        // `a=` is a legal selector for the empty value, as in kubectl.
        const value = v.t === "ident" ? (next(), v.v) : v.t === "," || v.t === "eof" ? "" : undefined;
        if (value === undefined)
          throw bad(selector, `expected a value after "${op.t}" for key "${key}", found ${show(v)}`);
        reqs.push({ key, operator: op.t === "!=" ? "NotEquals" : "Equals", values: [checkValue(selector, value)] });
      } else if (op.t === "ident" && (op.v === "in" || op.v === "notin")) {
        next();
        const open = next();
        if (open.t !== "(") throw bad(selector, `expected "(" after "${op.v}" for key "${key}", found ${show(open)}`);
        const values: string[] = [];
        if (peek().t === ")") throw bad(selector, `"${op.v}" for key "${key}" needs at least one value`);
        for (;;) {
          const v = peek();
          if (v.t === "ident") {
            next();
            values.push(checkValue(selector, v.v));
          } else if (v.t === "," || v.t === ")") values.push("");
          else throw bad(selector, `expected a value or ")" in the list for key "${key}", found ${show(v)}`);
          const sep = next();
          if (sep.t === ")") break;
          if (sep.t !== ",") throw bad(selector, `missing ")" closing the list for key "${key}" (found ${show(sep)})`);
        }
        reqs.push({ key, operator: op.v === "in" ? "In" : "NotIn", values: [...new Set(values)] });
      } else {
        throw bad(
          selector,
          `expected "=", "==", "!=", "in", "notin", "," or end of selector after key "${key}", found ${show(op)}`,
        );
      }
    } else {
      throw bad(selector, `expected a label key or "!", found ${show(first)}`);
    }
    const sep = next();
    if (sep.t === "eof") return reqs;
    if (sep.t !== ",") throw bad(selector, `expected "," between requirements, found ${show(sep)}`);
    if (peek().t === "eof") throw bad(selector, `trailing ","`);
  }
}

export function matchesRequirement(r: LabelRequirement, labels: Labels): boolean {
  const has = labels !== undefined && Object.prototype.hasOwnProperty.call(labels, r.key);
  const v = has ? labels[r.key] : undefined;
  switch (r.operator) {
    case "Equals":
      return has && v === r.values[0];
    // Like Kubernetes: an object without the key satisfies != and notin.
    case "NotEquals":
      return !has || v !== r.values[0];
    case "Exists":
      return has;
    case "DoesNotExist":
      return !has;
    case "In":
      return has && r.values.includes(v!);
    case "NotIn":
      return !has || !r.values.includes(v!);
  }
}

export function matchesLabelSelector(sel: LabelSelector, labels: Labels): boolean {
  for (const r of sel) if (!matchesRequirement(r, labels)) return false;
  return true;
}

/** Parse once, return a predicate. An absent or blank selector matches everything. */
export function labelSelectorMatcher(selector: string | undefined): (labels: Labels) => boolean {
  if (selector === undefined || selector.trim() === "") return () => true;
  const sel = parseLabelSelector(selector);
  return (labels) => matchesLabelSelector(sel, labels);
}

/** The canonical text of a parsed selector (what kubectl would print). */
export function formatLabelSelector(sel: LabelSelector): string {
  return sel
    .map((r) => {
      switch (r.operator) {
        case "Equals":
          return `${r.key}=${r.values[0]}`;
        case "NotEquals":
          return `${r.key}!=${r.values[0]}`;
        case "Exists":
          return r.key;
        case "DoesNotExist":
          return `!${r.key}`;
        case "In":
          return `${r.key} in (${r.values.join(",")})`;
        case "NotIn":
          return `${r.key} notin (${r.values.join(",")})`;
      }
    })
    .join(",");
}
