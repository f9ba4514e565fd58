// The display order of reason codes must list every code Reason defines, exactly once.
import { describe, expect, it } from "vitest";
import { orderReasons, Reason, REASON_ORDER, V1_REASON_OF, type ReasonCode } from "../../src/admission/index.ts";

const defined = Object.values(Reason) as ReasonCode[];

describe("REASON_ORDER", () => {
  it("lists every code Reason defines, and nothing else", () => {
    expect(defined.filter((c) => !REASON_ORDER.includes(c))).toEqual([]);
    expect(REASON_ORDER.filter((c) => !defined.includes(c))).toEqual([]);
  });

  it("lists each code once", () => {
    expect(REASON_ORDER.length).toBe(new Set(REASON_ORDER).size);
  });

  it("maps every code to a v1 code", () => {
    expect(Object.keys(V1_REASON_OF).sort()).toEqual([...defined].sort());
  });
});

describe("orderReasons", () => {
  it("keeps every code it is given, de-duplicated", () => {
    const all = [...defined].reverse();
    expect(orderReasons([...all, ...all])).toEqual(REASON_ORDER);
  });

  it("keeps a code the order does not list, after the listed ones", () => {
    const unlisted = "some_new_code" as ReasonCode;
    expect(orderReasons([unlisted, Reason.worker_blocked])).toEqual([Reason.worker_blocked, unlisted]);
  });
});
