// The Node version package.json promises (engines.node, as README says) is one every package
// package-lock.json installs accepts, so `npm ci` on it warns of no EBADENGINE.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = join(import.meta.dirname, "..", "..");
const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { engines: { node: string } };
const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8")) as {
  packages: Record<string, { engines?: { node?: string } | string[] }>;
};

type V = [number, number, number];
const parse = (s: string): V => {
  const [a = 0, b = 0, c = 0] = s
    .replace(/^v/, "")
    .split(".")
    .map((x) => (x === "x" || x === "*" ? 0 : Number.parseInt(x, 10)));
  return [a, b, c];
};
const cmp = (x: V, y: V) => x[0] - y[0] || x[1] - y[1] || x[2] - y[2];

/** The comparator forms engines fields use: >=, >, <=, <, =, ^, ~, x-ranges, hyphen-free unions with ||. */
export function satisfies(version: string, range: string): boolean {
  const v = parse(version);
  return range.split("||").some((alt) =>
    alt
      .trim()
      .replace(/(>=|<=|>|<|=|\^|~)\s+/g, "$1")
      .split(/\s+/)
      .filter(Boolean)
      .every((c) => {
        const m = /^(>=|<=|>|<|=|\^|~)?\s*v?([\dx*.]+)$/.exec(c);
        if (!m) throw new Error(`unknown range term ${JSON.stringify(c)} in ${JSON.stringify(range)}`);
        const [, op = "", raw] = m;
        const r = parse(raw);
        const parts = raw.split(".").filter((p) => p !== "x" && p !== "*").length;
        if (parts === 0) return true; // *, x: any version
        switch (op) {
          case ">=":
            return cmp(v, r) >= 0;
          case ">":
            return cmp(v, r) > 0;
          case "<=":
            return cmp(v, r) <= 0;
          case "<":
            return cmp(v, r) < 0;
          case "^":
            return (
              cmp(v, r) >= 0 &&
              (r[0] > 0 ? v[0] === r[0] : r[1] > 0 ? v[0] === 0 && v[1] === r[1] : cmp(v, [0, 0, r[2] + 1]) < 0)
            );
          case "~":
            return cmp(v, r) >= 0 && v[0] === r[0] && (parts < 2 || v[1] === r[1]);
          default:
            return parts >= 3 ? cmp(v, r) === 0 : v[0] === r[0] && (parts < 2 || v[1] === r[1]);
        }
      }),
  );
}

describe("engines", () => {
  it("reads ranges as npm does", () => {
    expect(satisfies("20.19.0", ">=20.19")).toBe(true);
    expect(satisfies("20.19.0", ">=22")).toBe(false); // cookie@2's, which npm ci warned about
    expect(satisfies("20.19.0", "^20.19.0 || >=22.12.0")).toBe(true);
    expect(satisfies("20.18.9", "^20.19.0 || >=22.12.0")).toBe(false);
    expect(satisfies("20.19.0", "^18.17.0 || >=20.5.0")).toBe(true);
    expect(satisfies("20.19.0", "14 || 16 || 18 || 20 || 22")).toBe(true);
    expect(satisfies("20.19.0", ">= 8.0.0")).toBe(true);
    expect(satisfies("20.19.0", "*")).toBe(true);
    expect(satisfies("20.19.0", "20.x")).toBe(true);
    expect(satisfies("20.19.0", "~20.18.0")).toBe(false);
  });

  it("every package the lock installs runs on the lowest Node package.json promises", () => {
    const lowest = /^>=\s*([\d.]+)$/.exec(pkg.engines.node)?.[1];
    expect(lowest, `engines.node is ${pkg.engines.node}`).toBeDefined();
    const refused = Object.entries(lock.packages)
      .filter(
        ([, p]) => p.engines && !Array.isArray(p.engines) && p.engines.node && !satisfies(lowest!, p.engines.node),
      )
      .map(([name, p]) => `${name} requires node ${(p.engines as { node: string }).node}`);
    expect(refused).toEqual([]);
  });
});
