import { describe, expect, it } from "vitest";
import { isLoopback, presentedToken, tokenEquals } from "../../src/security/tokens.ts";

describe("loopback addresses", () => {
  it.each([
    "localhost",
    "LOCALHOST",
    "127.0.0.1",
    "127.8.9.10",
    "::1",
    "[::1]",
    "::ffff:127.0.0.1",
    "[::FFFF:127.0.0.1]",
  ])("%s is loopback", (h) => {
    expect(isLoopback(h)).toBe(true);
  });
  it.each(["0.0.0.0", "::", "10.0.0.1", "::ffff:10.0.0.1", "128.0.0.1", "example.com", "localhost.example.com", ""])(
    "%s is not",
    (h) => {
      expect(isLoopback(h)).toBe(false);
    },
  );
});

describe("tokens", () => {
  it("compare equal only when identical", () => {
    expect(tokenEquals("s3cret-token", "s3cret-token")).toBe(true);
    expect(tokenEquals("s3cret-token", "s3cret-toke")).toBe(false);
    expect(tokenEquals("", "x")).toBe(false);
  });
  it("are read from Authorization: Bearer in any case, else X-Loom-Token", () => {
    expect(presentedToken({ authorization: "bearer  abc " })).toBe("abc");
    expect(presentedToken({ authorization: "Bearer abc", "x-loom-token": "xyz" })).toBe("abc");
    expect(presentedToken({ authorization: "Basic abc", "x-loom-token": "xyz" })).toBe("xyz");
    expect(presentedToken({ "x-loom-token": "" })).toBeUndefined();
    expect(presentedToken({})).toBeUndefined();
  });
});
