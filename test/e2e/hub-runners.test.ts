// End to end: `loom hub` and two `loom runner` processes with different capacities run a
// mixed campaign. Afterwards the Hub's own store history is replayed to check the invariants
// (every active task holds a lease, reservations within capacity, leases within
// max_concurrency, an exclusive lease alone on its worker) at
// every committed revision, not just at the end.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { effectiveCapacity } from "../../src/admission/capacity.ts";
import { normalise } from "../../src/admission/vector.ts";
import { RESOURCE_FIELDS, type Task, type Worker } from "../../src/resources/types.ts";
import { readZip } from "../../src/results/zip.ts";
import { eventually, get, post } from "../support/hub.ts";
import { freePort } from "../support/recorder.ts";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const LOOM = path.join(ROOT, "bin", "loom.mjs");
const TOKEN = "e2e-hub-token-0123456789";
const AUTH = { authorization: `Bearer ${TOKEN}` };

type Proc = { name: string; child: ChildProcess; output: string[]; exit: Promise<number | null> };

let dir: string;
let url: string;
let hubProc: Proc;
const runners: Proc[] = [];

function launch(name: string, args: string[], env: NodeJS.ProcessEnv = {}): Proc {
  const child = spawn(process.execPath, [LOOM, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout.on("data", (c: Buffer) => output.push(c.toString()));
  child.stderr.on("data", (c: Buffer) => output.push(c.toString()));
  const exit = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { name, child, output, exit };
}

/** The tail of every process's output, for a failure message. */
const diag = () =>
  [hubProc, ...runners]
    .filter(Boolean)
    .map((p) => `--- ${p.name}\n${p.output.join("").slice(-3000)}`)
    .join("\n");

/** SIGTERM, then wait for the exit; SIGKILL only if it never comes (and report that). */
async function stop(p: Proc): Promise<number | null | "killed"> {
  if (p.child.exitCode !== null || p.child.signalCode !== null) return p.child.exitCode;
  p.child.kill("SIGTERM");
  const timer = new Promise<"killed">((resolve) => setTimeout(() => resolve("killed"), 30_000).unref());
  const out = await Promise.race([p.exit, timer]);
  if (out === "killed") {
    p.child.kill("SIGKILL");
    await p.exit;
  }
  return out;
}

const api = (p: string, body?: unknown) => (body === undefined ? get(url, p, AUTH) : post(url, p, body, AUTH));

const WORKERS = {
  "e2e-big": {
    max: 3,
    capacity: { cpu_millis: 4000, memory_mb: 4096, disk_mb: 10_000, gpu_count: 0 },
    caps: ["linux", "big"],
  },
  "e2e-small": {
    max: 2,
    capacity: { cpu_millis: 2000, memory_mb: 1024, disk_mb: 5000, gpu_count: 0 },
    caps: ["linux", "small"],
  },
} as const;

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), "loom-e2e-"));
  const port = await freePort();
  url = `http://127.0.0.1:${port}`;
  hubProc = launch("hub", ["hub", "--port", String(port), "--data-dir", path.join(dir, "hub"), "--log-level", "warn"], {
    LOOM_HUB_TOKEN: TOKEN,
  });
  await eventually(
    async () => (await get(url, "/api/healthz", AUTH)).status === 200,
    `the hub to listen\n${diag()}`,
    40_000,
  );
  for (const [id, w] of Object.entries(WORKERS)) {
    runners.push(
      launch(
        id,
        [
          "runner",
          "--controller",
          url,
          "--worker-id",
          id,
          "--max-concurrency",
          String(w.max),
          "--initial-concurrency",
          String(w.max),
          "--resource-capacity-json",
          JSON.stringify(w.capacity),
          ...w.caps.flatMap((c) => ["--capability", c]),
          "--connection-mode",
          "long-poll",
          "--poll-seconds",
          "1",
          "--lease-seconds",
          "60",
          "--work-dir",
          path.join(dir, id),
          "--shutdown-grace-seconds",
          "5",
        ],
        { LOOM_HUB_TOKEN: TOKEN },
      ),
    );
  }
  await eventually(
    async () => {
      const ws = (await api("/api/data/worker-capacity")).body.workers as { worker_id: string; status: string }[];
      return Object.keys(WORKERS).every((id) => ws.some((w) => w.worker_id === id && w.status === "ready"));
    },
    `both runners to register\n${diag()}`,
    40_000,
  );
}, 90_000);

afterAll(async () => {
  for (const p of [...runners, hubProc]) if (p) await stop(p);
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 90_000);

const sleepy = (what: string) => ({ runner: "shell", command: `echo ${what}; sleep 0.3` });
const shared = (id: string, cpu: number, mem: number) => ({
  task_id: id,
  payload: sleepy("hi"),
  execution_profile: { placement: "shared", resources: { cpu_millis: cpu, memory_mb: mem } },
});

const CAMPAIGN = [
  ...["s01", "s02", "s03", "s04", "s05", "s06", "s07", "s08"].map((id) => shared(id, 1000, 512)),
  {
    task_id: "x1",
    payload: sleepy("alone"),
    execution_profile: { placement: "exclusive", resources: { cpu_millis: 500, memory_mb: 256 } },
  },
  {
    task_id: "x2",
    payload: sleepy("alone"),
    execution_profile: { placement: "exclusive", resources: { cpu_millis: 500 } },
  },
  // memory only the big runner has
  {
    task_id: "big-only",
    payload: sleepy("big"),
    execution_profile: { resources: { cpu_millis: 1000, memory_mb: 3000 } },
  },
  // a capability only the small runner advertises
  { task_id: "small-only", required_capability: "small", payload: { runner: "shell", command: "echo hi" } },
  { task_id: "n1", payload: { runner: "noop" } },
  { task_id: "n2", payload: { runner: "noop" } },
  {
    task_id: "fails",
    payload: { runner: "shell", command: "echo oops >&2; exit 3" },
    execution_profile: { resources: { cpu_millis: 250 } },
  },
  { task_id: "too-big", payload: { runner: "noop" }, execution_profile: { resources: { memory_mb: 999_999 } } },
];
const EXPECTED: Record<string, string> = {
  ...Object.fromEntries(CAMPAIGN.map((t) => [t.task_id, "clean"])),
  fails: "run_error",
  "too-big": "cancelled",
};

type Row = {
  task_id: string;
  state: string;
  result_id: string | null;
  execution_profile: { placement?: string; resources: Record<string, number> };
};

describe("a mixed campaign on two runners", () => {
  const ranOn = new Map<string, string>();

  it("runs every task to its final state, and every result carries its admission snapshot", async () => {
    const d = await api("/api/tasks/dispatch", { schema_version: 1, operator: "e2e", tasks: CAMPAIGN });
    expect(d.status, JSON.stringify(d.body)).toBe(201);

    // never fits anywhere: said so at once, and cancelled so the campaign can finish
    const tooBig = (await api("/api/data/task-admission?task_id=too-big")).body;
    expect(tooBig).toMatchObject({ unsatisfiable: true, eligible_worker_count: 0 });
    for (const w of tooBig.workers) expect(w.reasons).toContain("exceeds_worker_capacity");
    expect((await api("/api/admin/cancel-task", { task_id: "too-big" })).status).toBe(200);

    const rows = await eventually(
      async () => {
        const r = (await api("/api/tasks?limit=500")).body.tasks as Row[];
        return (
          r.length === CAMPAIGN.length &&
          r.every((t) => ["clean", "run_error", "cancelled", "dirty", "lease_expired"].includes(t.state)) &&
          r
        );
      },
      `every task to be final\n${diag()}`,
      90_000,
    );
    expect(Object.fromEntries(rows.map((t) => [t.task_id, t.state]))).toEqual(EXPECTED);

    for (const t of rows.filter((x) => x.task_id !== "too-big")) {
      expect(t.result_id, t.task_id).toMatch(/^result-/);
      const res = await fetch(`${url}/api/results/${t.result_id}`, { headers: AUTH });
      expect(res.status, t.task_id).toBe(200);
      const zip = await readZip(Buffer.from(await res.arrayBuffer()));
      expect([...zip.keys()].slice(0, 4)).toEqual(["task.json", "worker-result.json", "stdout.txt", "stderr.txt"]);
      const wr = JSON.parse(zip.get("worker-result.json")!.toString());
      ranOn.set(t.task_id, wr.worker_id);
      const adm = wr.controller_concurrency?.resource_admission;
      expect(adm, `${t.task_id}: controller_concurrency.resource_admission`).toBeTruthy();
      for (const k of ["requested", "reserved_before", "available_before", "concurrency"])
        expect(adm, `${t.task_id}: ${k}`).toHaveProperty(k);
      expect(adm).toMatchObject({ ok: true, placement: t.execution_profile.placement ?? "shared" });
      const asked = normalise(t.execution_profile.resources);
      for (const f of RESOURCE_FIELDS) expect(adm.requested[f], `${t.task_id}: requested.${f}`).toBe(asked[f]);
      expect(adm.concurrency.active_count).toBeLessThan(WORKERS[wr.worker_id as keyof typeof WORKERS].max);
      if (t.execution_profile.placement === "exclusive") expect(adm.active_task_ids, t.task_id).toEqual([]);
      if (t.task_id.startsWith("s")) expect(zip.get("stdout.txt")!.toString()).toBe("hi\n");
    }
    expect(ranOn.get("big-only")).toBe("e2e-big");
    expect(ranOn.get("small-only")).toBe("e2e-small");
    expect(
      JSON.parse(
        (
          await readZip(
            Buffer.from(
              await (
                await fetch(`${url}/api/results/${rows.find((t) => t.task_id === "fails")!.result_id}`, {
                  headers: AUTH,
                })
              ).arrayBuffer(),
            ),
          )
        )
          .get("worker-result.json")!
          .toString(),
      ),
    ).toMatchObject({ exit_code: 3, verdict: "run_error" });

    const caps = (await api("/api/data/worker-capacity")).body.workers as {
      worker_id: string;
      active_task_ids: string[];
      capacity: Record<string, number>;
    }[];
    for (const w of caps) {
      expect(w.active_task_ids, w.worker_id).toEqual([]);
      expect(w.capacity).toMatchObject(WORKERS[w.worker_id as keyof typeof WORKERS].capacity);
    }
  }, 120_000);

  it("stops cleanly, and the store's history never over-reserved a worker nor shared an exclusive lease", async () => {
    for (const r of runners) expect(await stop(r), `${r.name} exit\n${diag()}`).toBe(0);
    expect(await stop(hubProc), `hub exit\n${diag()}`).toBe(0);

    const db = new Database(path.join(dir, "hub", "loom.db"), { readonly: true, fileMustExist: true });
    try {
      // the whole log is there to replay
      expect(db.prepare("SELECT compacted FROM meta").pluck().get()).toBe(0);
      const events = db
        .prepare(
          "SELECT revision, kind, name, type, json FROM events WHERE kind IN ('Task', 'Worker') ORDER BY revision, seq",
        )
        .all() as { revision: number; kind: string; name: string; type: string; json: string }[];
      const workers = new Map<string, Worker>();
      type Lease = { worker: string; placement: string; reservation: ReturnType<typeof normalise> };
      const leases = new Map<string, Lease>();
      const violations: string[] = [];
      const leasedEver = new Set<string>();
      let checkedRevisions = 0;
      let maxOnOneWorker = 0;

      const check = (rev: number) => {
        checkedRevisions++;
        const byWorker = new Map<string, [string, Lease][]>();
        for (const [task, l] of leases) byWorker.set(l.worker, [...(byWorker.get(l.worker) ?? []), [task, l]]);
        for (const [name, held] of byWorker) {
          maxOnOneWorker = Math.max(maxOnOneWorker, held.length);
          const w = workers.get(name);
          if (!w) {
            violations.push(`rev ${rev}: leases on unknown worker ${name}`);
            continue;
          }
          const cap = effectiveCapacity(w).capacity;
          for (const f of RESOURCE_FIELDS) {
            const sum = held.reduce((s, [, l]) => s + l.reservation[f], 0);
            if (sum > cap[f])
              violations.push(
                `rev ${rev}: ${name} ${f} reserved ${sum} > capacity ${cap[f]} (${held.map(([t]) => t).join(", ")})`,
              );
          }
          const max = w.spec.max_concurrency ?? w.status?.registration?.max_concurrency ?? 1;
          if (held.length > max)
            violations.push(`rev ${rev}: ${name} has ${held.length} leases > max_concurrency ${max}`);
          if (held.some(([, l]) => l.placement === "exclusive") && held.length > 1)
            violations.push(`rev ${rev}: ${name} shares an exclusive lease: ${held.map(([t]) => t).join(", ")}`);
        }
      };

      for (let i = 0; i < events.length;) {
        const rev = events[i].revision;
        for (; i < events.length && events[i].revision === rev; i++) {
          const e = events[i];
          const obj = JSON.parse(e.json);
          if (e.kind === "Worker") {
            if (e.type === "DELETED") workers.delete(e.name);
            else workers.set(e.name, obj as Worker);
            continue;
          }
          const t = obj as Task;
          const lease = t.status?.lease;
          if (e.type !== "DELETED" && lease && (t.status?.state === "leased" || t.status?.state === "running")) {
            const reservation = normalise(lease.reservation);
            const asked = normalise(t.spec.execution_profile?.resources);
            if (RESOURCE_FIELDS.some((f) => reservation[f] !== asked[f]))
              violations.push(
                `rev ${rev}: ${e.name} reserves ${JSON.stringify(reservation)} but asks ${JSON.stringify(asked)}`,
              );
            leases.set(e.name, {
              worker: lease.worker,
              placement: lease.placement ?? t.spec.execution_profile?.placement ?? "shared",
              reservation,
            });
            leasedEver.add(e.name);
          } else leases.delete(e.name);
        }
        check(rev);
      }

      expect(violations).toEqual([]);
      expect(leases.size).toBe(0);
      expect([...leasedEver].sort()).toEqual(
        CAMPAIGN.map((t) => t.task_id)
          .filter((id) => id !== "too-big")
          .sort(),
      );
      expect(checkedRevisions).toBeGreaterThan(CAMPAIGN.length);
      // the runners did run work side by side, so the checks above were not vacuous
      expect(maxOnOneWorker).toBeGreaterThan(1);
    } finally {
      db.close();
    }
  }, 90_000);
});
