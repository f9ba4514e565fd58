// Conflicts the caller did not cause. A read-modify-write the Hub makes on its own behalf (an
// operator verb, a Runner's state change, a status write, a GitOps apply, a controller) reads
// its object from the informer, which can trail the store by a few milliseconds: another
// replica, or this one's controllers, wrote since. Its write then names a stale
// resourceVersion and the store answers Conflict, which was nobody's mistake. As client-go's
// RetryOnConflict does, read again, apply the same change to what is there now, and write
// again, a bounded number of times with a short jittered backoff so that racing writers
// spread out. Only a client that itself sent a stale resourceVersion ever sees a Conflict.
import { isStoreError } from "./errors.ts";

export type RetryOptions = {
  /** Tries in all, the first one included (default 10). */
  attempts?: number;
  /** The wait before the second try (ms); it doubles on each later one up to maxDelayMs. Each wait is drawn from 50–150% of that. */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** Runs before each retry, after the wait: catch the reads up, so the next try sees at least the write it lost to. */
  refresh?: () => Promise<void>;
  /** What is worth another try (default: a store Conflict). */
  retryable?: (e: unknown) => boolean;
};

export const DEFAULT_RETRY = { attempts: 10, baseDelayMs: 5, maxDelayMs: 200 } as const;

export const isConflict = (e: unknown) => isStoreError(e, "Conflict");
/** For a write that may create: a name taken in between is lost the same way. */
export const conflictOrTaken = (e: unknown) => isStoreError(e, "Conflict") || isStoreError(e, "AlreadyExists");

/** The wait before try `attempt + 1` (ms), jittered. */
export function retryDelayMs(attempt: number, o: RetryOptions = {}): number {
  const base = o.baseDelayMs ?? DEFAULT_RETRY.baseDelayMs;
  const cap = o.maxDelayMs ?? DEFAULT_RETRY.maxDelayMs;
  return Math.min(cap, base * 2 ** (attempt - 1)) * (0.5 + Math.random());
}

/**
 * Run `step` (which must read what it changes afresh each time it is called) until it does
 * not fail with a retryable error, or the tries run out; the last error is then thrown.
 */
export async function retryOnConflict<R>(step: (attempt: number) => Promise<R>, o: RetryOptions = {}): Promise<R> {
  const attempts = o.attempts ?? DEFAULT_RETRY.attempts;
  const retryable = o.retryable ?? isConflict;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step(attempt);
    } catch (e) {
      if (attempt >= attempts || !retryable(e)) throw e;
    }
    await new Promise((r) => setTimeout(r, retryDelayMs(attempt, o)));
    await o.refresh?.();
  }
}
