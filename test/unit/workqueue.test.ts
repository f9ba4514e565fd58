import { describe, expect, it } from "vitest";
import { WorkQueue } from "../../src/reconciler/queue.ts";

describe("work queue", () => {
  it("de-duplicates a key that is waiting, and re-queues a key marked dirty while in flight", async () => {
    const q = new WorkQueue();
    q.add("a"); q.add("a"); q.add("b");
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
