// The web view's ListWatch (ui/src/list-watch.ts) against a real Hub under Node's fetch:
// it lists, follows the watch, resumes from its last resourceVersion when the Hub restarts,
// lists again after 410 Gone, and stops asking once the token is refused.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { ListWatch, type KubeObject, type Phase } from "../../ui/src/list-watch.ts";
import { eventually, post, startHub, type TestHub } from "../support/hub.ts";

const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });
const task = (name: string) => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name },
  spec: { payload: { runner: "noop" } },
});
type T = KubeObject & { status?: { state?: string } };
const TOKEN = "list-watch-token-0123456789";
const auth = { authorization: `Bearer ${TOKEN}` };

let hub: TestHub | undefined;
let lw: ListWatch<T> | undefined;
let dir = "";
afterEach(async () => {
  lw?.stop();
  await hub?.close();
  hub = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("web view ListWatch against a Hub that goes away", () => {
  it("keeps an exact copy across a restart (resume) and a compacted log (410, relist)", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-ui-watch-"));
    const port = await freePort();
    const env = { LOOM_HUB_TOKEN: TOKEN };
    // A small event log, so writes made while the Hub is down compact the watcher's revision away.
    const start = () => startHub({ port, env, backend: { kind: "sqlite", sqlite: { eventLogLimit: 20 } } }, dir);
    hub = await start();
    const url = hub.url;
    await post(url, "/apis/loom.dev/v1alpha1/tasks", task("a"), auth);

    const copy = new Map<string, string>();
    const phases: Phase[] = [];
    let resets = 0;
    lw = new ListWatch<T>({
      path: "/apis/loom.dev/v1alpha1/tasks",
      request: (path, init) => fetch(url + path, { ...init, headers: auth }),
      onReset: (items) => {
        resets++;
        copy.clear();
        for (const o of items) copy.set(o.metadata.name, o.status?.state ?? "");
      },
      onChange: (type, o) =>
        type === "DELETED" ? copy.delete(o.metadata.name) : copy.set(o.metadata.name, o.status?.state ?? ""),
      onPhase: (p) => phases.push(p),
      retryDelayMs: () => 100,
    });
    lw.start();
    await eventually(() => copy.get("a") === "queued" && phases.at(-1) === "watching", "the list and the watch");
    await post(url, "/api/admin/cancel-task", { task_id: "a" }, auth);
    await eventually(() => copy.get("a") === "cancelled", "a change through the watch");

    // Restart: the ListWatch resumes from its resourceVersion, without listing again.
    await hub.close();
    await eventually(() => phases.at(-1) === "retrying", "the lost connection to be noticed");
    hub = await start();
    // This process's own keep-alive socket to the old Hub may be the one that fails: retry.
    await eventually(
      async () => [201, 409].includes((await post(url, "/apis/loom.dev/v1alpha1/tasks", task("b"), auth)).status),
      "the create after the restart",
    );
    await eventually(() => copy.get("b") === "queued", "the change after the resume");
    expect(lw.stats.resumes).toBeGreaterThan(0);
    expect(resets).toBe(1);

    // Down again; a deletion and many writes compact the log past the watcher: 410, then a fresh list.
    await hub.close();
    hub = undefined;
    const store = openSqliteStore(join(dir, "loom.db"), { eventLogLimit: 20 });
    await store.delete("Task", "a");
    for (let i = 0; i < 40; i++) await store.create({ ...task(`c${i}`), status: { state: "queued", attempt: 1 } });
    await store.close();
    hub = await start();
    await eventually(() => lw!.stats.gone > 0 && copy.has("c39"), "a relist after 410");
    // The restarted Hub writes its own status to the 40 new tasks, and the log keeps 20 events:
    // the relist's revision can be compacted before its watch starts, so a second 410 and
    // relist may follow. Every reset after the first answers a 410; none comes from a resume.
    expect(resets).toBeGreaterThanOrEqual(2);
    expect(resets - 1).toBeLessThanOrEqual(lw.stats.gone);
    expect(copy.has("a")).toBe(false); // the relist replaced the copy, so the deletion shows too
    expect(copy.size).toBe(41);
    await eventually(
      async () => [201, 409].includes((await post(url, "/apis/loom.dev/v1alpha1/tasks", task("d"), auth)).status),
      "the create after the relist",
    );
    await eventually(() => copy.get("d") === "queued", "the change after the relist");
    // However many relists it took, the copy ends equal to what the Hub lists.
    const listed = async () => {
      const res = await fetch(url + "/apis/loom.dev/v1alpha1/tasks", { headers: auth });
      const body = (await res.json()) as { items: T[] };
      return new Map(body.items.map((o) => [o.metadata.name, o.status?.state ?? ""]));
    };
    await eventually(async () => {
      const want = await listed();
      return want.size === copy.size && [...want].every(([k, v]) => copy.get(k) === v);
    }, "the copy to equal the Hub's list");
  }, 60_000);

  it("stops and reports a refused token instead of retrying", async () => {
    hub = await startHub({ env: { LOOM_HUB_TOKEN: TOKEN } });
    const url = hub.url;
    const phases: Phase[] = [];
    lw = new ListWatch<T>({
      path: "/apis/loom.dev/v1alpha1/workers",
      request: (path, init) => fetch(url + path, { ...init, headers: { authorization: "Bearer wrong-token-value" } }),
      onReset: () => undefined,
      onChange: () => undefined,
      onPhase: (p) => phases.push(p),
      retryDelayMs: () => 10,
    });
    lw.start();
    await eventually(() => phases.includes("unauthorized"), "the refusal");
    await new Promise((r) => setTimeout(r, 100));
    expect(phases.filter((p) => p === "listing")).toHaveLength(1);
    expect(lw.stats.lists).toBe(0);
  });
});
