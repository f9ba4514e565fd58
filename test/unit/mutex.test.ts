// The scheduler's lock: one holder at a time, in order; and a long run of holders lets the
// event loop through between them, so I/O that completed meanwhile is not held up behind it.
import { describe, expect, it } from "vitest";
import { Mutex } from "../../src/scheduler/mutex.ts";

/** Keep the thread busy for `ms`, as a lease decision on cold code does. */
function spin(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end);
}

describe("Mutex", () => {
  it("runs holders one at a time, in the order they asked, whether they succeed or fail", async () => {
    const m = new Mutex();
    const log: string[] = [];
    let inside = 0;
    const holder = (name: string, fail = false) =>
      m.run(async () => {
        inside++;
        expect(inside).toBe(1);
        log.push(`${name} in`);
        await new Promise((r) => setTimeout(r, 2));
        log.push(`${name} out`);
        inside--;
        if (fail) throw new Error(`${name} failed`);
        return name;
      });
    const results = await Promise.allSettled([holder("a"), holder("b", true), holder("c")]);
    expect(log).toEqual(["a in", "a out", "b in", "b out", "c in", "c out"]);
    expect(results.map((r) => r.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
  });

  it("lets a timer that fell due run between holders once they have run back to back for the slice", async () => {
    const m = new Mutex(10);
    const order: string[] = [];
    setTimeout(() => order.push("timer"), 0);
    const holders = Array.from({ length: 10 }, (_, i) =>
      m.run(async () => {
        order.push(`holder ${i}`);
        spin(3);
      }),
    );
    await Promise.all(holders);
    // Without the pause all ten would run first (they are one chain of microtasks).
    const at = order.indexOf("timer");
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThan(order.length - 1);
  });

  it("runs holders that fit in one slice without a pause", async () => {
    const m = new Mutex(50);
    const order: string[] = [];
    setTimeout(() => order.push("timer"), 0);
    await Promise.all([0, 1, 2].map((i) => m.run(async () => void order.push(`holder ${i}`))));
    await new Promise((r) => setTimeout(r, 5));
    expect(order).toEqual(["holder 0", "holder 1", "holder 2", "timer"]);
  });
});
