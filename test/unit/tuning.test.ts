import { describe, expect, it } from "vitest";
import type { Worker } from "../../src/resources/types.ts";
import { BatchTally } from "../../src/scheduler/batches.ts";
import { nextDesired } from "../../src/scheduler/tuning.ts";

const worker = (desired: number): Worker => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Worker",
  metadata: { name: "w1" },
  spec: { max_concurrency: 8, initial_concurrency: 2, concurrency_policy: "adaptive" },
  status: { desired_concurrency: desired, tuning: { good: 2, theoretical: 8 } },
});

/** A result ZIP's entries carrying the controller_concurrency of a claim batch. */
const entries = (batch: string, size: number, desired: number) =>
  new Map([
    [
      "worker-result.json",
      Buffer.from(
        JSON.stringify({
          controller_concurrency: { desired_concurrency: desired, claim_batch_id: batch, claim_batch_size: size },
        }),
      ),
    ],
  ]);

const clean = (batch: string, size: number) => ({ verdict: "clean", issues: [], entries: entries(batch, size, 2) });
const dirty = (batch: string, size: number) => ({ verdict: "dirty", issues: ["x"], entries: entries(batch, size, 2) });

describe("adaptive tuning by claim batch", () => {
  it("steps up only when a batch completes clean", () => {
    const tally = new BatchTally();
    expect(nextDesired(worker(2), clean("b1", 2), tally)).toBeUndefined();
    expect(nextDesired(worker(2), clean("b1", 2), tally)?.desired).toBeGreaterThan(2);
    expect(tally.size).toBe(0);
  });

  it("does not step up a batch with an unhealthy result in it, and forgets it once complete", () => {
    const tally = new BatchTally();
    expect(nextDesired(worker(2), dirty("b2", 2), tally)?.desired).toBeLessThanOrEqual(2);
    expect(tally.size).toBe(1);
    const last = nextDesired(worker(2), clean("b2", 2), tally);
    expect(last === undefined || last.desired <= 2).toBe(true);
    expect(tally.size).toBe(0);
  });

  it("keeps at most maxBatches open batches, dropping the oldest", () => {
    const tally = new BatchTally(3);
    for (let i = 0; i < 10; i++) tally.count(`b${i}`, 5, true);
    expect(tally.size).toBe(3);
    // b0 was dropped: counting it again starts afresh, so four more results do not complete it.
    for (let i = 0; i < 4; i++) expect(tally.count("b0", 5, true)).toBeUndefined();
    expect(tally.count("b0", 5, true)).toEqual({ size: 5, healthy: 5, unhealthy: 0 });
  });
});
