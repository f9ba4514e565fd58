// `loom get -w` against a real Hub that goes away: the watch resumes from the last
// resourceVersion it saw, and lists again when the Hub says that version is too old (410).
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Client } from "../../src/cli/client.ts";
import { list, watchLoop } from "../../src/cli/get.ts";
import { resolveKind } from "../../src/cli/kinds.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
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

let hub: TestHub | undefined;
let dir = "";
afterEach(async () => {
  await hub?.close();
  hub = undefined;
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe("loom get -w across Hub restarts", () => {
  it("resumes from the last resourceVersion, then relists after 410, showing each change", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-cli-watch-"));
    const port = await freePort();
    // A small event log, so a Hub restarted after many writes no longer has the watcher's revision.
    const start = () => startHub({ port, backend: { kind: "sqlite", sqlite: { eventLogLimit: 20 } } }, dir);
    hub = await start();
    const url = hub.url;
    await post(url, "/apis/loom.dev/v1alpha1/tasks", task("a"));

    const client = new Client({ controller: url });
    const kind = resolveKind("tasks");
    const first = await list(client, kind, {});
    const shown: string[] = [];
    const logs: string[] = [];
    const ac = new AbortController();
    const done = watchLoop(client, kind, {}, first, {
      show: (objs) =>
        shown.push(...objs.map((o) => `${o.metadata?.name}:${(o as { status?: { state?: string } }).status?.state}`)),
      log: (l) => logs.push(l),
      signal: ac.signal,
      reconnectMs: [100],
    });

    await post(url, "/api/admin/cancel-task", { task_id: "a" });
    await eventually(() => shown.includes("a:cancelled"), "the change before the drop");

    // The Hub goes away and comes back with the same store: resume from the last revision.
    await hub.close();
    hub = await start();
    await eventually(() => logs.some((l) => /resuming from resourceVersion \d+/.test(l)), "a resume");
    await post(url, "/apis/loom.dev/v1alpha1/tasks", task("b"));
    await eventually(() => shown.includes("b:queued"), "the change after the resume");
    expect(shown.filter((s) => s === "a:cancelled")).toHaveLength(1); // not replayed twice

    // Down again; many writes meanwhile compact the log past the watcher's revision.
    await hub.close();
    hub = undefined;
    const store = openSqliteStore(join(dir, "loom.db"), { eventLogLimit: 20 });
    for (let i = 0; i < 40; i++) await store.create({ ...task(`c${i}`), status: { state: "queued", attempt: 1 } });
    await store.close();
    hub = await start();
    await eventually(() => logs.some((l) => /410.*listing again/.test(l)), "a relist after 410");
    await eventually(() => shown.includes("c39:queued"), "the relisted objects");
    await post(url, "/apis/loom.dev/v1alpha1/tasks", task("d"));
    await eventually(() => shown.includes("d:queued"), "the change after the relist");
    ac.abort();
    await done;
  }, 60_000);
});
