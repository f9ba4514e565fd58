import { describe, expect, it } from "vitest";
import { getHeapStatistics } from "node:v8";
import { fullGc, growthPercent, HEAP_HEADROOM_MIB } from "../../src/observability/heap-growth.ts";

describe("heap growth between full GCs", () => {
  it("keeps the percentage on a large heap", () => {
    // 250 MiB live (a Hub on 200,000 tasks): 64 MiB is less than 30% of it.
    expect(growthPercent(250, 30)).toBe(30);
    expect(growthPercent(1000, 30)).toBe(30);
  });

  it("lets a small heap grow by the headroom instead", () => {
    // 40 MiB live: 30% would run a full GC every 12 MiB of garbage.
    expect(growthPercent(40, 30)).toBe(160);
    expect(growthPercent(64, 30)).toBe(100);
    expect((growthPercent(50, 30) / 100) * 50).toBeGreaterThanOrEqual(HEAP_HEADROOM_MIB);
  });

  it("never grows past V8's own largest factor, nor below the percentage asked for", () => {
    expect(growthPercent(1, 30)).toBe(300);
    expect(growthPercent(0, 30)).toBe(300);
    expect(growthPercent(40, 500)).toBe(300);
    expect(growthPercent(400, 80)).toBe(80);
    expect(growthPercent(100, 30, 0)).toBe(30);
  });

  it("runs a full GC on demand, without leaving a global gc behind", () => {
    // Garbage that survived to the old generation: only a full GC takes it back.
    const hold = { garbage: Array.from({ length: 300_000 }, (_, i) => ({ i, s: `x${i}` })) as unknown[] | undefined };
    const held = getHeapStatistics().used_heap_size;
    hold.garbage = undefined;
    fullGc();
    expect(getHeapStatistics().used_heap_size).toBeLessThan(held - 10 * 2 ** 20);
    expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  });
});
