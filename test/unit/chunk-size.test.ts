// Background writes go in transactions sized to a few milliseconds of synchronous work each.
import { describe, expect, it } from "vitest";
import { ChunkSize } from "../../src/reconciler/slice.ts";

/** A step that takes at least `ms` of the thread, as a transaction's synchronous part does. */
const busy = (ms: number) => () => {
  const until = performance.now() + ms;
  while (performance.now() < until);
  return "applied";
};

describe("ChunkSize", () => {
  it("starts small, grows once writes prove fast, and never passes the store's limit", () => {
    const c = new ChunkSize(4, 8, 50);
    expect(c.next(128)).toBe(8);
    expect(c.next(3)).toBe(3);
    c.timed(8, () => undefined);
    expect(c.next(128)).toBe(50);
    expect(c.next(20)).toBe(20);
  });

  it("sizes the next transaction to the budget from the last one's time per write", () => {
    const c = new ChunkSize(4, 2, 50);
    // 20 writes in at least 8 ms: at least 0.4 ms each, so at most 10 fit in 4 ms.
    expect(c.timed(20, busy(8))).toBe("applied");
    expect(c.next(128)).toBeLessThanOrEqual(10);
    expect(c.next(128)).toBeGreaterThanOrEqual(2);
  });

  it("stays within its bounds however slow or fast the writes were", () => {
    const c = new ChunkSize(4, 8, 50);
    c.timed(10, busy(40)); // 4 ms a write: one would fill the budget
    expect(c.next(128)).toBe(8);
    c.timed(10, () => undefined); // next to nothing
    expect(c.next(128)).toBe(50);
  });

  it("learns nothing from a transaction of one write, nor loses its size when the step throws", () => {
    const c = new ChunkSize(4, 8, 50);
    c.timed(8, () => undefined);
    c.timed(1, busy(20));
    expect(c.next(128)).toBe(50);
    expect(() =>
      c.timed(10, () => {
        busy(40)();
        throw new Error("refused");
      }),
    ).toThrow("refused");
    // A refused transaction still ran its synchronous part: the next one is sized from it.
    expect(c.next(128)).toBe(8);
  });
});
