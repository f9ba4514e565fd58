// Replies that grow with the fleet or the queue leave the Hub as bytes (api/large-reply.ts):
// over real HTTP on loopback, each one's length header counts its bytes, its text is
// UTF-8 (a character outside ASCII included), and it says what the Hub holds.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LARGE_REPLY_CHARS } from "../../src/api/large-reply.ts";
import { API_PREFIX } from "../../src/api/resources.ts";
import { Hub } from "../../src/hub.ts";
import { parseDispatch, parseRegister } from "../../src/protocol/parse.ts";

const TASKS = 150;
const WORKERS = 90;
const MARK = "résumé ✓ 検証";

let hub: Hub;
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-large-replies-"));
  hub = await Hub.start({ dataDir: dir, port: 0, logLevel: "silent" });
  const tasks = Array.from({ length: TASKS }, (_, i) => ({
    task_id: `big-${String(i).padStart(4, "0")}`,
    case_id: `case-${i}`,
    setting_id: "large",
    run_id: "1",
    required_capability: "linux",
    execution_profile: { placement: "shared", resources: { cpu_millis: 250, memory_mb: 256 } },
    payload: { runner: "noop", note: MARK },
  }));
  await hub.scheduler.dispatch(parseDispatch({ schema_version: 1, operator: "test", tasks }));
  for (let i = 0; i < WORKERS; i++)
    await hub.scheduler.register(
      parseRegister({
        worker_id: `w-${String(i).padStart(3, "0")}`,
        runner_api_version: 1,
        capabilities: ["linux"],
        max_concurrency: 4,
        resource_capacity: { cpu_millis: 8000, memory_mb: 16384, disk_mb: 100000, gpu_count: 0 },
      }),
    );
}, 60_000);

afterAll(async () => {
  await hub?.close();
  await rm(dir, { recursive: true, force: true });
});

/** GET, with the raw bytes and the headers as sent. */
async function getBytes(path: string): Promise<{ status: number; type: string; length: number; bytes: Buffer }> {
  const res = await fetch(hub.url + path);
  const bytes = Buffer.from(await res.arrayBuffer());
  return {
    status: res.status,
    type: res.headers.get("content-type") ?? "",
    length: Number(res.headers.get("content-length")),
    bytes,
  };
}

describe("large replies", () => {
  it("a list of every Task: length in bytes, UTF-8 text, every task with its payload", async () => {
    const r = await getBytes(`${API_PREFIX}/tasks`);
    expect(r.status).toBe(200);
    expect(r.type).toBe("application/json; charset=utf-8");
    const text = r.bytes.toString("utf8");
    // Large enough to take the bytes path, and the header counts bytes, not characters.
    expect(text.length).toBeGreaterThanOrEqual(LARGE_REPLY_CHARS);
    expect(r.length).toBe(r.bytes.length);
    expect(r.bytes.length).toBeGreaterThan(text.length);
    const list = JSON.parse(text);
    expect(list.kind).toBe("TaskList");
    expect(list.items).toHaveLength(TASKS);
    expect(list.items.every((t: any) => t.spec.payload.note === MARK)).toBe(true);
    expect(list.items.map((t: any) => t.metadata.name)).toEqual(
      hub.cache
        .list("Task")
        .map((t) => t.metadata.name)
        .sort(),
    );
  });

  it("task-admission for a fleet: one entry per worker, length in bytes", async () => {
    const r = await getBytes("/api/data/task-admission?task_id=big-0007");
    expect(r.status).toBe(200);
    expect(r.type).toBe("application/json; charset=utf-8");
    expect(r.bytes.length).toBeGreaterThanOrEqual(LARGE_REPLY_CHARS);
    expect(r.length).toBe(r.bytes.length);
    const body = JSON.parse(r.bytes.toString("utf8"));
    expect(body.task_id).toBe("big-0007");
    expect(body.workers).toHaveLength(WORKERS);
    expect(new Set(body.workers.map((w: any) => w.worker_id)).size).toBe(WORKERS);
  });

  it("a small reply in the same scope is unchanged, and an error still answers as before", async () => {
    const one = await getBytes(`${API_PREFIX}/tasks/big-0001`);
    expect(one.status).toBe(200);
    expect(one.length).toBe(one.bytes.length);
    expect(JSON.parse(one.bytes.toString("utf8")).spec.payload.note).toBe(MARK);
    const missing = await getBytes("/api/data/task-admission?task_id=nope");
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.bytes.toString("utf8"))).toMatchObject({ error: "task_not_found" });
  });
});
