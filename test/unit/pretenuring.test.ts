// The Hub stops V8's pretenuring once its store is loaded (observability/pretenuring.ts).
// What that relies on is V8's: the flag, set at run time, keeps a pretenured site's new
// objects in the young generation. Each measurement runs in a fresh node, since V8's choices
// for a site depend on everything the process allocated before.
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { NO_PRETENURING, stopPretenuring } from "../../src/observability/pretenuring.ts";

const CHILD = fileURLToPath(new URL("../fixtures/pretenuring-child.mjs", import.meta.url));

/** The old generation's largest growth (MB) while short-lived objects come from a pretenured site. */
const growth = (...flag: string[]) =>
  Number(execFileSync(process.execPath, [CHILD, ...flag], { encoding: "utf8" }).trim());

describe("stopPretenuring", () => {
  it("sets a flag that keeps short-lived objects out of the old generation, at run time", () => {
    // V8 decides to pretenure from what its scavenges see; on a loaded machine the control
    // run now and then shows no pretenuring (7.6 MB once in a full suite), which tests
    // nothing either way. Such a control is run again, at most three times in all.
    let pretenured = growth();
    for (let tries = 1; tries < 3 && pretenured <= 100; tries++) pretenured = growth();
    const young = growth(NO_PRETENURING);
    expect(pretenured).toBeGreaterThan(100);
    expect(young).toBeLessThan(Math.min(50, pretenured / 5));
  }, 60_000);

  it("sets it unless node's command line made a choice", () => {
    const set: string[] = [];
    expect(stopPretenuring([], (f) => set.push(f))).toBe(true);
    expect(stopPretenuring(["--max-old-space-size=100"], (f) => set.push(f))).toBe(true);
    expect(set).toEqual([NO_PRETENURING, NO_PRETENURING]);
    expect(stopPretenuring(["--allocation-site-pretenuring"], (f) => set.push(f))).toBe(false);
    expect(stopPretenuring(["--no-allocation_site_pretenuring"], (f) => set.push(f))).toBe(false);
    expect(set).toHaveLength(2);
  });
});
