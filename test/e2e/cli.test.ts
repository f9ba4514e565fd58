// The `loom` binary against a live Hub on loopback: tables, `-o json` equal to the API's own
// answer, exit codes (0 ok, 1 the Hub said no or is unreachable, 2 bad usage), apply, cordon
// and watch. Each `node bin/loom.mjs` costs about half a second, so independent runs go in
// parallel and the Hub is shared by the whole file.
import { execFile, spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Run = { code: number; stdout: string; stderr: string };
type Json = Record<string, any>;

const ROOT = join(import.meta.dirname, "..", "..");
const API = "/apis/loom.dev/v1alpha1";
const cleanEnv = () => {
  const env = { ...process.env };
  delete env.LOOM_HUB_TOKEN;
  delete env.LOOM_CONTROLLER;
  return env;
};

function run(args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  return new Promise((resolve) => {
    execFile(process.execPath, ["bin/loom.mjs", ...args], { cwd: ROOT, env }, (e, stdout, stderr) => {
      resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr });
    });
  });
}

let h: TestHub;
let dir: string;
const loom = (...args: string[]) => run([...args, "--controller", h.url]);
const lineOf = (text: string, first: string) => text.split("\n").find((l) => l.split(/\s+/)[0] === first) ?? "";

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "loom-cli-"));
  // No Runner heartbeats here: a long grace keeps the workers Ready however slow the machine is.
  h = await startHub({ heartbeatGraceSeconds: 3600 });
  const reg = async (id: string, cap: Json) =>
    expect((await post(h.url, "/api/workers/register", registerBody(id, { resource_capacity: cap }))).status).toBe(200);
  await reg("w1", { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 });
  await reg("w2", { cpu_millis: 2000, memory_mb: 2048, disk_mb: 30000, gpu_count: 0 });
  await reg("w3", { cpu_millis: 1000, memory_mb: 1024, disk_mb: 10000, gpu_count: 0 });
  const profile = (resources: Json) => ({ placement: "shared", resources });
  const dispatch = async (tasks: Json[]) =>
    expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
  const task = (task_id: string, resources?: Json) => ({
    task_id,
    required_capability: "",
    payload: { runner: "noop" },
    ...(resources ? { execution_profile: profile(resources) } : {}),
  });
  // t-fit alone first, so w1's claim takes it and not t-big
  await dispatch([task("t-fit", { cpu_millis: 750, memory_mb: 1536, disk_mb: 2048 })]);
  const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1, lease_seconds: 600 });
  expect(claim.body.tasks.map((t: Json) => t.task_id)).toEqual(["t-fit"]);
  await dispatch([task("t-big", { memory_mb: 5000 }), task("t-ops")]);
  // Let the controllers settle: every worker Ready, t-big's Admitted condition written, events flushed.
  await eventually(async () => {
    const ws = (await get(h.url, `${API}/workers`)).body.items as Json[];
    const big = (await get(h.url, `${API}/tasks/t-big`)).body as Json;
    const evs = (await get(h.url, `${API}/events`)).body.items as Json[];
    return (
      ws.length === 3 &&
      ws.every((w) => w.status?.conditions?.some((c: Json) => c.type === "Ready" && c.status === "True")) &&
      big.status?.conditions?.some((c: Json) => c.type === "Admitted" && c.status === "False") &&
      evs.some((e) => e.involvedObject?.name === "t-fit" && e.reason === "LeaseGranted")
    );
  }, "the Hub to settle");
});

afterAll(async () => {
  await h?.close();
  await rm(dir, { recursive: true, force: true });
});

describe("loom get", () => {
  it("prints workers with the CRD columns and reserved/capacity per dimension, aligned", async () => {
    const r = await loom("get", "workers");
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trimEnd().split("\n");
    expect(lines[0]).toMatch(/^NAME\s+READY\s+ACTIVE\/LIMIT\s+CPU\s+MEM\s+DISK\s+GPU\s+AGE$/);
    expect(lineOf(r.stdout, "w2").split(/\s+/)).toEqual([
      "w2",
      "True",
      "0/4",
      "0m/2000m",
      "0/2048Mi",
      "0/30000Mi",
      "0/0",
      expect.stringMatching(/^\d+s$/),
    ]);
    // columns line up: every row's CPU cell starts under the CPU header
    const at = lines[0].indexOf("CPU");
    for (const l of lines.slice(1)) expect(l.slice(at)).toMatch(/^\d+m\/\d+m /);
  });

  it("prints tasks with STATE, WORKER, ATTEMPT, REQUESTS and the Admitted reason of a task that does not fit", async () => {
    const [all, queuedWide] = await Promise.all([
      loom("get", "tasks"),
      loom("get", "lt", "--state", "queued", "-o", "wide"),
    ]);
    expect(all.code, all.stderr).toBe(0);
    expect(all.stdout.split("\n")[0]).toMatch(/^NAME\s+STATE\s+WORKER\s+ATTEMPT\s+REQUESTS\s+REASON\s+AGE$/);
    expect(lineOf(all.stdout, "t-fit")).toMatch(
      /^t-fit\s+leased\s+w1\s+1\s+cpu=750m,mem=1536Mi,disk=2048Mi\s+<none>\s+\d+s$/,
    );
    const big = (await get(h.url, `${API}/tasks/t-big`)).body as Json;
    const reason = big.status.conditions.find((c: Json) => c.type === "Admitted").reason;
    expect(lineOf(all.stdout, "t-big")).toMatch(
      new RegExp(`^t-big\\s+queued\\s+<none>\\s+1\\s+mem=5000Mi\\s+${reason}\\s+\\d+s$`),
    );

    // --state is the field selector status.state=queued; -o wide adds the priority-1 columns
    expect(queuedWide.stdout.split("\n")[0]).toMatch(
      /^NAME\s+STATE\s+WORKER\s+ATTEMPT\s+PLACEMENT\s+REQUESTS\s+POSITION\s+CAMPAIGN\s+REASON\s+AGE$/,
    );
    expect(
      queuedWide.stdout
        .trimEnd()
        .split("\n")
        .slice(1)
        .map((l) => l.split(/\s+/)[0])
        .sort(),
    ).toEqual(["t-big", "t-ops"]);
    // Same priority and dispatch: the name decides, and both compete for w1.
    expect(lineOf(queuedWide.stdout, "t-big")).toMatch(/^t-big\s+queued\s+<none>\s+1\s+shared\s+mem=5000Mi\s+1\s/);
    expect(lineOf(queuedWide.stdout, "t-ops")).toMatch(/^t-ops\s+queued\s+<none>\s+1\s+shared\s+-\s+2\s/);
  });

  it("-o json prints exactly what the API returned", async () => {
    const [list, one, adm] = await Promise.all([
      loom("get", "tasks", "-o", "json"),
      loom("get", "worker", "w1", "-o", "json"),
      loom("task-admission", "--task-id", "t-big", "-o", "json"),
    ]);
    for (const r of [list, one, adm]) expect(r.code, r.stderr).toBe(0);
    const [apiList, apiOne, apiAdm] = await Promise.all([
      get(h.url, `${API}/tasks`),
      get(h.url, `${API}/workers/w1`),
      get(h.url, "/api/data/task-admission?task_id=t-big"),
    ]);
    const cliList = JSON.parse(list.stdout);
    // The list's resourceVersion is the store's revision, which Events move on; the items are the answer.
    expect({ ...cliList, metadata: undefined }).toEqual({ ...apiList.body, metadata: undefined });
    expect(cliList.kind).toBe("TaskList");
    expect(JSON.parse(one.stdout)).toEqual(apiOne.body);
    expect(JSON.parse(adm.stdout)).toEqual(apiAdm.body);
  });

  it("watch prints a row when a task changes, without the headers again, and Ctrl-C ends it", async () => {
    const child = spawn(process.execPath, ["bin/loom.mjs", "get", "tasks", "-w", "--controller", h.url], {
      cwd: ROOT,
      env: cleanEnv(),
    });
    let stdout = "";
    child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      await eventually(() => lineOf(stdout, "t-big"), "the initial list");
      expect(
        (
          await post(h.url, "/api/tasks/dispatch", {
            schema_version: 1,
            tasks: [{ task_id: "t-watch", required_capability: "", payload: { runner: "noop" } }],
          })
        ).status,
      ).toBe(201);
      await eventually(() => /^t-watch\s+queued\s/m.test(stdout), "the new task's row");
      expect((await post(h.url, "/api/admin/cancel-task", { task_id: "t-watch" })).status).toBe(200);
      await eventually(() => /^t-watch\s+cancelled\s/m.test(stdout), "the cancelled row");
      expect(stdout.match(/^NAME\s/gm)).toHaveLength(1);
    } finally {
      child.kill("SIGINT");
    }
    expect(await exited).toBe(0);
  });
});

describe("loom simulate", () => {
  it("prints what the changes in a file would admit, in order, and the Hub's answer unchanged as JSON when piped", async () => {
    // Not in `dir`: another test applies every file there.
    const simDir = await mkdtemp(join(tmpdir(), "loom-sim-"));
    const file = join(simDir, "changes.yaml");
    // Cancelling t-fit empties w1: t-big (5000 MB) fits there, then t-ops beside it.
    await writeFile(file, "cancel_tasks:\n  - t-fit\n");
    const [table, json] = await Promise.all([
      loom("simulate", "-f", file, "-o", "table"),
      loom("simulate", "-f", file),
    ]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout).toMatch(
      /^2 of 2 queued tasks would be admitted \(1 without the changes\); 0 would stay queued$/m,
    );
    expect(table.stdout).toMatch(/^ORDER\s+TASK\s+WORKER\n1\s+t-big\s+w1\n2\s+t-ops\s+w1$/m);
    expect(JSON.parse(json.stdout)).toEqual((await post(h.url, "/api/simulate", { cancel_tasks: ["t-fit"] })).body);
    await rm(simDir, { recursive: true, force: true });
  });
});

describe("loom describe", () => {
  it("a task that fits nowhere: conditions, and per worker every reason and shortfall as need/free", async () => {
    const r = await loom("describe", "task", "t-big");
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Name:\s+t-big$/m);
    expect(r.stdout).toMatch(/^  Requests:\s+mem=5000Mi$/m);
    expect(r.stdout).toMatch(
      /^Conditions:\n  TYPE\s+STATUS\s+REASON\s+MESSAGE\n  Admitted\s+False\s+\S+\s+0\/3 workers admit/m,
    );
    expect(r.stdout).toMatch(/^Lease:\s+<none>$/m);
    expect(r.stdout).toMatch(/^  WORKER\s+OK\s+REASON\s+SHORTFALLS$/m);
    // w1 holds t-fit's 1536 MB: 6144 - 1536 = 4608 free; w2 and w3 are too small even empty
    expect(r.stdout).toMatch(/^  w1\s+false\s+resource_reservation_unavailable\s+memory_mb 5000\/4608$/m);
    expect(r.stdout).toMatch(/^  w2\s+false\s+exceeds_worker_capacity\s+memory_mb 5000\/2048$/m);
    expect(r.stdout).toMatch(/^  w3\s+false\s+exceeds_worker_capacity\s+memory_mb 5000\/1024$/m);
    // Why pending: first in the queue, waiting only on t-fit's lease, and a smaller request that fits now.
    expect(r.stdout).toMatch(/^  Queue Position:\s+1 \(0 queued ahead for the same workers\)$/m);
    expect(r.stdout).toMatch(/^  Waiting On:\n    fits on w1 when t-fit ends, no run time declared$/m);
    expect(r.stdout).toMatch(/^    lower memory_mb 5000 -> 4608 to fit w1 now$/m);
    expect(r.stdout).toMatch(/^    fits w1 once its blocking leases end$/m);
    expect(r.stdout).toMatch(/^Events:\n  TYPE\s+REASON\s+AGE\s+FROM\s+MESSAGE\n  Normal\s+Dispatched\s/m);
  });

  it("a leased task shows its lease with the reservation and admission snapshot; a worker its headroom and leases", async () => {
    const [task, worker] = await Promise.all([loom("describe", "task", "t-fit"), loom("describe", "lw", "w1")]);
    expect(task.code, task.stderr).toBe(0);
    expect(task.stdout).toMatch(/^Lease:\n  Worker:\s+w1\n  Epoch:\s+1\n/m);
    expect(task.stdout).toMatch(/^  Reservation:\s+cpu=750m,mem=1536Mi,disk=2048Mi,gpu=0$/m);
    expect(task.stdout).toMatch(/^  Available Before:\s+cpu=4000m,mem=6144Mi,disk=30000Mi,gpu=0$/m);
    expect(task.stdout).toMatch(/^  Normal\s+LeaseGranted\s/m);

    expect(worker.code, worker.stderr).toBe(0);
    expect(worker.stdout).toMatch(/^  Active\/Limit:\s+1\/4$/m);
    expect(worker.stdout).toMatch(/^  cpu_millis\s+4000\s+750\s+3250$/m);
    expect(worker.stdout).toMatch(/^  memory_mb\s+6144\s+1536\s+4608$/m);
    expect(worker.stdout).toMatch(/^Active Leases:\n  TASK\s+STATE.*\n  t-fit\s+leased\s+shared\s+1\s/m);
    expect(worker.stdout).toMatch(/^  Ready\s+True\s+RunnerAlive/m);
  });
});

describe("the contract's verbs", () => {
  it("worker-capacity and task-admission print the numbers; top draws bars without colors when piped", async () => {
    const [cap, adm, top] = await Promise.all([
      loom("worker-capacity", "-o", "table"),
      loom("task-admission", "--task-id", "t-big", "-o", "table"),
      loom("top", "workers"),
    ]);
    expect(cap.code, cap.stderr).toBe(0);
    expect(lineOf(cap.stdout, "w1").split(/\s+/)).toEqual([
      "w1",
      "ready",
      "1/4",
      "750m/4000m",
      "1536/6144Mi",
      "2048/30000Mi",
      "0/0",
      "cpu=3250m,mem=4608Mi,disk=27952Mi,gpu=0",
    ]);

    const api = (await get(h.url, "/api/data/task-admission?task_id=t-big")).body;
    expect(adm.code, adm.stderr).toBe(0);
    expect(adm.stdout.split("\n")[0]).toBe(api.summary);
    expect(lineOf(adm.stdout, "w2")).toMatch(/^w2\s+false\s+exceeds_worker_capacity\s+0\/4\s+memory_mb 5000\/2048$/);

    expect(top.code, top.stderr).toBe(0);
    expect(top.stdout).not.toContain("\x1b[");
    expect(lineOf(top.stdout, "w1")).toMatch(
      /^w1\s+ready\s+1\/4\s+\[##\.{8}\]\s+19% 750m\/4000m\s+\[###\.{7}\]\s+25% 1536\/6144Mi\s/,
    );
  });

  it("dispatch-repo-run sends the profile from its flags and reports created, then the repeated id as a conflict", async () => {
    const args = [
      "dispatch-repo-run",
      "--repo-url",
      "https://example.invalid/eval.git",
      "--command",
      "python3 run_eval.py",
      "--placement",
      "exclusive",
      "--cpu-millis",
      "2000",
      "--memory-mb",
      "4096",
      "--task-id",
      "repo-1",
      "--run-id",
      "001",
      "--required-capability",
      "linux",
    ];
    const first = await loom(...args, "-o", "table");
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toBe("task/repo-1 created\n");
    const t = (await get(h.url, `${API}/tasks/repo-1`)).body;
    expect(t.spec.execution_profile).toEqual({
      placement: "exclusive",
      resources: { cpu_millis: 2000, memory_mb: 4096 },
    });
    expect(t.spec.payload.source).toEqual({ type: "git", url: "https://example.invalid/eval.git" });
    const again = await loom(...args, "-o", "json");
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/^error: task_id_conflict: task "repo-1" already exists \(queued\)/);
    expect(JSON.parse(again.stdout)).toEqual({
      created: [],
      existing: [expect.objectContaining({ task_id: "repo-1", state: "queued" })],
    });
  });
});

describe("errors and exit codes", () => {
  it("the Hub's refusals exit 1 with the reason on stderr; bad usage exits 2 naming the flag; nothing on stdout", async () => {
    const before = (await get(h.url, `${API}/tasks`)).body.items.length;
    const [unknownTask, admission, badFlag, badState] = await Promise.all([
      loom("describe", "task", "nope"),
      loom("task-admission", "--task-id", "nope"),
      loom("dispatch-repo-run", "--repo-url", "x", "--command", "y", "--cpu-millis", "abc"),
      loom("get", "tasks", "--state", "sleeping"),
    ]);
    expect(unknownTask).toMatchObject({ code: 1, stdout: "" });
    expect(unknownTask.stderr).toBe('error: NotFound: task "nope" not found\n');
    expect(admission).toMatchObject({ code: 1, stdout: "" });
    expect(admission.stderr).toBe('error: task_not_found: no task named "nope"\n');
    expect(badFlag).toMatchObject({ code: 2, stdout: "" });
    expect(badFlag.stderr).toMatch(
      /^error: option '--cpu-millis <n>' argument 'abc' is invalid\. --cpu-millis must be a whole number/,
    );
    expect((await get(h.url, `${API}/tasks`)).body.items.length).toBe(before);
    expect(badState).toMatchObject({ code: 2, stdout: "" });
    expect(badState.stderr).toMatch(/^error: --state: unknown state "sleeping"/);
  });

  it("an unreachable Hub exits 1 and names the URL", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const r = await run(["get", "workers", "--controller", `http://127.0.0.1:${port}`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      new RegExp(`^error: cannot reach the Hub at http://127\\.0\\.0\\.1:${port}: ECONNREFUSED`),
    );
  });

  it("sends LOOM_HUB_TOKEN as a bearer token and never prints it", async () => {
    const token = "s3cret-token-for-the-cli-test";
    const secured = await startHub({ env: { LOOM_HUB_TOKEN: token } });
    try {
      const [wrong, withToken] = await Promise.all([
        run(["get", "workers", "--controller", secured.url], { ...cleanEnv(), LOOM_HUB_TOKEN: "wrong-token" }),
        // the program-level flag, before the verb, works as well
        run(["--controller", secured.url, "get", "workers"], { ...cleanEnv(), LOOM_HUB_TOKEN: token }),
      ]);
      expect(wrong.code).toBe(1);
      expect(wrong.stderr).toMatch(/^error: Unauthorized: /);
      expect(wrong.stdout + wrong.stderr).not.toContain("wrong-token");
      expect(withToken.code, withToken.stderr).toBe(0);
      expect(withToken.stderr).toBe("No resources found.\n");
      expect(withToken.stdout + withToken.stderr).not.toContain(token);
    } finally {
      await secured.close();
    }
  });
});

describe("changing things", () => {
  const workerYaml = (cpu: number, tier: string) => `apiVersion: loom.dev/v1alpha1
kind: Worker
metadata:
  name: evaluation-01
  labels:
    tier: ${tier}
spec:
  host: 10.0.0.5
  connection_mode: long-poll
  max_concurrency: 4
  resource_capacity:
    cpu_millis: ${cpu}
    memory_mb: 6144
`;

  it("apply creates, leaves unchanged, previews with --dry-run writing nothing, configures, and delete removes", async () => {
    const file = join(dir, "worker.yaml");
    await writeFile(file, workerYaml(4000, "cpu"));
    const created = await loom("apply", "-f", file);
    expect(created.code, created.stderr).toBe(0);
    expect(created.stdout).toBe("worker/evaluation-01 created\n");
    expect((await get(h.url, `${API}/workers/evaluation-01`)).body.spec.resource_capacity.cpu_millis).toBe(4000);

    expect((await loom("apply", "-f", dir)).stdout).toBe("worker/evaluation-01 unchanged\n");

    await writeFile(file, workerYaml(8000, "big"));
    const dry = await loom("apply", "-f", file, "--dry-run");
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toBe(
      'worker/evaluation-01 configured (dry run)\n  metadata.labels.tier: "cpu" -> "big"\n  spec.resource_capacity.cpu_millis: 4000 -> 8000\n',
    );
    const untouched = (await get(h.url, `${API}/workers/evaluation-01`)).body;
    expect([untouched.spec.resource_capacity.cpu_millis, untouched.metadata.labels.tier]).toEqual([4000, "cpu"]);

    const configured = await loom("apply", "-f", file);
    expect(configured.stdout).toBe("worker/evaluation-01 configured\n");
    const now = (await get(h.url, `${API}/workers/evaluation-01`)).body;
    expect([now.spec.resource_capacity.cpu_millis, now.metadata.labels.tier]).toEqual([8000, "big"]);

    const del = await loom("delete", "worker", "evaluation-01");
    expect(del.stdout).toBe("worker/evaluation-01 deleted\n");
    expect((await get(h.url, `${API}/workers/evaluation-01`)).status).toBe(404);
  });

  it("apply of an invalid file prints every error with its file and field, exits 1 and stores nothing", async () => {
    const bad = join(dir, "bad.yaml");
    await writeFile(
      bad,
      `apiVersion: loom.dev/v1alpha1
kind: Worker
metadata:
  name: evaluation-02
spec:
  max_concurrency: 0
  resource_capacity:
    cpu_millis: lots
`,
    );
    const good = join(dir, "good.json");
    await writeFile(
      good,
      JSON.stringify({
        inventory_version: 1,
        workers: [
          { worker_id: "inv-01", host: "h", connection_mode: "ssh-start", max_concurrency: 2, initial_concurrency: 1 },
        ],
      }),
    );
    const r = await loom("apply", "-f", bad, "-f", good);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toMatch(new RegExp(`^${bad}:6: Worker/evaluation-02: spec\\.max_concurrency: `, "m"));
    expect(r.stderr).toMatch(
      new RegExp(`^${bad}:8: Worker/evaluation-02: spec\\.resource_capacity\\.cpu_millis: `, "m"),
    );
    expect(r.stderr).toMatch(/^error: Invalid: 2 error\(s\) in .*; nothing was applied$/m);
    // the valid file was not applied either
    expect((await get(h.url, `${API}/workers/evaluation-02`)).status).toBe(404);
    expect((await get(h.url, `${API}/workers/inv-01`)).status).toBe(404);
  });

  it("cordon shows in get; cancel, retry and set-concurrency say what they did", async () => {
    const [cordon, cancel, conc] = await Promise.all([
      loom("cordon", "w3"),
      loom("cancel", "t-ops"),
      loom("set-concurrency", "w2", "2"),
    ]);
    expect(cordon.stdout).toBe("worker/w3 cordoned\n");
    expect(cancel.stdout).toBe("task/t-ops cancelled (was queued)\n");
    expect(conc.stdout).toBe("worker/w2 desired concurrency 2 (max 4)\n");
    const [got, retry] = await Promise.all([
      loom("get", "worker", "w3"),
      loom("retry", "t-ops", "--preserve-excluded-workers"),
    ]);
    expect(lineOf(got.stdout, "w3")).toMatch(/^w3\s+True,SchedulingDisabled\s/);
    expect(retry.stdout).toBe("task/t-ops retry_queued (was cancelled, attempt 2)\n");
    expect((await get(h.url, `${API}/workers/w3`)).body.spec.unschedulable).toBe(true);
    expect((await get(h.url, `${API}/tasks/t-ops`)).body.status.state).toBe("retry_queued");
  });
});
