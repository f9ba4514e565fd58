// Fuzzing in the suite (issue 10): fast-check drives the HTTP API of a real Hub on loopback
// (bodies, query strings, headers, ZIPs) and the GitOps file loader. Properties: no 5xx, the
// Hub stays up, a refused request stores nothing, and a request broken in one known field
// gets an error that names that field. Small in CI; LOOM_LONG=1 runs many more cases.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { GitopsSync } from "../../src/gitops/index.ts";
import { loadFile } from "../../src/resources/load.ts";
import { writeZip } from "../../src/results/zip.ts";
import { openSqliteStore } from "../../src/store/sqlite.ts";
import { post, registerBody, startHub, type TestHub } from "../support/hub.ts";
import { invariantViolations } from "../support/invariants.ts";

const LONG = process.env.LOOM_LONG === "1";
const RUNS = LONG ? 3000 : 120;

let h: TestHub;
beforeAll(async () => {
  // The Hub's clock stands still, so no lease the cases take ever falls due: an expiry written
  // mid-case (each lease is expired at its own lease_until) would look like a refused request's write.
  const started = Date.now();
  h = await startHub({ now: () => started });
  expect(
    (await post(h.url, "/api/workers/register", registerBody("w1", { max_concurrency: 2, initial_concurrency: 2 })))
      .status,
  ).toBe(200);
  const tasks = ["t1", "t2", "t3"].map((task_id) => ({
    task_id,
    required_capability: "",
    execution_profile: { placement: "shared", resources: { cpu_millis: 500 } },
  }));
  expect((await post(h.url, "/api/tasks/dispatch", { schema_version: 1, tasks })).status).toBe(201);
  expect((await post(h.url, "/api/tasks/claim", { worker_id: "w1", limit: 1, lease_seconds: 3600 })).status).toBe(200);
});
afterAll(() => h?.close());

/** What a client can change (controllers rewrite conditions meanwhile, which do not count). */
async function contents(): Promise<string> {
  const out: unknown[] = [];
  for (const kind of ["Worker", "Task", "Campaign", "Result"])
    for (const o of (await h.hub.store.list(kind)).items as any[])
      out.push([
        kind,
        o.metadata.name,
        o.metadata.generation,
        o.metadata.labels,
        o.spec,
        o.status?.state,
        o.status?.lease,
        o.status?.registration,
        o.status?.desired_concurrency,
      ]);
  return JSON.stringify(out);
}

// ---- values a careless or hostile client sends -------------------------------------------------

const nasty: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom(
    null,
    true,
    false,
    0,
    -1,
    1.5,
    2 ** 53,
    2 ** 63,
    1e308,
    -1e308,
    "",
    " ",
    "0x1",
    "x\u0000y",
    "a\nb",
    "\u0007",
    "x".repeat(300_000),
    [],
    {},
    [1],
    { a: {} },
  ),
  fc.string({ maxLength: 40 }),
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.jsonValue({ maxDepth: 4 }),
);
const deepJson = fc.integer({ min: 60, max: 3000 }).map((n) => "[".repeat(n) + "]".repeat(n));

type Req = {
  method: string;
  path: string;
  body?: unknown;
  raw?: string | Buffer;
  type?: string;
  headers?: Record<string, string>;
  field?: string;
};

/** Valid-looking templates for each route; a case breaks one field of one of them. */
const templates: Req[] = [
  {
    method: "POST",
    path: "/api/workers/register",
    body: registerBody("w1", { max_concurrency: 2, initial_concurrency: 2 }),
  },
  {
    method: "POST",
    path: "/api/workers/heartbeat",
    body: { worker_id: "w1", current_runs: [], health: { hostname: "h" } },
  },
  { method: "POST", path: "/api/tasks/claim", body: { worker_id: "w1", limit: 1, lease_seconds: 60 } },
  { method: "POST", path: "/api/tasks/start", body: { worker_id: "w1", task_id: "t1", attempt_no: 1 } },
  { method: "POST", path: "/api/tasks/renew", body: { worker_id: "w1", task_id: "t1", lease_seconds: 60 } },
  { method: "POST", path: "/api/tasks/fail", body: { worker_id: "w2", task_id: "t1", error: { type: "run_error" } } },
  {
    method: "POST",
    path: "/api/tasks/dispatch",
    body: {
      schema_version: 1,
      tasks: [
        { task_id: "fz", priority: 1, execution_profile: { placement: "shared", resources: { cpu_millis: 100 } } },
      ],
    },
  },
  {
    method: "POST",
    path: "/api/tasks/dispatch-repo-run",
    body: { repo_url: "https://example.invalid/r.git", command: "make", timeout_seconds: 60, env: { A: "1" } },
  },
  { method: "POST", path: "/api/admin/push-task", body: { task_id: "t2", worker_id: "w1", lease_seconds: 60 } },
  { method: "POST", path: "/api/admin/set-worker-concurrency", body: { worker_id: "w1", desired_concurrency: 1 } },
  {
    method: "POST",
    path: `${API_PREFIX}/workers`,
    body: {
      metadata: { name: "fzw", labels: { a: "b" } },
      spec: { host: "h", max_concurrency: 2, capabilities: ["linux"], resource_capacity: { cpu_millis: 1000 } },
    },
  },
  {
    method: "PATCH",
    path: `${API_PREFIX}/workers/w1`,
    type: "application/merge-patch+json",
    body: { spec: { host: "h2" } },
  },
  {
    method: "PATCH",
    path: `${API_PREFIX}/tasks/t3`,
    type: "application/merge-patch+json",
    body: { spec: { priority: 3 } },
  },
  {
    method: "PATCH",
    path: `${API_PREFIX}/tasks/t3/status`,
    type: "application/merge-patch+json",
    body: { status: { state: "queued" } },
  },
];

/** Paths into a template body that a mutation may replace. */
function leafPaths(v: unknown, at: string[] = []): string[][] {
  if (v === null || typeof v !== "object") return [at];
  const out: string[][] = at.length ? [at] : [];
  for (const [k, x] of Object.entries(v)) out.push(...leafPaths(x, [...at, k]));
  return out;
}
function setAt(v: unknown, path: string[], value: unknown): unknown {
  if (!path.length) return value;
  const copy: any = Array.isArray(v) ? [...v] : { ...(v as object) };
  copy[path[0]] = setAt(copy[path[0]], path.slice(1), value);
  return copy;
}

const mutated: fc.Arbitrary<Req> = fc.tuple(fc.constantFrom(...templates), fc.nat(), nasty).map(([t, i, value]) => {
  const paths = leafPaths(t.body);
  const p = paths[i % paths.length];
  return { ...t, body: setAt(t.body, p, value), field: p.filter((s) => !/^\d+$/.test(s)).at(-1) };
});

const wholeBody: fc.Arbitrary<Req> = fc
  .tuple(
    fc.constantFrom(...templates),
    fc.oneof(
      nasty,
      deepJson.map((raw) => ({ raw })),
    ),
  )
  .map(([t, b]) =>
    b && typeof b === "object" && "raw" in b
      ? { ...t, body: undefined, raw: (b as { raw: string }).raw }
      : { ...t, body: b },
  );

const queryChars = fc.constantFrom(
  "a",
  "=",
  "!",
  ",",
  " ",
  "(",
  ")",
  "\\",
  "%00",
  "%0a",
  "status.state",
  "in",
  "&",
  "x".repeat(100),
);
const query: fc.Arbitrary<Req> = fc
  .tuple(
    fc.constantFrom(
      "/api/tasks",
      `${API_PREFIX}/tasks`,
      `${API_PREFIX}/workers`,
      "/api/data/task-admission",
      `${API_PREFIX}/events`,
    ),
    fc.constantFrom(
      "state",
      "task_id",
      "limit",
      "offset",
      "labelSelector",
      "fieldSelector",
      "resourceVersion",
      "watch",
      "timeoutSeconds",
    ),
    fc.array(queryChars, { maxLength: 20 }).map((a) => a.join("")),
    fc.boolean(),
  )
  .map(([path, k, v, twice]) => ({
    method: "GET",
    path: `${path}?${k}=${encodeURI(v)}${twice ? `&${k}=x` : ""}${k === "watch" ? "&timeoutSeconds=0.1" : ""}`,
  }));

const uploads: fc.Arbitrary<Req> = fc
  .tuple(
    fc.constantFrom("t1", "t2", "nope", ""),
    fc.constantFrom("w1", "w2", ""),
    fc.oneof(
      fc.uint8Array({ maxLength: 2000 }).map((a) => Buffer.from(a)),
      fc.constant("zip"),
    ),
  )
  .map(([task, worker, raw]) => ({
    method: "POST",
    path: "/api/results/upload",
    type: "application/zip",
    raw,
    headers: { ...(task ? { "x-task-id": task } : {}), ...(worker ? { "x-worker-id": worker } : {}) },
  }));

async function send(r: Req): Promise<{ status: number; text: string }> {
  let raw = r.raw;
  if (raw === "zip") raw = await writeZip([{ name: "worker-result.json", data: JSON.stringify({ exit_code: 0 }) }]);
  const body = raw !== undefined ? raw : r.body === undefined ? undefined : JSON.stringify(r.body);
  const res = await fetch(h.url + r.path, {
    method: r.method,
    headers: { ...(body !== undefined ? { "content-type": r.type ?? "application/json" } : {}), ...r.headers },
    body,
    signal: AbortSignal.timeout(15_000),
  });
  return { status: res.status, text: await res.text() };
}

describe("fuzzing the HTTP API of a real Hub", () => {
  it(
    "no 5xx, the Hub stays up, refusals store nothing, and a broken field is named",
    async () => {
      let refusedNamed = 0;
      await fc.assert(
        fc.asyncProperty(
          fc.oneof(
            { weight: 4, arbitrary: mutated },
            { weight: 2, arbitrary: wholeBody },
            { weight: 2, arbitrary: query },
            { weight: 1, arbitrary: uploads },
          ),
          async (r) => {
            const before = await contents();
            const res = await send(r);
            expect(res.status, `${r.method} ${r.path}: ${res.text.slice(0, 300)}`).toBeLessThan(500);
            // No reply (an upload's above all) discloses where the Hub keeps its files.
            expect(res.text).not.toContain(h.dir);
            if (res.status >= 400) {
              expect(await contents(), `${r.method} ${r.path} was refused (${res.status}) but changed the store`).toBe(
                before,
              );
              // A schema-level refusal (400/422) of a body broken in one field names that field.
              if ((res.status === 400 || res.status === 422) && r.field && /"(field|errors|causes)"/.test(res.text)) {
                expect(res.text, `${r.method} ${r.path}: ${res.text.slice(0, 300)}`).toContain(r.field);
                refusedNamed++;
              }
            }
          },
        ),
        { numRuns: RUNS, seed: LONG ? undefined : 10_10 },
      );
      expect(refusedNamed).toBeGreaterThan(0);
      expect((await fetch(`${h.url}/api/healthz`)).status).toBe(200);
      const [workers, tasks] = await Promise.all([h.hub.store.list("Worker"), h.hub.store.list("Task")]);
      expect(invariantViolations(workers.items, tasks.items)).toEqual([]);
    },
    LONG ? 1_200_000 : 120_000,
  );
});

// ---- one property per class of input that used to be stored -----------------------------------

/** Refused with 400/422 naming `field`, and nothing stored. */
async function refusedNaming(r: Req, field: string): Promise<void> {
  const before = await contents();
  const res = await send(r);
  expect(
    [400, 422],
    `${r.method} ${r.path} ${JSON.stringify(r.body).slice(0, 200)}: ${res.status} ${res.text.slice(0, 300)}`,
  ).toContain(res.status);
  expect(res.text).toContain(field);
  expect(await contents()).toBe(before);
}

const CONTROL = fc.constantFrom(...[...Array(32).keys()].map((c) => String.fromCharCode(c)), "\u007f");
const around = (bad: fc.Arbitrary<string>) =>
  fc.tuple(fc.string({ maxLength: 10 }), bad, fc.string({ maxLength: 10 })).map(([a, b, c]) => a + b + c);
const idNotAllowed = fc.oneof(
  fc.array(fc.jsonValue(), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }),
  fc.boolean(),
  fc.oneof(
    fc.double({ min: 2 ** 53, noNaN: true, noDefaultInfinity: true }),
    fc.double({ max: -(2 ** 53), noNaN: true, noDefaultInfinity: true }),
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((d) => !Number.isInteger(d)),
  around(CONTROL),
  fc.constant(""),
);
const LABEL_OK = "ABCxyz019._-";
const labelChar = fc.constantFrom(...LABEL_OK);
const labelCore = fc.array(labelChar, { minLength: 0, maxLength: 20 }).map((a) => `a${a.join("")}z`);
/** Label values that break Kubernetes' syntax: a character outside it, too long, or a bad first or last character. */
const labelNotAllowed = fc.oneof(
  fc
    .tuple(
      labelCore,
      fc.oneof(
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 3 }).filter((x) => /[^A-Za-z0-9._-]/.test(x)),
        CONTROL,
        fc.constantFrom(" ", "/", ":", "é", "😀"),
      ),
      labelCore,
    )
    .map(([a, b, c]) => a + b + c),
  fc.integer({ min: 64, max: 400 }).map((n) => "v".repeat(n)),
  fc.tuple(fc.constantFrom("-", "_", "."), labelCore).map(([e, c]) => (c.length % 2 ? e + c : c + e)),
);
const envName = fc
  .stringMatching(/^[A-Z_][A-Z0-9_]{0,30}$/)
  .filter((n) => !n.startsWith("LOOM_DIRECT_TOKEN_") && n !== "LOOM_RUNNER_TOKEN");
const badCommand = around(
  fc.constantFrom(
    ...[...Array(32).keys()].filter((c) => c !== 9 && c !== 10).map((c) => String.fromCharCode(c)),
    "\u007f",
  ),
);

describe("fuzzing each class of input that used to be stored", () => {
  const ids = ["task_id", "case_id", "setting_id", "run_id", "case_version"];
  it("Campaign case and defaults ids of a wrong type, past 2^53 or with control characters", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...ids), idNotAllowed, fc.boolean(), async (k, bad, inDefaults) => {
        const kase: Record<string, unknown> = {
          case_id: "c",
          setting_id: "s",
          run_id: "r",
          ...(inDefaults ? {} : { [k]: bad }),
        };
        const defaults = inDefaults && k !== "task_id" ? { [k]: bad } : undefined;
        const where = defaults ? `spec.defaults.${k}` : `spec.cases[0].${k}`;
        if (inDefaults && k === "task_id") kase.task_id = bad;
        await refusedNaming(
          {
            method: "POST",
            path: `${API_PREFIX}/campaigns`,
            body: {
              metadata: { name: "fzc" },
              spec: { campaign_id: "fzc", ...(defaults ? { defaults } : {}), cases: [kase] },
            },
          },
          defaults ? where : `spec.cases[0].${k}`,
        );
      }),
      { numRuns: RUNS, seed: LONG ? undefined : 10_10 },
    );
  }, 120_000);
  it("label values outside Kubernetes' syntax", async () => {
    await fc.assert(
      fc.asyncProperty(labelNotAllowed, async (v) => {
        await refusedNaming(
          {
            method: "POST",
            path: `${API_PREFIX}/workers`,
            body: { metadata: { name: "fzl", labels: { team: v } }, spec: {} },
          },
          "metadata.labels.team",
        );
      }),
      { numRuns: RUNS, seed: LONG ? undefined : 10_10 },
    );
  }, 120_000);
  it("direct_api_token_env outside the allow-list, at register-worker-hosts", async () => {
    await fc.assert(
      fc.asyncProperty(envName, async (name) => {
        await refusedNaming(
          {
            method: "POST",
            path: "/api/admin/register-worker-hosts",
            body: {
              hosts: [
                {
                  worker_id: "fzh",
                  host: "127.0.0.1",
                  connection_mode: "direct-worker-api",
                  max_concurrency: 1,
                  initial_concurrency: 1,
                  direct_api_token_env: name,
                },
              ],
            },
          },
          "workers[0].direct_api_token_env",
        );
      }),
      { numRuns: RUNS, seed: LONG ? undefined : 10_10 },
    );
  }, 120_000);
  it("dispatch-repo-run commands with control characters other than tab and newline", async () => {
    await fc.assert(
      fc.asyncProperty(badCommand, async (command) => {
        await refusedNaming(
          {
            method: "POST",
            path: "/api/tasks/dispatch-repo-run",
            body: { repo_url: "https://example.invalid/r.git", command },
          },
          "command",
        );
      }),
      { numRuns: RUNS, seed: LONG ? undefined : 10_10 },
    );
  }, 120_000);
  it("a watch with a timeoutSeconds past 2^31-1 ms stays open", async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 2_147_484, max: 1e12 }), async (t) => {
        const ac = new AbortController();
        const res = await fetch(`${h.url}${API_PREFIX}/workers?watch=1&timeoutSeconds=${t}`, { signal: ac.signal });
        expect(res.status).toBe(200);
        const reader = res.body!.getReader();
        const ended = (async () => {
          for (;;) if ((await reader.read()).done) return "ended";
        })().catch(() => "aborted");
        expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r("open"), 150))])).toBe("open");
        ac.abort();
        await ended;
      }),
      { numRuns: LONG ? 50 : 5, seed: LONG ? undefined : 10_10 },
    );
  }, 60_000);
});

describe("fuzzing GitOps files", () => {
  it(
    "a file that does not load changes nothing, and every error names a field or a line",
    async () => {
      const dir = await mkdtemp(join(tmpdir(), "loom-fuzz-gitops-"));
      const store = openSqliteStore(join(dir, "loom.db"));
      const file = join(dir, "repo", "workers.yaml");
      await writeFile(join(dir, "placeholder"), "");
      const { mkdir } = await import("node:fs/promises");
      await mkdir(join(dir, "repo"));
      await writeFile(
        file,
        JSON.stringify({
          inventory_version: 1,
          workers: [{ worker_id: "g1", max_concurrency: 2, resource_capacity: { cpu_millis: 1000 } }],
        }),
      );
      const sync = new GitopsSync({
        store,
        paths: [join(dir, "repo")],
        recordEvent: () => {},
        log: () => {},
        debounceMs: 10_000,
        resyncMs: 0,
      });
      await sync.start();
      const good = {
        inventory_version: 1,
        workers: [
          {
            worker_id: "g1",
            host: "h",
            max_concurrency: 2,
            capabilities: ["linux"],
            resource_capacity: { cpu_millis: 1000 },
          },
        ],
      };
      try {
        await fc.assert(
          fc.asyncProperty(fc.nat(), nasty, fc.boolean(), async (i, value, asYaml) => {
            const paths = leafPaths(good);
            const doc = setAt(good, paths[i % paths.length], value);
            const text = asYaml ? (await import("yaml")).stringify(doc) : JSON.stringify(doc);
            await writeFile(file, text);
            const loaded = loadFile(file); // never throws
            for (const e of loaded.errors)
              expect(e.field !== "" || e.line !== undefined || /./.test(e.message)).toBe(true);
            const before = JSON.stringify((await store.list("Worker")).items.map((o) => [o.metadata.name, o.spec]));
            const report = await sync.syncNow();
            const outcome = report.files.find((f) => f.file === file)?.outcome;
            if (loaded.errors.length) {
              expect(outcome).toBe("rejected");
              expect(JSON.stringify((await store.list("Worker")).items.map((o) => [o.metadata.name, o.spec]))).toBe(
                before,
              );
            } else expect(["applied", "unchanged"]).toContain(outcome);
          }),
          { numRuns: LONG ? 500 : 40, seed: LONG ? undefined : 10_10 },
        );
      } finally {
        await sync.close();
        await store.close();
        await rm(dir, { recursive: true, force: true });
      }
    },
    LONG ? 600_000 : 60_000,
  );
});
