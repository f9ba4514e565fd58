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
