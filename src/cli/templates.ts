// `-o jsonpath=TEMPLATE` and `-o custom-columns=SPEC`, as kubectl has them. A jsonpath
// template is text with `{expression}` parts, `{range EXPR}...{end}` loops and `{"\n"}`
// literals; custom columns are `HEADER:EXPRESSION` pairs, one column each.
import { InvalidArgumentError } from "commander";
import { evalJsonPath, parseJsonPath, type Step } from "../resources/jsonpath.ts";
import { NONE } from "../resources/columns.ts";

type Part = { text: string } | { expr: Step[] } | { range: Step[]; body: Part[] };
export type Template =
  { kind: "jsonpath"; parts: Part[] } | { kind: "custom-columns"; columns: { header: string; expr: Step[] }[] };

const unescape = (s: string) =>
  s.replace(/\\([nrt\\])/g, (_, c: string) => ({ n: "\n", r: "\r", t: "\t", "\\": "\\" })[c]!);

/** Parse a kubectl jsonpath template; errors say where. */
export function parseTemplate(src: string): Part[] {
  const stack: Part[][] = [[]];
  const ranges: Step[][] = [];
  let i = 0;
  while (i < src.length) {
    const open = src.indexOf("{", i);
    if (open < 0) {
      stack.at(-1)!.push({ text: src.slice(i) });
      break;
    }
    if (open > i) stack.at(-1)!.push({ text: src.slice(i, open) });
    const close = src.indexOf("}", open);
    if (close < 0) throw new Error(`unclosed "{" at ${open}`);
    const inner = src.slice(open + 1, close).trim();
    i = close + 1;
    const literal = /^(["'])(.*)\1$/s.exec(inner);
    if (literal) stack.at(-1)!.push({ text: unescape(literal[2]) });
    else if (inner.startsWith("range ")) {
      ranges.push(parseJsonPath(inner.slice(6)));
      stack.push([]);
    } else if (inner === "end") {
      if (!ranges.length) throw new Error(`{end} without {range} at ${open}`);
      const body = stack.pop()!;
      stack.at(-1)!.push({ range: ranges.pop()!, body });
    } else stack.at(-1)!.push({ expr: parseJsonPath(inner) });
  }
  if (ranges.length) throw new Error("{range} without {end}");
  return stack[0];
}

const show = (v: unknown) => (typeof v === "string" ? v : JSON.stringify(v));

export function renderTemplate(parts: Part[], data: unknown): string {
  return parts
    .map((p) => {
      if ("text" in p) return p.text;
      if ("expr" in p) return evalJsonPath(data, p.expr).map(show).join(" ");
      return evalJsonPath(data, p.range)
        .map((item) => renderTemplate(p.body, item))
        .join("");
    })
    .join("");
}

/** `NAME:.metadata.name,STATE:.status.state` -> columns. */
export function parseColumns(spec: string): { header: string; expr: Step[] }[] {
  return spec.split(",").map((pair) => {
    const at = pair.indexOf(":");
    if (at <= 0 || at === pair.length - 1) throw new Error(`expected HEADER:EXPRESSION, got ${JSON.stringify(pair)}`);
    return { header: pair.slice(0, at), expr: parseJsonPath(pair.slice(at + 1)) };
  });
}

export function columnCells(columns: { header: string; expr: Step[] }[], o: unknown): string[] {
  return columns.map((c) => {
    const vals = evalJsonPath(o, c.expr);
    return vals.length ? vals.map(show).join(",") : NONE;
  });
}

/** The commander parser of `-o`: a fixed format, or a template. */
export function outputArg(formats: readonly string[]) {
  return (v: string): string | Template => {
    const eq = v.indexOf("=");
    const [name, arg] = eq < 0 ? [v, undefined] : [v.slice(0, eq), v.slice(eq + 1)];
    try {
      if (name === "jsonpath" && arg !== undefined) return { kind: "jsonpath", parts: parseTemplate(arg) };
      if (name === "custom-columns" && arg !== undefined) return { kind: "custom-columns", columns: parseColumns(arg) };
    } catch (e) {
      throw new InvalidArgumentError(`${name}: ${(e as Error).message}`);
    }
    if (formats.includes(v)) return v;
    throw new InvalidArgumentError(
      `unknown output format ${JSON.stringify(v)}; one of ${formats.join(", ")}, jsonpath=TEMPLATE, custom-columns=HEADER:EXPR,...`,
    );
  };
}
