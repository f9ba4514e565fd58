// Test support: a real Hub on loopback over a temp-dir SQLite store, and small HTTP helpers.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Hub, type HubOptions } from "../../src/hub.ts";

export type TestHub = { hub: Hub; url: string; dir: string; close(): Promise<void> };

export async function startHub(opts: Partial<HubOptions> = {}, dir?: string): Promise<TestHub> {
  const d = dir ?? (await mkdtemp(join(tmpdir(), "loom-hub-")));
  const hub = await Hub.start({ dataDir: d, port: 0, logLevel: "silent", ...opts });
  return {
    hub,
    url: hub.url,
    dir: d,
    async close() {
      await hub.close();
      if (!dir) await rm(d, { recursive: true, force: true });
    },
  };
}

export async function post(
  url: string,
  path: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

export async function get(
  url: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: any }> {
  const res = await fetch(url + path, { headers });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** Poll until `fn` returns a truthy value, or fail after `ms` with `what`. */
export async function eventually<T>(
  fn: () => T | Promise<T>,
  what: string,
  ms = 10_000,
): Promise<Exclude<T, false | 0 | "" | null | undefined>> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v as Exclude<T, false | 0 | "" | null | undefined>;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ""}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const registerBody = (worker_id: string, extra: Record<string, unknown> = {}) => ({
  worker_id,
  runner_api_version: 1,
  capabilities: ["linux", "*"],
  max_concurrency: 4,
  initial_concurrency: 4,
  concurrency_policy: "fixed",
  health: { hostname: worker_id, resources: { cpu_count: 4, mem_available_mb: 8192, disk_available_mb: 50_000 } },
  ...extra,
});

/** A test's Hub and temp folder; `teardown` (for afterEach) stops the Hub before the folder goes. */
export function hubSlot(): { h?: TestHub; dir: string; teardown(): Promise<void> } {
  const slot = {
    h: undefined as TestHub | undefined,
    dir: "",
    async teardown() {
      await slot.h?.close();
      if (slot.dir) await rm(slot.dir, { recursive: true, force: true });
      [slot.h, slot.dir] = [undefined, ""];
    },
  };
  return slot;
}
