import { describe, expect, it } from "vitest";
import { StoreError } from "../../src/store/errors.ts";
import {
  formatLabelSelector,
  labelSelectorMatcher,
  matchesLabelSelector,
  parseLabelSelector,
} from "../../src/store/labels.ts";

function parseError(sel: string): StoreError {
  try {
    parseLabelSelector(sel);
  } catch (e) {
    expect(e).toBeInstanceOf(StoreError);
    return e as StoreError;
  }
  throw new Error(`expected "${sel}" to be rejected`);
}

describe("parseLabelSelector", () => {
  it("parses every operator", () => {
    expect(parseLabelSelector("a=b, c==d,e!=f,g,!h,i in (x, y),j notin (z)")).toEqual([
      { key: "a", operator: "Equals", values: ["b"] },
      { key: "c", operator: "Equals", values: ["d"] },
      { key: "e", operator: "NotEquals", values: ["f"] },
      { key: "g", operator: "Exists", values: [] },
      { key: "h", operator: "DoesNotExist", values: [] },
      { key: "i", operator: "In", values: ["x", "y"] },
      { key: "j", operator: "NotIn", values: ["z"] },
    ]);
  });

  it("accepts prefixed keys, empty values and blank selectors", () => {
    expect(parseLabelSelector("loom.dev/pool=gpu")).toEqual([
      { key: "loom.dev/pool", operator: "Equals", values: ["gpu"] },
    ]);
    expect(parseLabelSelector("a=")).toEqual([{ key: "a", operator: "Equals", values: [""] }]);
    expect(parseLabelSelector("a in (x,)")).toEqual([{ key: "a", operator: "In", values: ["x", ""] }]);
    expect(parseLabelSelector("")).toEqual([]);
    expect(parseLabelSelector("   ")).toEqual([]);
  });

  it("round-trips through formatLabelSelector", () => {
    const text = "a=b,c!=d,e,!f,g in (x,y),h notin (z)";
    expect(formatLabelSelector(parseLabelSelector(text))).toBe(text);
  });

  const malformed: [string, RegExp][] = [
    ["a in (x", /missing "\)"/],
    ["a in x", /expected "\("/],
    ["a in ()", /at least one value/],
    ["=b", /expected a label key/],
    ["a=b,", /trailing ","/],
    [",a", /expected a label key/],
    ["a b", /after key "a"/],
    ["a=b c", /expected "," between requirements/],
    ["!", /after "!"/],
    ["a=(", /expected a value/],
    ["-a=b", /invalid label key "-a"/],
    ["Bad_Prefix/a=b", /prefix/],
    ["a=-x", /invalid label value "-x"/],
    [`${"k".repeat(64)}=v`, /invalid label key/],
  ];
  for (const [sel, why] of malformed) {
    it(`rejects ${JSON.stringify(sel)} as BadRequest naming the problem`, () => {
      const err = parseError(sel);
      expect(err.reason).toBe("BadRequest");
      expect(err.code).toBe(400);
      expect(err.message).toMatch(why);
      expect(err.message).toContain(`"${sel}"`);
    });
  }
});

describe("matching", () => {
  const objs: Record<string, Record<string, string> | undefined> = {
    prodWeb: { env: "prod", tier: "web" },
    stagingDb: { env: "staging", tier: "db" },
    prod: { env: "prod" },
    emptyEnv: { env: "" },
    none: undefined,
  };
  const select = (sel: string) => {
    const m = labelSelectorMatcher(sel);
    return Object.keys(objs).filter((k) => m(objs[k]));
  };

  it("equality", () => {
    expect(select("env=prod")).toEqual(["prodWeb", "prod"]);
    expect(select("env==staging")).toEqual(["stagingDb"]);
    expect(select("env=")).toEqual(["emptyEnv"]);
  });

  it("!= and notin also match objects without the key (as in Kubernetes)", () => {
    expect(select("env!=prod")).toEqual(["stagingDb", "emptyEnv", "none"]);
    expect(select("tier notin (web)")).toEqual(["stagingDb", "prod", "emptyEnv", "none"]);
  });

  it("existence", () => {
    expect(select("tier")).toEqual(["prodWeb", "stagingDb"]);
    expect(select("!tier")).toEqual(["prod", "emptyEnv", "none"]);
    expect(select("env")).toEqual(["prodWeb", "stagingDb", "prod", "emptyEnv"]);
  });

  it("set membership requires the key", () => {
    expect(select("env in (prod,staging)")).toEqual(["prodWeb", "stagingDb", "prod"]);
    expect(select("env in (qa)")).toEqual([]);
  });

  it("comma means AND", () => {
    expect(select("env=prod,tier=web")).toEqual(["prodWeb"]);
    expect(select("env=prod,!tier")).toEqual(["prod"]);
    expect(select("env in (prod,staging),tier!=web")).toEqual(["stagingDb", "prod"]);
  });

  it("an empty or absent selector matches everything", () => {
    expect(select("")).toEqual(Object.keys(objs));
    expect(labelSelectorMatcher(undefined)(undefined)).toBe(true);
    expect(matchesLabelSelector([], { a: "b" })).toBe(true);
  });

  it("keys are matched exactly, not inherited from the prototype", () => {
    expect(labelSelectorMatcher("constructor")({})).toBe(false);
    expect(labelSelectorMatcher("toString!=x")({})).toBe(true);
  });
});
