// retryOnConflict: the rule for a read-modify-write the Hub makes on its own behalf.
import { describe, expect, it } from "vitest";
import { conflict, notFound } from "../../src/store/errors.ts";
import { retryDelayMs, retryOnConflict } from "../../src/store/retry.ts";

describe("retryOnConflict", () => {
  it("reads again (refresh) and retries after a Conflict, then answers the try that won", async () => {
    const log: string[] = [];
    const out = await retryOnConflict(
      async (n) => {
        log.push(`try ${n}`);
        if (n < 3) throw conflict("Worker", "w");
        return "written";
      },
      { baseDelayMs: 1, refresh: async () => void log.push("refresh") },
    );
    expect(out).toBe("written");
    expect(log).toEqual(["try 1", "refresh", "try 2", "refresh", "try 3"]);
  });

  it("gives up after the bounded number of tries with the last Conflict", async () => {
    let tries = 0;
    const run = retryOnConflict(
      async () => {
        tries++;
        throw conflict("Worker", "w", `lost ${tries}`);
      },
      { attempts: 4, baseDelayMs: 1 },
    );
    await expect(run).rejects.toThrow("lost 4");
    expect(tries).toBe(4);
  });

  it("never retries what is not a Conflict", async () => {
    let tries = 0;
    await expect(
      retryOnConflict(async () => {
        tries++;
        throw notFound("Worker", "w");
      }),
    ).rejects.toThrow("not found");
    expect(tries).toBe(1);
  });

  it("waits a jittered, growing, capped time", () => {
    for (let i = 0; i < 50; i++) {
      expect(retryDelayMs(1, { baseDelayMs: 10 })).toBeGreaterThanOrEqual(5);
      expect(retryDelayMs(1, { baseDelayMs: 10 })).toBeLessThan(15);
      expect(retryDelayMs(3, { baseDelayMs: 10 })).toBeGreaterThanOrEqual(20);
      expect(retryDelayMs(20, { baseDelayMs: 10, maxDelayMs: 100 })).toBeLessThan(150);
    }
  });
});
