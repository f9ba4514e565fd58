import { describe, expect, it } from "vitest";
import { Controller } from "../../src/reconciler/controller.ts";
import { WorkQueue } from "../../src/reconciler/queue.ts";

describe("work queue", () => {
  it("de-duplicates a key that is waiting, and re-queues a key marked dirty while in flight", async () => {
    const q = new WorkQueue();
    q.add("a");
    q.add("a");
    q.add("b");
    expect(q.length).toBe(2);
    const k = await q.get();
    expect(k).toBe("a");
    q.add("a"); // in flight: only marked dirty
    expect(q.length).toBe(1);
    q.done("a");
    expect(q.length).toBe(2);
    expect(await q.get()).toBe("b");
    expect(await q.get()).toBe("a");
    q.shutDown();
  });

  it("lets a sooner delay replace a later one for the same key", async () => {
    const q = new WorkQueue();
    q.addAfter("w", 60_000);
    q.addAfter("w", 20);
    const got = await Promise.race([q.get(), new Promise((r) => setTimeout(() => r("timeout"), 5_000))]);
    expect(got).toBe("w");
    q.shutDown();
  });

  it("keeps the sooner delay when a later one is asked for", async () => {
    const q = new WorkQueue();
    q.addAfter("w", 20);
    q.addAfter("w", 60_000);
    const got = await Promise.race([q.get(), new Promise((r) => setTimeout(() => r("timeout"), 5_000))]);
    expect(got).toBe("w");
    q.shutDown();
  });
});

describe("work queue delays", () => {
  const take = async (q: WorkQueue, n: number): Promise<string[]> => {
    const got: string[] = [];
    for (let i = 0; i < n; i++) {
      const k = await Promise.race([q.get(), new Promise<string>((r) => setTimeout(() => r("timeout"), 5_000))]);
      got.push(k!);
      if (k !== "timeout") q.done(k!);
    }
    return got;
  };

  it("releases many delayed keys in the order they fall due, each once", async () => {
    const q = new WorkQueue();
    const keys = Array.from({ length: 2_000 }, (_, i) => `k${i}`);
    // Delays spread over 60 ms, given out of order; every tenth key is then given a second,
    // shorter one. A key's due is when it was added plus its delay (between the clock read
    // before the call and the one after), the sooner of the two for a key given two.
    const due = new Map<string, { lo: number; hi: number }>();
    const delay = (k: string, ms: number) => {
      const lo = Date.now() + ms;
      q.addAfter(k, ms);
      const hi = Date.now() + ms;
      const was = due.get(k);
      due.set(k, was && was.lo <= lo ? was : { lo, hi });
    };
    keys.forEach((k, i) => delay(k, 5 + ((i * 7919) % 2_000) * 0.03));
    keys.forEach((k, i) => i % 10 === 0 && delay(k, 2 + ((i * 7919) % 2_000) * 0.015));
    const got = await take(q, keys.length);
    expect(new Set(got).size).toBe(keys.length);
    expect(got).not.toContain("timeout");
    // Keys come in the order they fall due: none comes after a key that surely fell due later.
    const outOfOrder = got.filter((k, i) => i > 0 && due.get(k)!.hi < due.get(got[i - 1])!.lo);
    expect(outOfOrder).toEqual([]);
    // Nothing more: a key moved sooner does not come again at its first due.
    expect(await Promise.race([q.get(), new Promise((r) => setTimeout(() => r("nothing"), 150))])).toBe("nothing");
    q.shutDown();
  });

  it("drops a cancelled delayed key, and still gives out the rest in due order", async () => {
    const q = new WorkQueue();
    // 300 keys over 40 ms; two in three are cancelled, so the heap is rebuilt from the rest.
    const keys = Array.from({ length: 300 }, (_, i) => `c${i}`);
    keys.forEach((k, i) => q.addAfter(k, 5 + ((i * 37) % 300) * 0.13));
    const kept = keys.filter((_, i) => i % 3 === 0);
    keys.forEach((k, i) => i % 3 !== 0 && q.cancel(k));
    expect(q.waiting).toBe(kept.length);
    q.cancel("never-added"); // nothing to drop
    q.add("ready");
    q.cancel("ready"); // a ready key is not a delayed one: it stays
    expect(await q.get()).toBe("ready");
    q.done("ready");
    const got = await take(q, kept.length);
    expect([...got].sort()).toEqual([...kept].sort());
    const dueOf = (k: string) => ((Number(k.slice(1)) * 37) % 300) * 0.13;
    // Added within a millisecond or so of each other: a key that falls due 2 ms later never comes first.
    expect(got.filter((k, i) => i > 0 && dueOf(k) + 2 < dueOf(got[i - 1]))).toEqual([]);
    expect(await Promise.race([q.get(), new Promise((r) => setTimeout(() => r("nothing"), 100))])).toBe("nothing");
    // Cancelling the last waiting key stops the timer: nothing is left to come.
    q.addAfter("last", 30);
    q.cancel("last");
    expect(q.waiting).toBe(0);
    expect(await Promise.race([q.get(), new Promise((r) => setTimeout(() => r("nothing"), 80))])).toBe("nothing");
    q.shutDown();
  });

  it("takes a key again after it fired; a key still delayed at shut-down never comes", async () => {
    const q = new WorkQueue();
    q.addAfter("a", 10);
    expect(await take(q, 1)).toEqual(["a"]);
    q.addAfter("a", 10);
    expect(await take(q, 1)).toEqual(["a"]);
    q.addAfter("b", 20);
    q.shutDown();
    await new Promise((r) => setTimeout(r, 40));
    expect(q.length).toBe(0);
    expect(await q.get()).toBeUndefined();
  });
});

describe("controller loop", () => {
  it("yields to I/O between slices of keys whose reconcile does no I/O", async () => {
    const keys = Array.from({ length: 20_000 }, (_, i) => `k${i}`);
    let done = 0;
    let doneWhenImmediateRan = -1;
    const spin = () => {
      const until = performance.now() + 0.01;
      while (performance.now() < until);
    };
    const c = new Controller(
      {
        name: "busy",
        keys: () => keys,
        reconcile: async () => {
          spin();
          done++;
        },
      },
      { log: () => {}, resyncMs: 0 },
    );
    setImmediate(() => {
      doneWhenImmediateRan = done;
    });
    c.start(); // the resync queues every key at once
    for (let i = 0; done < keys.length && i < 2_000; i++) await new Promise((r) => setTimeout(r, 5));
    await c.stop();
    expect(done).toBe(keys.length);
    // The check phase ran while keys were still waiting: the loop did not hold the thread for all 20,000.
    expect(doneWhenImmediateRan).toBeGreaterThan(0);
    expect(doneWhenImmediateRan).toBeLessThan(keys.length);
  });
});
