// jsonClone is what a write keeps of a caller's object: it must mean exactly what a round
// trip through JSON text means, for any value, including the ones JSON drops or rewrites.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonClone } from "../../src/resources/json.ts";

const viaText = (v: unknown) => {
  const s = JSON.stringify(v);
  return s === undefined ? undefined : JSON.parse(s);
};

describe("jsonClone", () => {
  it("equals a JSON round trip for arbitrary values, with no shared objects", () => {
    fc.assert(
      fc.property(
        fc.anything({
          withBoxedValues: true,
          withDate: true,
          withNullPrototype: true,
          withSparseArray: true,
          withObjectString: true,
        }),
        (v) => {
          const c = jsonClone(v);
          expect(c).toStrictEqual(viaText(v));
          if (v !== null && typeof v === "object" && c !== null && typeof c === "object") expect(c).not.toBe(v);
        },
      ),
      { numRuns: 2000 },
    );
  });

  it("drops, nulls and converts as JSON does", () => {
    const d = new Date("2026-01-02T03:04:05.000Z");
    const v = {
      a: undefined,
      f: () => 1,
      s: Symbol("x"),
      n: NaN,
      i: -Infinity,
      z: -0,
      d,
      arr: [undefined, () => 1, NaN, 1],
      nested: { toJSON: (k: string) => `key:${k}` },
    };
    expect(jsonClone(v)).toStrictEqual({
      n: null,
      i: null,
      z: 0,
      d: "2026-01-02T03:04:05.000Z",
      arr: [null, null, null, 1],
      nested: "key:nested",
    });
    expect(jsonClone(undefined)).toBeUndefined();
  });

  it("keeps a __proto__ key as data, never as the prototype", () => {
    const v = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}');
    const c = jsonClone(v) as Record<string, unknown>;
    expect(Object.getPrototypeOf(c)).toBe(Object.prototype);
    expect(Object.keys(c)).toEqual(["__proto__", "a"]);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(c)).toBe(JSON.stringify(v));
  });

  it("throws on a cycle and on a BigInt, as JSON.stringify does", () => {
    const cyc: Record<string, unknown> = { a: 1 };
    cyc.self = cyc;
    expect(() => jsonClone(cyc)).toThrow(TypeError);
    expect(() => jsonClone({ b: 10n })).toThrow(TypeError);
    // A value seen twice without a cycle is copied twice.
    const shared = { x: 1 };
    const c = jsonClone({ p: shared, q: shared }) as { p: object; q: object };
    expect(c.p).toStrictEqual({ x: 1 });
    expect(c.p).not.toBe(c.q);
  });
});
