// JSON Patch as RFC 6902 defines it: the appendix's cases, and a failure that changes nothing.
import { describe, expect, it } from "vitest";
import { applyJsonPatch, JsonPatchError, parsePointer } from "../../src/api/json-patch.ts";

describe("JSON Patch (RFC 6902)", () => {
  it("add, remove, replace, move, copy and test, as in the RFC's appendix", () => {
    expect(applyJsonPatch({ foo: "bar" }, [{ op: "add", path: "/baz", value: "qux" }])).toEqual({
      baz: "qux",
      foo: "bar",
    });
    expect(applyJsonPatch({ foo: ["bar", "baz"] }, [{ op: "add", path: "/foo/1", value: "qux" }])).toEqual({
      foo: ["bar", "qux", "baz"],
    });
    expect(applyJsonPatch({ foo: ["bar"] }, [{ op: "add", path: "/foo/-", value: ["abc", "def"] }])).toEqual({
      foo: ["bar", ["abc", "def"]],
    });
    expect(applyJsonPatch({ baz: "qux", foo: "bar" }, [{ op: "remove", path: "/baz" }])).toEqual({ foo: "bar" });
    expect(applyJsonPatch({ foo: ["bar", "qux", "baz"] }, [{ op: "remove", path: "/foo/1" }])).toEqual({
      foo: ["bar", "baz"],
    });
    expect(applyJsonPatch({ baz: "qux", foo: "bar" }, [{ op: "replace", path: "/baz", value: "boo" }])).toEqual({
      baz: "boo",
      foo: "bar",
    });
    expect(
      applyJsonPatch({ foo: { bar: "baz", waldo: "fred" }, qux: { corge: "grault" } }, [
        { op: "move", from: "/foo/waldo", path: "/qux/thud" },
      ]),
    ).toEqual({ foo: { bar: "baz" }, qux: { corge: "grault", thud: "fred" } });
    expect(
      applyJsonPatch({ foo: ["all", "grass", "cows", "eat"] }, [{ op: "move", from: "/foo/1", path: "/foo/3" }]),
    ).toEqual({ foo: ["all", "cows", "eat", "grass"] });
    expect(applyJsonPatch({ a: { b: 1 } }, [{ op: "copy", from: "/a", path: "/c" }])).toEqual({
      a: { b: 1 },
      c: { b: 1 },
    });
    expect(
      applyJsonPatch({ baz: "qux", foo: ["a", 2, "c"] }, [
        { op: "test", path: "/baz", value: "qux" },
        { op: "test", path: "/foo/1", value: 2 },
      ]),
    ).toEqual({ baz: "qux", foo: ["a", 2, "c"] });
    expect(
      applyJsonPatch({ "/": 9, "~1": 10 }, [
        { op: "test", path: "/~01", value: 10 },
        { op: "replace", path: "/~1", value: 1 },
      ]),
    ).toEqual({ "/": 1, "~1": 10 });
    expect(parsePointer("/a~1b/m~0n")).toEqual(["a/b", "m~n"]);
  });

  it("refuses what the RFC calls errors, naming the operation, and leaves the target as it was", () => {
    const target = { baz: "qux", foo: ["a"] };
    const cases: [unknown, RegExp][] = [
      [[{ op: "test", path: "/baz", value: "bar" }], /operation 0 \(\/baz\): test failed/],
      [
        [{ op: "add", path: "/baz/bat", value: "qux" }],
        /operation 0 \(\/baz\/bat\): the parent of this path is not an object or array/,
      ],
      [[{ op: "remove", path: "/nope" }], /no value at this path/],
      [[{ op: "replace", path: "/nope", value: 1 }], /no value at this path/],
      [[{ op: "add", path: "/foo/5", value: 1 }], /index 5 is out of range/],
      [[{ op: "add", path: "/foo/01", value: 1 }], /"01" is not an array index/],
      [[{ op: "move", from: "/foo", path: "/foo/0" }], /cannot move a value into itself/],
      [
        [
          { op: "add", path: "/x", value: 1 },
          { op: "frob", path: "/x" },
        ],
        /operation 1 .*"op" must be one of/,
      ],
      [[{ op: "add", path: "/x" }], /"add" needs "value"/],
      [{ op: "add" }, /a JSON patch is an array of operations/],
      [[{ op: "add", path: "x", value: 1 }], /starts with "\/"/],
    ];
    for (const [patch, message] of cases) {
      expect(() => applyJsonPatch(target, patch), JSON.stringify(patch)).toThrow(JsonPatchError);
      expect(() => applyJsonPatch(target, patch)).toThrow(message);
    }
    expect(target).toEqual({ baz: "qux", foo: ["a"] });
    const own = applyJsonPatch({}, [{ op: "add", path: "/__proto__", value: { polluted: true } }]) as object;
    expect(Object.getOwnPropertyDescriptor(own, "__proto__")?.value).toEqual({ polluted: true });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});
