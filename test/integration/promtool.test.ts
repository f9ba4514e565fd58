// What Prometheus' own linter says of the Hub's scrape: `promtool check metrics` (Debian's
// prometheus package) passes it whole, the Node.js process metrics included.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { hubSlot, post, registerBody, startHub } from "../support/hub.ts";

const PROMTOOL = ["/usr/bin/promtool", "/usr/local/bin/promtool"].find((p) => existsSync(p));
const slot = hubSlot();
afterEach(slot.teardown);

describe.skipIf(!PROMTOOL)("promtool check metrics", () => {
  it("passes the Hub's /metrics, with a worker registered", async () => {
    slot.h = await startHub({});
    expect((await post(slot.h.url, "/api/workers/register", registerBody("promtool-worker"))).status).toBe(200);
    const text = await (await fetch(`${slot.h.url}/metrics`)).text();
    expect(text).toContain("loom_worker_capacity");
    expect(text).toContain("nodejs_active_handles");
    const r = spawnSync(PROMTOOL!, ["check", "metrics"], { input: text, encoding: "utf8" });
    expect(`${r.stdout}${r.stderr}`.trim()).toBe("");
    expect(r.status).toBe(0);
  });
});
