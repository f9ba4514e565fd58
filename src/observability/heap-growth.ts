// How far the JS heap may grow past what the last full GC kept before V8 runs the next one.
//
// A Hub keeps every object in memory and rewrites them all the time: each rewrite leaves
// the old version as garbage in the old generation. Left to itself, V8 lets the heap grow
// to several times what is live, so a large store holds about twice the memory it needs.
// A fixed percentage is wrong for a small store instead: 30% of a 40 MiB heap is a full GC
// (a mark of every live object) after each 12 MiB of garbage, several times a second under
// a lease load, and those marks cost a tenth of the Hub's CPU. So the heap may grow by the
// percentage or by a fixed headroom, whichever is more: a large store keeps the percentage,
// and a small one pays a full GC per 64 MiB of garbage, which it can afford to hold.
import { constants, PerformanceObserver } from "node:perf_hooks";
import { getHeapStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** The garbage a Hub may always hold between full GCs, whatever its size. */
export const HEAP_HEADROOM_MIB = 64;

/** V8's own largest growth factor is 4: a percentage past 300 would grow further than V8 ever does. */
const MAX_PERCENT = 300;

/** The growth to allow after a full GC that kept `liveMiB`: at least `percent`, and at least the headroom. */
export function growthPercent(liveMiB: number, percent: number, headroomMiB = HEAP_HEADROOM_MIB): number {
  const forHeadroom = Math.ceil((100 * headroomMiB) / Math.max(liveMiB, 1));
  return Math.min(MAX_PERCENT, Math.max(percent, forHeadroom));
}

/**
 * Run one full GC now. V8 offers it only to a process started with --expose-gc; a context
 * made while the flag is set gets the function, and the flag is cleared again at once, so
 * no other code sees a global `gc`.
 */
export function fullGc(): void {
  setFlagsFromString("--expose-gc");
  try {
    (runInNewContext("gc") as () => void)();
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
}

/**
 * Hold the heap's growth to growthPercent() from now on, updated after every full GC (V8
 * reads the flag each time it sets the next limit). It starts with one full GC: until the
 * first, V8's limit is its initial one, which on a machine with a lot of memory let a Hub
 * on 200,000 tasks grow to 650 MB of heap (170 MB live) before it collected anything.
 * Returns a function that stops it and gives the choice back to V8.
 */
export function holdHeapGrowth(percent: number, headroomMiB = HEAP_HEADROOM_MIB): () => void {
  let set = -1;
  const apply = () => {
    const p = growthPercent(getHeapStatistics().used_heap_size / 2 ** 20, percent, headroomMiB);
    if (p === set) return;
    setFlagsFromString(`--heap-growing-percent=${p}`);
    set = p;
  };
  apply();
  fullGc();
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries())
      if ((e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) return apply();
  });
  observer.observe({ entryTypes: ["gc"] });
  return () => {
    observer.disconnect();
    setFlagsFromString("--heap-growing-percent=0");
  };
}
