// Where V8 puts a new object. When most objects from one allocation site (one object
// literal, one array) survive their first scavenges, V8 "pretenures" that site: from then
// on it allocates the site's objects straight into the old generation, which only a full GC
// (a mark of the whole heap) collects. That is right for data that lives long, and wrong for
// a Hub's request handlers: a task-admission answer builds 2,000 worker views and decisions
// at the same sites every time, alive for the few tens of milliseconds the request takes,
// which is often long enough to survive a scavenge or two. Once their sites are pretenured,
// each answer's garbage lands in the old generation: on a Hub holding 200,000 tasks that
// was a full mark (about 100 ms of work) every second or so under a stream of such
// requests, and the requests made during one waited. So the Hub turns pretenuring off once
// its store is loaded (the start-up's own objects are the long-lived kind it helps). V8
// reads the flag as it goes, so setting it at run time takes effect.
import { setFlagsFromString } from "node:v8";

/** The V8 flag this sets. */
export const NO_PRETENURING = "--no-allocation-site-pretenuring";

const CHOSEN = /^--(no-)?allocation[-_]site[-_]pretenuring$/;

/**
 * Allocate new objects in the young generation from now on, whatever their site's history,
 * unless node was started with a choice of its own (`--allocation-site-pretenuring` or
 * `--no-allocation-site-pretenuring`). Returns whether this call set it.
 */
export function stopPretenuring(
  execArgv: readonly string[] = process.execArgv,
  set: (flag: string) => void = setFlagsFromString,
): boolean {
  if (execArgv.some((a) => CHOSEN.test(a))) return false;
  set(NO_PRETENURING);
  return true;
}
