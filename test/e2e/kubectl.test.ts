// The real kubectl against a live Hub: discovery, server-side Tables (the same cells as
// `loom get`), -o yaml|wide, selectors, short names, describe with Events, get -w, the
// writes (apply, merge and JSON patch, server-side apply with two field managers, label,
// delete), a rejected apply, and a bearer token over HTTPS. Data is set up through the Hub's HTTP API; each kubectl run costs about 0.3 s, so
// independent runs go in parallel and one Hub serves the whole file (a second one, with
// TLS and a token, serves the token tests).
//
// kubectl is given --kubeconfig files written by `loom kubeconfig`, its own --cache-dir
// (discovery is cached per host:port, and ports are reused), and no KUBECONFIG from outside.
import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { eventually, get, post, registerBody, startHub, type TestHub } from "../support/hub.ts";

type Run = { code: number; stdout: string; stderr: string };
type Json = Record<string, any>;

const KUBECTL = "/usr/bin/kubectl";
const HAVE_KUBECTL = existsSync(KUBECTL);
const ROOT = join(import.meta.dirname, "..", "..");
const API = "/apis/loom.dev/v1alpha1";

const cleanEnv = (extra: Record<string, string> = {}) => {
  const env = { ...process.env };
  for (const k of ["LOOM_HUB_TOKEN", "LOOM_CONTROLLER", "KUBECONFIG"]) delete env[k];
  return { ...env, ...extra };
};

function run(file: string, args: string[], env: NodeJS.ProcessEnv = cleanEnv()): Promise<Run> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env, timeout: 20_000 }, (e, stdout, stderr) => {
      resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr });
    });
  });
}

const loomBin = (args: string[], env?: NodeJS.ProcessEnv) => run(process.execPath, ["bin/loom.mjs", ...args], env);

/**
 * A printed table as header names and rows of cells, cut at the header's column starts (so
 * an empty cell stays a cell, and the spacing between columns does not matter).
 */
function parseTable(text: string): { headers: string[]; rows: string[][] } {
  const lines = text.split("\n").filter((l) => l.trim() !== "");
  if (!lines.length) return { headers: [], rows: [] };
  const starts: number[] = [];
  const headers: string[] = [];
  for (const m of lines[0].matchAll(/\S+(?: \S+)*/g)) {
    starts.push(m.index);
    headers.push(m[0]);
  }
  const rows = lines
    .slice(1)
    .map((l) => starts.map((s, i) => l.slice(s, i + 1 < starts.length ? starts[i + 1] : undefined).trim()));
  return { headers, rows };
}

/** Rows keyed by their first cell, the AGE cell left out. */
function rowsWithoutAge(t: { headers: string[]; rows: string[][] }): Record<string, string[]> {
  const age = t.headers.indexOf("AGE");
  return Object.fromEntries(t.rows.map((r) => [r[0], r.filter((_, i) => i !== age)]));
}

/** A JSON request over HTTPS that trusts `ca` (fetch cannot be given a CA). */
function httpsJson(
  url: string,
  path: string,
  method: string,
  body: unknown,
  token: string,
  ca: Buffer,
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = httpsRequest(
      url + path,
      {
        method,
        ca,
        headers: { authorization: `Bearer ${token}`, ...(data ? { "content-type": "application/json" } : {}) },
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
      },
    );
    req.on("error", reject);
    req.end(data);
  });
}

const suite = HAVE_KUBECTL ? describe : describe.skip;
const title = HAVE_KUBECTL
  ? "kubectl against a live Hub"
  : `kubectl against a live Hub (SKIPPED: ${KUBECTL} is not installed)`;

suite(title, () => {
  let h: TestHub;
  let dir: string;
  let kubeconfigPath: string;
  const kubectl = (...args: string[]) =>
    run(KUBECTL, ["--kubeconfig", kubeconfigPath, "--cache-dir", join(dir, "kube-cache"), ...args]);
  const loom = (...args: string[]) => loomBin([...args, "--controller", h.url]);

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-kubectl-"));
    // No Runner heartbeats here: a long grace keeps the workers Ready however slow the machine is.
    h = await startHub({ heartbeatGraceSeconds: 3600 });
    const kc = await loomBin(["kubeconfig", "--controller", h.url]);
    expect(kc.code, kc.stderr).toBe(0);
    const doc = parseYaml(kc.stdout) as Json;
    expect(doc.clusters[0].cluster.server).toBe(h.url);
    expect(doc.users[0].user).toEqual({}); // no token in the environment: none in the kubeconfig
    kubeconfigPath = join(dir, "kubeconfig");
    await writeFile(kubeconfigPath, kc.stdout);

    const reg = async (id: string, cap: Json) =>
      expect((await post(h.url, "/api/workers/register", registerBody(id, { resource_capacity: cap }))).status).toBe(
        200,
      );
    await reg("w1", { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 });
    await reg("w2", { cpu_millis: 2000, memory_mb: 2048, disk_mb: 30000, gpu_count: 0 });
    // A declared worker with a host and a mode (the priority-1 columns), never registered: not
    // Ready. Its capacity is declared: unknown capacity would keep t-big from being Unsatisfiable.
    const created = await post(h.url, `${API}/workers`, {
      metadata: { name: "w-static", labels: { tier: "silver" } },
      spec: {
        host: "static-1.example",
        connection_mode: "long-poll",
        max_concurrency: 2,
        resource_capacity: { cpu_millis: 1000, memory_mb: 1024, disk_mb: 10000, gpu_count: 0 },
      },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);

    const dispatch = async (tasks: Json[]) =>
      expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
    const task = (task_id: string, extra: Json = {}) => ({
      task_id,
      required_capability: "",
      payload: { runner: "noop" },
      ...extra,
    });
    const profile = (resources: Json) => ({ execution_profile: { placement: "shared", resources } });
    // t-fit alone first, so w1's claim takes it
    await dispatch([task("t-fit", profile({ cpu_millis: 750, memory_mb: 1536, disk_mb: 2048 }))]);
    const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1, lease_seconds: 600 });
    expect(claim.body.tasks.map((t: Json) => t.task_id)).toEqual(["t-fit"]);
    // t-big fits on no worker even when empty; t-camp belongs to campaign c1 (label loom.dev/campaign=c1)
    await dispatch([task("t-big", profile({ memory_mb: 50_000 })), task("t-camp", { campaign_id: "c1" })]);
    // Let the controllers settle: workers' conditions written, t-big Unsatisfiable, events flushed.
    await eventually(async () => {
      const ws = (await get(h.url, `${API}/workers`)).body.items as Json[];
      const big = (await get(h.url, `${API}/tasks/t-big`)).body as Json;
      const evs = (await get(h.url, `${API}/events`)).body.items as Json[];
      const ready = (w: Json) => w.status?.conditions?.some((c: Json) => c.type === "Ready" && c.status === "True");
      return (
        ws.length === 3 &&
        ready(ws.find((w) => w.metadata.name === "w1")!) &&
        ready(ws.find((w) => w.metadata.name === "w2")!) &&
        ws.find((w) => w.metadata.name === "w-static")?.status?.conditions?.some((c: Json) => c.type === "Ready") &&
        big.status?.conditions?.some((c: Json) => c.type === "Unsatisfiable" && c.status === "True") &&
        evs.some((e) => e.involvedObject?.name === "t-big" && e.reason === "Unsatisfiable") &&
        evs.some((e) => e.involvedObject?.name === "t-fit" && e.reason === "LeaseGranted")
      );
    }, "the Hub to settle");
  });

  afterAll(async () => {
    await h?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  describe("get", () => {
    it("workers and tasks: the same columns and cells as `loom get` (AGE and spacing aside)", async () => {
      const [kw, lw, kt, lt] = await Promise.all([
        kubectl("get", "workers"),
        loom("get", "workers"),
        kubectl("get", "tasks"),
        loom("get", "tasks"),
      ]);
      for (const r of [kw, lw, kt, lt]) expect(r.code, r.stderr).toBe(0);

      const kWorkers = parseTable(kw.stdout);
      const lWorkers = parseTable(lw.stdout);
      expect(kWorkers.headers).toEqual(["NAME", "READY", "ACTIVE/LIMIT", "CPU", "MEM", "DISK", "GPU", "AGE"]);
      expect(kWorkers.headers).toEqual(lWorkers.headers);
      expect(rowsWithoutAge(kWorkers)).toEqual(rowsWithoutAge(lWorkers));
      expect(Object.keys(rowsWithoutAge(kWorkers)).sort()).toEqual(["w-static", "w1", "w2"]);
      expect(rowsWithoutAge(kWorkers)["w1"]).toEqual([
        "w1",
        "True",
        "1/4",
        "750m/4000m",
        "1536/6144Mi",
        "2048/30000Mi",
        "0/0",
      ]);
      for (const r of kWorkers.rows) expect(r[kWorkers.headers.indexOf("AGE")]).toMatch(/^\d+[smhd]/);

      const kTasks = parseTable(kt.stdout);
      const lTasks = parseTable(lt.stdout);
      expect(kTasks.headers).toEqual(["NAME", "STATE", "WORKER", "ATTEMPT", "REQUESTS", "REASON", "AGE"]);
      expect(kTasks.headers).toEqual(lTasks.headers);
      expect(rowsWithoutAge(kTasks)).toEqual(rowsWithoutAge(lTasks));
      expect(Object.keys(rowsWithoutAge(kTasks)).sort()).toEqual(["t-big", "t-camp", "t-fit"]);
      expect(rowsWithoutAge(kTasks)["t-fit"]).toEqual([
        "t-fit",
        "leased",
        "w1",
        "1",
        "cpu=750m,mem=1536Mi,disk=2048Mi",
        "<none>",
      ]);
      expect(rowsWithoutAge(kTasks)["t-big"]).toEqual([
        "t-big",
        "queued",
        "<none>",
        "1",
        "mem=50000Mi",
        "exceeds_worker_capacity",
      ]);
    });

    it("-o wide adds the priority-1 columns (MODE, HOST for workers; PLACEMENT, CAMPAIGN for tasks), as `loom get -o wide` does", async () => {
      const [kw, lw, kt, lt] = await Promise.all([
        kubectl("get", "workers", "-o", "wide"),
        loom("get", "workers", "-o", "wide"),
        kubectl("get", "tasks", "-o", "wide"),
        loom("get", "tasks", "-o", "wide"),
      ]);
      for (const r of [kw, lw, kt, lt]) expect(r.code, r.stderr).toBe(0);
      const kWorkers = parseTable(kw.stdout);
      expect(kWorkers.headers).toEqual([
        "NAME",
        "READY",
        "ACTIVE/LIMIT",
        "CPU",
        "MEM",
        "DISK",
        "GPU",
        "MODE",
        "HOST",
        "AGE",
      ]);
      expect(kWorkers.headers).toEqual(parseTable(lw.stdout).headers);
      expect(rowsWithoutAge(kWorkers)).toEqual(rowsWithoutAge(parseTable(lw.stdout)));
      const st = rowsWithoutAge(kWorkers)["w-static"];
      expect(st.slice(-2)).toEqual(["long-poll", "static-1.example"]);
      expect(st[1]).toBe("False");

      // POSITION is derived from the whole queue, never stored: the Hub's Table computes it as `loom get` does.
      const kTasks = parseTable(kt.stdout);
      expect(kTasks.headers).toEqual([
        "NAME",
        "STATE",
        "WORKER",
        "ATTEMPT",
        "PLACEMENT",
        "REQUESTS",
        "POSITION",
        "CAMPAIGN",
        "REASON",
        "AGE",
      ]);
      expect(kTasks.headers).toEqual(parseTable(lt.stdout).headers);
      expect(rowsWithoutAge(kTasks)).toEqual(rowsWithoutAge(parseTable(lt.stdout)));
      expect(rowsWithoutAge(kTasks)["t-camp"][7]).toBe("c1");
      expect(rowsWithoutAge(kTasks)["t-fit"][6]).toBe("<none>"); // leased: not in the queue
      expect(rowsWithoutAge(kTasks)["t-camp"][6]).toMatch(/^[12]$/);
    });

    it("-o yaml prints the object the resource API serves; a list's items likewise", async () => {
      // A controller may write between the two reads: compare once both saw the same resourceVersion.
      const same = async (kubectlArgs: string[], path: string) =>
        eventually(
          async () => {
            const r = await kubectl(...kubectlArgs);
            if (r.code !== 0) throw new Error(r.stderr);
            const y = parseYaml(r.stdout) as Json;
            const api = (await get(h.url, path)).body as Json;
            const rv = (o: Json) =>
              Array.isArray(o.items)
                ? o.items.map((i: Json) => i.metadata.resourceVersion).join()
                : o.metadata.resourceVersion;
            return rv(y) === rv(api) && ([y, api] as const);
          },
          `kubectl ${kubectlArgs.join(" ")} and GET ${path} to agree on a resourceVersion`,
        );

      const [[worker, apiWorker], [task, apiTask], [list, apiList]] = await Promise.all([
        same(["get", "worker", "w1", "-o", "yaml"], `${API}/workers/w1`),
        same(["get", "task", "t-big", "-o", "yaml"], `${API}/tasks/t-big`),
        same(["get", "tasks", "-o", "yaml"], `${API}/tasks`),
      ]);
      expect(worker).toEqual(apiWorker);
      expect(worker.status.capacity.cpu_millis).toBe(4000);
      expect(task).toEqual(apiTask);
      expect(task.status.conditions.map((c: Json) => c.type)).toContain("Unsatisfiable");
      // kubectl prints a list as `kind: List`; its items are the API's items
      expect(list.kind).toBe("List");
      expect(list.items).toEqual(apiList.items);
    });

    it("-l selects by label, for workers and tasks", async () => {
      const [silver, camp, none] = await Promise.all([
        kubectl("get", "workers", "-l", "tier=silver"),
        kubectl("get", "tasks", "-l", "loom.dev/campaign=c1", "-o", "name"),
        kubectl("get", "workers", "-l", "tier=platinum"),
      ]);
      expect(silver.code, silver.stderr).toBe(0);
      expect(parseTable(silver.stdout).rows.map((r) => r[0])).toEqual(["w-static"]);
      expect(camp.code, camp.stderr).toBe(0);
      expect(camp.stdout).toBe("task.loom.dev/t-camp\n");
      expect(none.code, none.stderr).toBe(0);
      expect(none.stdout).toBe("");
      expect(none.stderr).toMatch(/No resources found/);
    });

    it("the short names lw and lt list workers and tasks", async () => {
      const [lwR, workers, ltR, tasks] = await Promise.all([
        kubectl("get", "lw"),
        kubectl("get", "workers"),
        kubectl("get", "lt"),
        kubectl("get", "tasks"),
      ]);
      for (const r of [lwR, workers, ltR, tasks]) expect(r.code, r.stderr).toBe(0);
      expect(rowsWithoutAge(parseTable(lwR.stdout))).toEqual(rowsWithoutAge(parseTable(workers.stdout)));
      expect(Object.keys(rowsWithoutAge(parseTable(lwR.stdout))).sort()).toEqual(["w-static", "w1", "w2"]);
      expect(rowsWithoutAge(parseTable(ltR.stdout))).toEqual(rowsWithoutAge(parseTable(tasks.stdout)));
      expect(Object.keys(rowsWithoutAge(parseTable(ltR.stdout)))).toContain("t-big");
    });
  });

  describe("describe", () => {
    it("a task that fits nowhere: its conditions and its Unsatisfiable warning", async () => {
      const r = await kubectl("describe", "task", "t-big");
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^Name:\s+t-big$/m);
      expect(r.stdout).toMatch(/^Kind:\s+Task$/m);
      expect(r.stdout).toMatch(/^\s+Conditions:$/m);
      expect(r.stdout).toMatch(/^\s+Reason:\s+exceeds_worker_capacity$/m);
      expect(r.stdout).toMatch(/^\s+Type:\s+Admitted$/m);
      expect(r.stdout).toMatch(/^\s+Type:\s+Unsatisfiable$/m);
      const events = r.stdout.slice(r.stdout.indexOf("\nEvents:") + 1);
      expect(events).toMatch(/^Events:\n\s+Type\s+Reason\s+Age\s+From\s+Message\n/);
      expect(events).toMatch(/^\s+Normal\s+Dispatched\s/m);
      expect(events).toMatch(/^\s+Warning\s+Unsatisfiable\s+\S+\s+loom-hub\s+no worker could ever admit this task/m);
    });

    it("a leased task: its Leased condition and the LeaseGranted event, and no other task's events", async () => {
      const r = await kubectl("describe", "task", "t-fit");
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toMatch(/^\s+State:\s+leased$/m);
      expect(r.stdout).toMatch(/^\s+Reason:\s+LeaseGranted$/m);
      const events = r.stdout.slice(r.stdout.indexOf("\nEvents:") + 1);
      expect(events).toMatch(/^\s+Normal\s+LeaseGranted\s+\S+\s+loom-hub\s+leased to w1 /m);
      expect(events).not.toMatch(/Unsatisfiable/);
    });
  });

  describe("events", () => {
    it("kubectl events, which asks for its namespace's events, lists Loom's cluster-wide Events", async () => {
      const [plain, other] = await Promise.all([kubectl("events"), kubectl("events", "-n", "team-a")]);
      for (const r of [plain, other]) {
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout).toMatch(/^LAST SEEN\s+TYPE\s+REASON\s+OBJECT\s+MESSAGE$/m);
        expect(r.stdout).toMatch(/Warning\s+Unsatisfiable\s+Task\/t-big\s+no worker could ever admit this task/);
        expect(r.stdout).toMatch(/Normal\s+LeaseGranted\s+Task\/t-fit\s+leased to w1/);
      }
      const one = (await get(h.url, "/api/v1/events")).body.items[0] as Json;
      const byName = await get(h.url, `/api/v1/namespaces/default/events/${one.metadata.name}`);
      expect(byName.status).toBe(200);
      expect(byName.body.metadata.name).toBe(one.metadata.name);
    });
  });

  describe("get -w", () => {
    it("prints a row when a task changes state, in the same columns, and nothing for bookmarks", async () => {
      // Highest priority, so that w2's claim takes this task and not t-camp.
      expect(
        (
          await post(h.url, "/api/tasks/dispatch", {
            schema_version: 1,
            tasks: [{ task_id: "t-watch", required_capability: "", priority: 100, payload: { runner: "noop" } }],
          })
        ).status,
      ).toBe(201);
      const child = spawn(
        KUBECTL,
        ["--kubeconfig", kubeconfigPath, "--cache-dir", join(dir, "kube-cache"), "get", "tasks", "-w"],
        { cwd: ROOT, env: cleanEnv() },
      );
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (b: Buffer) => (stdout += b.toString()));
      child.stderr.on("data", (b: Buffer) => (stderr += b.toString()));
      const exited = new Promise<void>((r) => child.on("exit", () => r()));
      try {
        await eventually(
          () => /^t-watch\s+queued\s/m.test(stdout),
          `the initial list (stdout: ${JSON.stringify(stdout)}, stderr: ${JSON.stringify(stderr)})`,
        );
        const claim = await post(h.url, "/api/tasks/claim", { worker_id: "w2", limit: 1, lease_seconds: 600 });
        expect(claim.body.tasks.map((t: Json) => t.task_id)).toEqual(["t-watch"]);
        await eventually(
          () => /^t-watch\s+leased\s/m.test(stdout),
          `a row for the leased task (stdout: ${JSON.stringify(stdout)})`,
        );
      } finally {
        child.kill("SIGTERM");
        await exited;
      }
      const lines = stdout.split("\n").filter((l) => l.trim() !== "");
      const headers = lines[0].split(/\s{2,}/);
      expect(headers).toEqual(["NAME", "STATE", "WORKER", "ATTEMPT", "REQUESTS", "REASON", "AGE"]);
      // the header once; every other line a task's row with a cell per column (no "NAME AGE" rows for BOOKMARKs)
      expect(lines.filter((l) => /^NAME\s/.test(l))).toHaveLength(1);
      for (const l of lines.slice(1)) {
        expect(l.split(/\s+/), l).toHaveLength(headers.length);
        expect(["t-fit", "t-big", "t-camp", "t-watch"], l).toContain(l.split(/\s+/)[0]);
      }
      const leased = lines.find((l) => /^t-watch\s+leased\s/.test(l))!;
      expect(leased.split(/\s+/).slice(0, 6)).toEqual(["t-watch", "leased", "w2", "1", "-", "<none>"]);
    });
  });

  describe("writes", () => {
    const workerYaml = (name: string, spec: Json, labels: Json = {}) =>
      stringifyYaml({ apiVersion: "loom.dev/v1alpha1", kind: "Worker", metadata: { name, labels }, spec });

    it("apply creates a Worker and a second apply updates its spec; patch cordons it; label and -l find it; delete deletes it", async () => {
      const file = join(dir, "w-apply.yaml");
      await writeFile(
        file,
        workerYaml(
          "w-apply",
          { host: "apply-1.example", connection_mode: "long-poll", max_concurrency: 2 },
          { team: "eval" },
        ),
      );
      const created = await kubectl("apply", "--validate=false", "-f", file);
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout.trim()).toBe("worker.loom.dev/w-apply created");
      const first = (await get(h.url, `${API}/workers/w-apply`)).body as Json;
      expect(first.spec).toEqual({ host: "apply-1.example", connection_mode: "long-poll", max_concurrency: 2 });
      expect(first.metadata.labels).toEqual({ team: "eval" });

      await writeFile(
        file,
        workerYaml(
          "w-apply",
          { host: "apply-2.example", connection_mode: "long-poll", max_concurrency: 3 },
          { team: "eval" },
        ),
      );
      const updated = await kubectl("apply", "--validate=false", "-f", file);
      expect(updated.code, updated.stderr).toBe(0);
      expect(updated.stdout.trim()).toBe("worker.loom.dev/w-apply configured");
      const second = (await get(h.url, `${API}/workers/w-apply`)).body as Json;
      expect(second.spec).toEqual({ host: "apply-2.example", connection_mode: "long-poll", max_concurrency: 3 });
      expect(second.metadata.uid).toBe(first.metadata.uid);
      expect(second.metadata.generation).toBe(first.metadata.generation + 1);

      const patched = await kubectl(
        "patch",
        "worker",
        "w-apply",
        "--type=merge",
        "-p",
        '{"spec":{"unschedulable":true}}',
      );
      expect(patched.code, patched.stderr).toBe(0);
      expect(patched.stdout.trim()).toBe("worker.loom.dev/w-apply patched");
      const cordoned = (await get(h.url, `${API}/workers/w-apply`)).body as Json;
      expect(cordoned.spec.unschedulable).toBe(true);
      expect(cordoned.spec.max_concurrency).toBe(3);

      const labeled = await kubectl("label", "worker", "w-apply", "tier=gold");
      expect(labeled.code, labeled.stderr).toBe(0);
      expect(labeled.stdout.trim()).toBe("worker.loom.dev/w-apply labeled");
      expect(((await get(h.url, `${API}/workers/w-apply`)).body as Json).metadata.labels).toEqual({
        team: "eval",
        tier: "gold",
      });
      const gold = await kubectl("get", "workers", "-l", "tier=gold");
      expect(gold.code, gold.stderr).toBe(0);
      const goldRows = parseTable(gold.stdout).rows;
      expect(goldRows.map((r) => r[0])).toEqual(["w-apply"]);
      // cordoned, as kubectl shows a cordoned Node
      expect(goldRows[0][1]).toMatch(/,SchedulingDisabled$/);

      const deleted = await kubectl("delete", "worker", "w-apply");
      expect(deleted.code, deleted.stderr).toBe(0);
      expect(deleted.stdout.trim()).toBe('worker.loom.dev "w-apply" deleted');
      expect((await get(h.url, `${API}/workers/w-apply`)).status).toBe(404);
      const gone = await kubectl("get", "worker", "w-apply");
      expect(gone.code).toBe(1);
      expect(gone.stderr).toMatch(/NotFound|not found/);
    });

    it("patch --type=json applies test, add, replace and remove as one write; a failing test changes nothing", async () => {
      const created = await post(h.url, `${API}/workers`, {
        metadata: { name: "w-jsonpatch", labels: { team: "eval" } },
        spec: { max_concurrency: 2, capabilities: ["linux"] },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const ops = [
        { op: "test", path: "/spec/max_concurrency", value: 2 },
        { op: "replace", path: "/spec/max_concurrency", value: 3 },
        { op: "add", path: "/spec/capabilities/-", value: "gpu" },
        { op: "add", path: "/spec/host", value: "jp-1.example" },
        { op: "remove", path: "/metadata/labels/team" },
      ];
      const patched = await kubectl("patch", "worker", "w-jsonpatch", "--type=json", "-p", JSON.stringify(ops));
      expect(patched.code, patched.stderr).toBe(0);
      expect(patched.stdout.trim()).toBe("worker.loom.dev/w-jsonpatch patched");
      const after = (await get(h.url, `${API}/workers/w-jsonpatch`)).body as Json;
      expect(after.spec).toEqual({ max_concurrency: 3, capabilities: ["linux", "gpu"], host: "jp-1.example" });
      expect(after.metadata.labels ?? {}).toEqual({});

      const failing = [
        { op: "test", path: "/spec/max_concurrency", value: 2 },
        { op: "replace", path: "/spec/host", value: "other.example" },
      ];
      const refused = await kubectl("patch", "worker", "w-jsonpatch", "--type=json", "-p", JSON.stringify(failing));
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("test failed");
      const unchanged = (await get(h.url, `${API}/workers/w-jsonpatch`)).body as Json;
      expect(unchanged.spec).toEqual(after.spec);
      expect(unchanged.metadata.generation).toBe(after.metadata.generation);
    });

    it("apply --server-side creates and updates, records each field manager, refuses a conflict between managers, and --force-conflicts takes the field", async () => {
      const file = join(dir, "w-ssa.yaml");
      const managers = (o: Json) =>
        Object.fromEntries((o.metadata.managedFields ?? []).map((e: Json) => [e.manager, e.fieldsV1]));
      await writeFile(
        file,
        workerYaml("w-ssa", { host: "ssa-1.example", max_concurrency: 2, capabilities: ["linux"] }, { team: "eval" }),
      );
      const created = await kubectl("apply", "--server-side", "-f", file);
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout.trim()).toBe("worker.loom.dev/w-ssa serverside-applied");
      const first = (await get(h.url, `${API}/workers/w-ssa`)).body as Json;
      expect(first.spec).toEqual({ host: "ssa-1.example", max_concurrency: 2, capabilities: ["linux"] });
      expect(managers(first)).toEqual({
        kubectl: {
          "f:metadata": { "f:labels": { "f:team": {} } },
          "f:spec": { "f:host": {}, "f:max_concurrency": {}, "f:capabilities": {} },
        },
      });

      // The same manager drops capabilities and the label and changes host: the dropped fields go.
      await writeFile(
        file,
        stringifyYaml({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Worker",
          metadata: { name: "w-ssa" },
          spec: { host: "ssa-2.example", max_concurrency: 2 },
        }),
      );
      const updated = await kubectl("apply", "--server-side", "-f", file);
      expect(updated.code, updated.stderr).toBe(0);
      const second = (await get(h.url, `${API}/workers/w-ssa`)).body as Json;
      expect(second.spec).toEqual({ host: "ssa-2.example", max_concurrency: 2 });
      expect(second.metadata.labels ?? {}).toEqual({});
      expect(second.metadata.uid).toBe(first.metadata.uid);

      // Another manager wants max_concurrency at 4: a conflict naming the field and its owner, nothing stored.
      const scale = join(dir, "w-ssa-scale.yaml");
      await writeFile(
        scale,
        stringifyYaml({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Worker",
          metadata: { name: "w-ssa" },
          spec: { max_concurrency: 4 },
        }),
      );
      const conflict = await kubectl("apply", "--server-side", "--field-manager=scaler", "-f", scale);
      expect(conflict.code).not.toBe(0);
      expect(conflict.stderr).toContain("Apply failed with 1 conflict");
      expect(conflict.stderr).toContain('spec.max_concurrency is owned by "kubectl"');
      const kept = (await get(h.url, `${API}/workers/w-ssa`)).body as Json;
      expect(kept.spec).toEqual(second.spec);
      expect(managers(kept)).toEqual(managers(second));

      const forced = await kubectl(
        "apply",
        "--server-side",
        "--field-manager=scaler",
        "--force-conflicts",
        "-f",
        scale,
      );
      expect(forced.code, forced.stderr).toBe(0);
      expect(forced.stdout.trim()).toBe("worker.loom.dev/w-ssa serverside-applied");
      const third = (await get(h.url, `${API}/workers/w-ssa`)).body as Json;
      expect(third.spec).toEqual({ host: "ssa-2.example", max_concurrency: 4 });
      expect(managers(third)).toEqual({
        kubectl: { "f:spec": { "f:host": {} } },
        scaler: { "f:spec": { "f:max_concurrency": {} } },
      });

      // A server-side dry run answers what the apply would store, and stores nothing.
      await writeFile(
        scale,
        stringifyYaml({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Worker",
          metadata: { name: "w-ssa" },
          spec: { max_concurrency: 1 },
        }),
      );
      const dry = await kubectl(
        "apply",
        "--server-side",
        "--field-manager=scaler",
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        scale,
      );
      expect(dry.code, dry.stderr).toBe(0);
      expect((JSON.parse(dry.stdout) as Json).spec).toEqual({ host: "ssa-2.example", max_concurrency: 1 });
      const fourth = (await get(h.url, `${API}/workers/w-ssa`)).body as Json;
      expect([fourth.spec, managers(fourth)]).toEqual([third.spec, managers(third)]);
    });

    it("a bad apply is rejected with the field named, and nothing is stored", async () => {
      const file = join(dir, "w-bad.yaml");
      await writeFile(file, workerYaml("w-bad", { resource_capacity: { cpu_millis: -5 } }));
      const before = (await get(h.url, `${API}/workers`)).body as Json;
      const r = await kubectl("apply", "--validate=false", "-f", file);
      expect(r.code).not.toBe(0);
      expect(r.stdout).toBe("");
      expect(r.stderr).toContain("spec.resource_capacity.cpu_millis");
      expect(r.stderr).toMatch(/The Worker "w-bad" is invalid/);
      expect((await get(h.url, `${API}/workers/w-bad`)).status).toBe(404);
      const after = (await get(h.url, `${API}/workers`)).body as Json;
      expect(after.items.map((w: Json) => w.metadata.name)).toEqual(before.items.map((w: Json) => w.metadata.name));
    });
  });

  describe("server-side dry run", () => {
    const workerYaml = (name: string, spec: Json) =>
      stringifyYaml({ apiVersion: "loom.dev/v1alpha1", kind: "Worker", metadata: { name }, spec });

    it("kubectl diff shows what apply would change, and apply --dry-run=server (client-side and server-side apply) writes nothing", async () => {
      const file = join(dir, "w-diff.yaml");
      await writeFile(file, workerYaml("w-diff", { host: "diff-1.example", max_concurrency: 2 }));
      const created = await kubectl("apply", "--validate=false", "-f", file);
      expect(created.code, created.stderr).toBe(0);
      const same = await kubectl("diff", "-f", file);
      expect(same.code, same.stderr).toBe(0);
      expect(same.stdout).toBe("");

      await writeFile(file, workerYaml("w-diff", { host: "diff-2.example", max_concurrency: 3 }));
      const stored = (await get(h.url, `${API}/workers/w-diff`)).body as Json;
      const diff = await kubectl("diff", "-f", file);
      expect(diff.code, diff.stderr).toBe(1); // kubectl diff: 1 means "differs"
      expect(diff.stdout).toMatch(/^-\s+host: diff-1\.example$/m);
      expect(diff.stdout).toMatch(/^\+\s+host: diff-2\.example$/m);
      expect(diff.stdout).toMatch(/^\+\s+max_concurrency: 3$/m);
      for (const args of [
        ["apply", "--validate=false", "--dry-run=server", "-f", file],
        ["apply", "--server-side", "--dry-run=server", "-f", file],
      ]) {
        const r = await kubectl(...args);
        expect(r.code, r.stderr).toBe(0);
        expect(r.stdout.trim()).toMatch(
          /^worker\.loom\.dev\/w-diff (configured|serverside-applied) \(server dry run\)$/,
        );
      }
      // (kubectl then rewrites a client-side apply's last-applied annotation, and prints that reply:
      // what the object would be is checked on a new one.)
      const fresh = join(dir, "w-dry-ssa.yaml");
      await writeFile(fresh, workerYaml("w-dry-ssa", { host: "ssa.example", max_concurrency: 1 }));
      const yaml = await kubectl("apply", "--server-side", "--dry-run=server", "-o", "yaml", "-f", fresh);
      expect(yaml.code, yaml.stderr).toBe(0);
      expect((parseYaml(yaml.stdout) as Json).spec).toEqual({ host: "ssa.example", max_concurrency: 1 });
      expect((await get(h.url, `${API}/workers/w-dry-ssa`)).status).toBe(404);
      // (Controllers may write its status meanwhile; what a dry run would change is not written.)
      const after = (await get(h.url, `${API}/workers/w-diff`)).body as Json;
      expect([after.spec, after.metadata.generation, after.metadata.managedFields]).toEqual([
        stored.spec,
        stored.metadata.generation,
        stored.metadata.managedFields,
      ]);
    });

    it("create and patch --dry-run=server run every check and store nothing; a refusal is the real write's", async () => {
      const file = join(dir, "w-dry-new.yaml");
      await writeFile(file, workerYaml("w-dry-new", { max_concurrency: 2 }));
      const created = await kubectl("create", "--validate=false", "--dry-run=server", "-f", file);
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout.trim()).toBe("worker.loom.dev/w-dry-new created (server dry run)");
      expect((await get(h.url, `${API}/workers/w-dry-new`)).status).toBe(404);

      await writeFile(file, workerYaml("w-dry-new", { resource_capacity: { cpu_millis: -5 } }));
      const bad = await kubectl("create", "--validate=false", "--dry-run=server", "-f", file);
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toContain("spec.resource_capacity.cpu_millis");

      const patched = await kubectl(
        "patch",
        "worker",
        "w1",
        "--type=merge",
        "--dry-run=server",
        "-p",
        '{"spec":{"unschedulable":true}}',
        "-o",
        "json",
      );
      expect(patched.code, patched.stderr).toBe(0);
      expect((JSON.parse(patched.stdout) as Json).spec.unschedulable).toBe(true);
      expect(((await get(h.url, `${API}/workers/w1`)).body as Json).spec.unschedulable).toBeUndefined();

      // The lease guard runs too: a lease on w2 larger than its 2048Mi is refused, as it would be for real.
      const now = new Date().toISOString();
      const lease = {
        worker: "w2",
        epoch: 1,
        mode: "pull",
        leased_at: now,
        lease_until: new Date(Date.now() + 600_000).toISOString(),
        placement: "shared",
        reservation: { cpu_millis: 0, memory_mb: 4096, disk_mb: 0, gpu_count: 0 },
      };
      const guarded = await kubectl(
        "patch",
        "task",
        "t-camp",
        "--subresource=status",
        "--type=merge",
        "--dry-run=server",
        "-p",
        JSON.stringify({ status: { state: "leased", lease } }),
      );
      expect(guarded.code).not.toBe(0);
      expect(guarded.stderr).toMatch(/would break admission.*memory_mb/);
      const fits = await kubectl(
        "patch",
        "task",
        "t-camp",
        "--subresource=status",
        "--type=merge",
        "--dry-run=server",
        "-p",
        JSON.stringify({
          status: { state: "leased", lease: { ...lease, reservation: { ...lease.reservation, memory_mb: 512 } } },
        }),
        "-o",
        "json",
      );
      expect(fits.code, fits.stderr).toBe(0);
      expect((JSON.parse(fits.stdout) as Json).status.state).toBe("leased");
      expect(((await get(h.url, `${API}/tasks/t-camp`)).body as Json).status.state).toBe("queued");

      const del = await kubectl("delete", "worker", "w-static", "--dry-run=server");
      expect(del.code, del.stderr).toBe(0);
      expect(del.stdout.trim()).toBe('worker.loom.dev "w-static" deleted (server dry run)');
      expect((await get(h.url, `${API}/workers/w-static`)).status).toBe(200);
    });

    it("delete campaign --cascade=orphan keeps its tasks without ownerReferences; --cascade=foreground deletes them first", async () => {
      const campaign = async (name: string) => {
        const r = await post(h.url, `${API}/campaigns`, {
          metadata: { name },
          spec: {
            schema_version: 1,
            campaign_id: name,
            defaults: { setting_id: "s", runner: "noop", priority: -100 },
            cases: [
              { case_id: "x", run_id: "1" },
              { case_id: "y", run_id: "1" },
            ],
          },
        });
        expect(r.status, JSON.stringify(r.body)).toBe(201);
        const tasks = [`${name}__x__s__run-1`, `${name}__y__s__run-1`];
        await eventually(
          async () =>
            (await Promise.all(tasks.map((t) => get(h.url, `${API}/tasks/${t}`)))).every((r) => r.status === 200),
          `${name}'s tasks`,
        );
        return tasks;
      };
      const kept = await campaign("c-orphan");
      const orphan = await kubectl("delete", "campaign", "c-orphan", "--cascade=orphan");
      expect(orphan.code, orphan.stderr).toBe(0);
      expect(orphan.stdout.trim()).toBe('campaign.loom.dev "c-orphan" deleted');
      for (const t of kept)
        expect(((await get(h.url, `${API}/tasks/${t}`)).body as Json).metadata.ownerReferences).toBeUndefined();

      const gone = await campaign("c-fg");
      const fg = await kubectl("delete", "campaign", "c-fg", "--cascade=foreground");
      expect(fg.code, fg.stderr).toBe(0);
      expect(fg.stdout.trim()).toBe('campaign.loom.dev "c-fg" deleted');
      // kubectl waited for the campaign to go, and it went only after its tasks.
      expect((await get(h.url, `${API}/campaigns/c-fg`)).status).toBe(404);
      for (const t of gone) expect((await get(h.url, `${API}/tasks/${t}`)).status).toBe(404);
      for (const t of kept) expect((await kubectl("delete", "task", t)).code).toBe(0);
    });

    it("a dryRun value other than All is refused", async () => {
      const r = await fetch(`${h.url}${API}/workers?dryRun=Some`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ metadata: { name: "w-x" }, spec: {} }),
      });
      expect(r.status).toBe(400);
      expect(((await r.json()) as Json).details.causes[0].field).toBe("dryRun");
    });
  });

  describe("OpenAPI v3 from the CRDs", () => {
    it("plain kubectl apply (default validation) works, the Hub validates strictly, and explain reads the schemas", async () => {
      const good = join(dir, "w-openapi.yaml");
      await writeFile(
        good,
        stringifyYaml({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Worker",
          metadata: { name: "w-openapi" },
          spec: { max_concurrency: 2 },
        }),
      );
      const created = await kubectl("apply", "-f", good);
      expect(created.code, created.stderr).toBe(0);
      expect(created.stdout.trim()).toBe("worker.loom.dev/w-openapi created");

      const bad = join(dir, "w-openapi-bad.yaml");
      await writeFile(
        bad,
        stringifyYaml({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Worker",
          metadata: { name: "w-openapi-bad" },
          spec: { bogus: 1 },
        }),
      );
      const refused = await kubectl("apply", "-f", bad);
      expect(refused.code).not.toBe(0);
      expect(refused.stderr).toContain("spec.bogus: unknown field");
      expect((await get(h.url, `${API}/workers/w-openapi-bad`)).status).toBe(404);

      const explain = await kubectl("explain", "workers.spec.resource_capacity");
      expect(explain.code, explain.stderr).toBe(0);
      expect(explain.stdout).toContain("KIND:       Worker");
      expect(explain.stdout).toMatch(/cpu_millis\s+<integer>/);
    });
  });

  describe("with a token over HTTPS", () => {
    const TOKEN = "kubectl-e2e-token-0123456789abcdef";
    let th: TestHub;
    let tdir: string;
    let ca: Buffer;
    let goodConfig: string;
    let badConfig: string;
    const kubectlWith = (config: string, ...args: string[]) =>
      run(KUBECTL, ["--kubeconfig", config, "--cache-dir", join(tdir, "kube-cache"), ...args]);

    beforeAll(async () => {
      tdir = await mkdtemp(join(tmpdir(), "loom-kubectl-tls-"));
      const cert = join(tdir, "cert.pem");
      const key = join(tdir, "key.pem");
      const gen = await run("/usr/bin/openssl", [
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        key,
        "-out",
        cert,
        "-days",
        "1",
        "-subj",
        "/CN=127.0.0.1",
        "-addext",
        "subjectAltName=IP:127.0.0.1",
      ]);
      expect(gen.code, gen.stderr).toBe(0);
      ca = await readFile(cert);
      th = await startHub({
        heartbeatGraceSeconds: 3600,
        tlsCertFile: cert,
        tlsKeyFile: key,
        env: { LOOM_HUB_TOKEN: TOKEN },
      });
      expect(th.url).toMatch(/^https:\/\//);
      const reg = await httpsJson(th.url, "/api/workers/register", "POST", registerBody("tls-w1"), TOKEN, ca);
      expect(reg.status, JSON.stringify(reg.body)).toBe(200);

      // `loom kubeconfig` takes the token from LOOM_HUB_TOKEN; the CA is added to the cluster
      const kc = await loomBin(["kubeconfig", "--controller", th.url], cleanEnv({ LOOM_HUB_TOKEN: TOKEN }));
      expect(kc.code, kc.stderr).toBe(0);
      const doc = parseYaml(kc.stdout) as Json;
      expect(doc.users[0].user).toEqual({ token: TOKEN });
      doc.clusters[0].cluster["certificate-authority"] = cert;
      goodConfig = join(tdir, "kubeconfig");
      await writeFile(goodConfig, stringifyYaml(doc));
      doc.users[0].user.token = "not-the-token-0123456789";
      badConfig = join(tdir, "kubeconfig-bad");
      await writeFile(badConfig, stringifyYaml(doc));
    });

    afterAll(async () => {
      await th?.close();
      if (tdir) await rm(tdir, { recursive: true, force: true });
    });

    it("kubectl with the kubeconfig from `loom kubeconfig` lists workers", async () => {
      const r = await kubectlWith(goodConfig, "get", "workers");
      expect(r.code, r.stderr).toBe(0);
      const t = parseTable(r.stdout);
      expect(t.headers[0]).toBe("NAME");
      expect(t.rows.map((row) => row[0])).toEqual(["tls-w1"]);
    });

    it("a kubeconfig with a wrong token gets Unauthorized", async () => {
      const r = await kubectlWith(badConfig, "get", "workers");
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("");
      // client-go's words for a 401, with the Hub's message
      expect(r.stderr).toMatch(/You must be logged in to the server \(a valid token is required\)|Unauthorized/);
      expect(r.stderr).not.toContain("tls-w1");
    });
  });
});
