// Regressions for issue 10 "found" list: each bad input a fuzzing run found answered 5xx or
// was stored. Against a real Hub on loopback; every refusal is a 4xx naming the field, and
// the store's revision shows nothing was written.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { API_PREFIX } from "../../src/api/resources.ts";
import { parseFieldSelector } from "../../src/api/selectors.ts";
import { jsonTooDeep } from "../../src/resources/limits.ts";
import { validateObject } from "../../src/resources/validate.ts";
import { post, registerBody, startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
let u: string;
beforeAll(async () => {
  h = await startHub();
  u = h.url;
  expect(
    (await post(u, "/api/workers/register", registerBody("w1", { max_concurrency: 2, initial_concurrency: 2 }))).status,
  ).toBe(200);
  const d = await post(u, "/api/tasks/dispatch", {
    schema_version: 1,
    tasks: [
      { task_id: "t1", required_capability: "", payload: { runner: "noop" } },
      { task_id: "t2", required_capability: "nobody" },
    ],
  });
  expect(d.status).toBe(201);
  expect((await post(u, "/api/tasks/claim", { worker_id: "w1", limit: 1 })).body.tasks).toHaveLength(1);
});
afterAll(() => h?.close());

type Reply = { status: number; body: any; text: string };
async function send(method: string, path: string, body?: unknown, type = "application/json"): Promise<Reply> {
  const res = await fetch(u + path, {
    method,
    headers: body === undefined ? {} : { "content-type": type },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = text;
  }
  return { status: res.status, body: parsed, text };
}
const revision = () => h.hub.store.revision();

/**
 * What a client can change: every object's identity, generation and spec, and a task's state
 * and lease. (Controllers keep rewriting conditions meanwhile, so the revision moves anyway.)
 */
async function contents(): Promise<string> {
  const out: unknown[] = [];
  for (const kind of ["Worker", "Task", "Campaign", "Result"]) {
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
      ]);
  }
  return JSON.stringify(out);
}

/** A refusal: 4xx, the field named (v1 `field`/`errors`, or Status causes), and no new revision. */
async function refused(r: Promise<Reply>, field: string | RegExp, codes = [400, 422]): Promise<Reply> {
  const before = await contents();
  const reply = await r;
  expect(codes, `${reply.status} ${reply.text.slice(0, 300)}`).toContain(reply.status);
  const b = reply.body;
  const named: string[] = [
    b.field,
    ...(b.errors ?? []).map((e: any) => e.field),
    ...(b.details?.causes ?? []).map((c: any) => c.field),
  ].filter((x) => typeof x === "string");
  expect(
    named.some((n) => (typeof field === "string" ? n === field : field.test(n))),
    `field ${field} in ${reply.text.slice(0, 300)}`,
  ).toBe(true);
  expect(await contents()).toBe(before);
  return reply;
}

const deep = (n: number) => "[".repeat(n) + "]".repeat(n);
const deepObject = (n: number) => {
  let v: unknown = {};
  for (let i = 0; i < n; i++) v = { a: v };
  return v;
};

describe("JSON nested deeper than 64 levels is refused before parsing", () => {
  it("on every JSON route, with 400 naming the body", async () => {
    const body = `{"worker_id":"w1","x":${deep(10_000)}}`;
    for (const [m, p] of [
      ["POST", "/api/workers/register"],
      ["POST", "/api/tasks/fail"],
      ["POST", "/api/tasks/dispatch"],
      ["POST", "/api/tasks/dispatch-repo-run"],
      ["POST", `${API_PREFIX}/tasks`],
    ] as const)
      await refused(send(m, p, body), "body");
    await refused(send("PATCH", `${API_PREFIX}/tasks/t2`, body, "application/merge-patch+json"), "body");
  });
  it("the scan counts brackets outside strings only", () => {
    expect(jsonTooDeep(Buffer.from(deep(64)))).toBe(false);
    expect(jsonTooDeep(Buffer.from(deep(65)))).toBe(true);
    expect(jsonTooDeep(Buffer.from(JSON.stringify({ s: "[".repeat(1000) + '\\"' })))).toBe(false);
  });
  it("a deep object from any other door (a file) fails validation naming where, walking no deeper than the limit", () => {
    const errs = validateObject({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Task",
      metadata: { name: "x" },
      spec: { payload: deepObject(5000) },
    });
    expect(errs[0].message).toMatch(/deeper than 64/);
    expect(errs[0].field).toMatch(/^spec\.payload(\.a)+$/);
  });
  it("a task nested 4,100 levels deep is refused, and lists, claims and deletes keep working", async () => {
    await refused(
      send(
        "POST",
        "/api/tasks/dispatch",
        JSON.stringify({ schema_version: 1, tasks: [{ task_id: "deep", payload: deepObject(4100) }] }),
      ),
      "body",
    );
    expect((await send("GET", "/api/tasks?task_id=t1")).status).toBe(200);
    expect((await send("GET", `${API_PREFIX}/tasks`)).status).toBe(200);
    expect((await send("POST", "/api/tasks/claim", { worker_id: "w1" })).status).toBe(200);
    expect((await send("DELETE", `${API_PREFIX}/tasks/deep`)).status).toBe(404);
  });
});

describe("5xx found by fuzzing", () => {
  it("PATCH with a non-object metadata is 422 naming metadata", async () => {
    await refused(
      send("PATCH", `${API_PREFIX}/tasks/t2`, { metadata: "x" }, "application/merge-patch+json"),
      "metadata",
    );
    await refused(
      send("PATCH", `${API_PREFIX}/workers/w1`, { metadata: 7 }, "application/merge-patch+json"),
      "metadata",
    );
  });
  it("lease_seconds of 1e308 or 1e11 is 400 on claim, renew and push", async () => {
    for (const v of [1e308, 1e11, 7 * 86400 + 1]) {
      await refused(send("POST", "/api/tasks/claim", { worker_id: "w1", lease_seconds: v }), "lease_seconds");
      await refused(
        send("POST", "/api/tasks/renew", { worker_id: "w1", task_id: "t1", lease_seconds: v }),
        "lease_seconds",
      );
      await refused(send("POST", "/api/admin/push-task", { task_id: "t2", lease_seconds: v }), "lease_seconds");
    }
    expect(
      (await send("POST", "/api/tasks/renew", { worker_id: "w1", task_id: "t1", lease_seconds: 7 * 86400 })).status,
    ).toBe(200);
  });
  it("a repeated query parameter is 400 naming it", async () => {
    await refused(send("GET", "/api/tasks?state=queued&state=leased"), "state");
    await refused(send("GET", `${API_PREFIX}/tasks?labelSelector=a&labelSelector=b`), "labelSelector");
    await refused(send("GET", "/api/data/task-admission?task_id=t1&task_id=t2"), "task_id");
  });
  it("a watch from a resourceVersion ahead of the store is a 410 Expired Status naming resourceVersion", async () => {
    const rv = (await revision()) + 1000;
    const r = await refused(send("GET", `${API_PREFIX}/tasks?watch=1&resourceVersion=${rv}`), "resourceVersion", [410]);
    expect(r.body).toMatchObject({ kind: "Status", reason: "Expired", code: 410 });
  });
});

describe("bad inputs that were stored", () => {
  it("integers past 2^53 in priority, cpu_millis and max_concurrency", async () => {
    await refused(
      send("POST", "/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id: "big", priority: 2 ** 63 }] }),
      "tasks[0].priority",
    );
    await refused(
      send("POST", "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [{ task_id: "big", execution_profile: { resources: { cpu_millis: 2 ** 60 } } }],
      }),
      /cpu_millis/,
    );
    await refused(
      send("POST", "/api/workers/register", registerBody("w9", { max_concurrency: 2 ** 60, initial_concurrency: 1 })),
      "max_concurrency",
    );
    await refused(
      send("POST", "/api/workers/register", registerBody("w9", { resource_capacity: { cpu_millis: 2 ** 64 } })),
      "resource_capacity.cpu_millis",
    );
    await refused(
      send("POST", `${API_PREFIX}/workers`, {
        metadata: { name: "w9" },
        spec: { resource_capacity: { memory_mb: 2 ** 63 } },
      }),
      "spec.resource_capacity.memory_mb",
    );
  });
  it("huge strings and control characters or NUL in ids, labels, hosts, capabilities and commands", async () => {
    const mib = "x".repeat(1024 * 1024);
    await refused(
      send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9" }, spec: { host: mib } }),
      "spec.host",
    );
    await refused(
      send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9" }, spec: { host: "a\u0001b" } }),
      "spec.host",
    );
    await refused(
      send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9", labels: { a: "x\u0000y" } }, spec: {} }),
      "metadata.labels.a",
    );
    await refused(
      send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9" }, spec: { capabilities: ["li\nnux"] } }),
      "spec.capabilities[0]",
    );
    await refused(
      send("POST", "/api/workers/register", registerBody("w9", { capabilities: ["a\u0000"] })),
      "capabilities[0]",
    );
    await refused(send("POST", "/api/workers/register", registerBody("w\u0000")), "worker_id");
    await refused(
      send("POST", "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [{ task_id: "t9", required_capability: "a\u0007" }],
      }),
      "tasks[0].required_capability",
    );
    await refused(
      send("POST", "/api/tasks/dispatch", {
        schema_version: 1,
        tasks: [{ task_id: "t9", payload: { commands: [{ command: "echo \u0000" }] } }],
      }),
      /payload\.commands\[0\]\.command/,
    );
    await refused(
      send("POST", "/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id: "t9", payload: { blob: mib } }] }),
      "tasks[0].payload.blob",
    );
  });
  it("wrong JSON types where Runners read them: repo-run fields, fail details, host resources", async () => {
    const run = { repo_url: "https://example.invalid/r.git", command: "make" };
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, timeout_seconds: "soon" }), "timeout_seconds");
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, env: { A: 1 } }), "env.A");
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, env: [] }), "env");
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, command: ["make"] }), "command");
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, command: "make\u0000" }), "command");
    await refused(send("POST", "/api/tasks/fail", { worker_id: "w1", task_id: "t1", error: "boom" }), "error");
    await refused(
      send("POST", "/api/tasks/fail", { worker_id: "w1", task_id: "t1", error: { type: 7 } }),
      "error.type",
    );
    await refused(
      send("POST", "/api/workers/register", registerBody("w9", { health: { resources: { cpu_count: "many" } } })),
      "health.resources.cpu_count",
    );
    await refused(
      send("POST", "/api/workers/heartbeat", { worker_id: "w1", health: { hostname: ["x"] } }),
      "health.hostname",
    );
  });
  it("worker_url and direct_api_token_env are validated", async () => {
    for (const worker_url of ["file:///etc/passwd", "http://user:pw@host/", "javascript:alert(1)", "http://a b/"])
      await refused(
        send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9" }, spec: { worker_url } }),
        "spec.worker_url",
      );
    await refused(
      send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9" }, spec: { direct_api_token_env: "A B" } }),
      "spec.direct_api_token_env",
    );
    const ok = await send("POST", `${API_PREFIX}/workers`, {
      metadata: { name: "w8" },
      spec: { worker_url: "http://127.0.0.1:9876", direct_api_token_env: "LOOM_DIRECT_TOKEN_W8" },
    });
    expect(ok.status).toBe(201);
  });
  it("a non-string task_id is refused, not replaced by a random id", async () => {
    for (const task_id of [7.5, { a: 1 }, ["x"], true])
      await refused(
        send("POST", "/api/tasks/dispatch", { schema_version: 1, tasks: [{ task_id }] }),
        "tasks[0].task_id",
      );
  });
  it("the fence takes only integer attempt numbers", async () => {
    for (const attempt_no of [true, [1], "0x1", "1", 1.5]) {
      await refused(send("POST", "/api/tasks/start", { worker_id: "w1", task_id: "t1", attempt_no }), "attempt_no");
      await refused(send("POST", "/api/tasks/fail", { worker_id: "w1", task_id: "t1", attempt_no }), "attempt_no");
    }
    expect((await send("GET", "/api/tasks?task_id=t1")).body.tasks[0].state).toBe("leased");
  });
  it("a stale resourceVersion sent as a JSON number is refused on PATCH and DELETE", async () => {
    const cur = await send("GET", `${API_PREFIX}/tasks/t2`);
    const stale = Number(cur.body.metadata.resourceVersion) - 1;
    await refused(
      send(
        "PATCH",
        `${API_PREFIX}/tasks/t2`,
        { metadata: { resourceVersion: stale }, spec: { priority: 5 } },
        "application/merge-patch+json",
      ),
      "metadata.resourceVersion",
    );
    await refused(
      send("DELETE", `${API_PREFIX}/tasks/t2`, { preconditions: { resourceVersion: stale } }),
      "preconditions.resourceVersion",
    );
    await refused(
      send("PUT", `${API_PREFIX}/tasks/t2`, {
        ...cur.body,
        metadata: { ...cur.body.metadata, resourceVersion: stale },
      }),
      "metadata.resourceVersion",
    );
    expect((await send("GET", `${API_PREFIX}/tasks/t2`)).body.spec.priority).toBe(cur.body.spec.priority);
  });
});

describe("input the fuzzer still got stored", () => {
  const campaign = (cases: unknown[], defaults?: unknown) => ({
    metadata: { name: "fz" },
    spec: { campaign_id: "fz", ...(defaults ? { defaults } : {}), cases },
  });
  it("Campaign case and defaults ids: arrays, objects, booleans, numbers past 2^53 and control characters", async () => {
    for (const bad of [["a"], { a: 1 }, true, 2 ** 64, "a\u0001b", "", 1.5]) {
      await refused(
        send("POST", `${API_PREFIX}/campaigns`, campaign([{ case_id: bad, setting_id: "s", run_id: "r" }])),
        "spec.cases[0].case_id",
      );
      for (const k of ["task_id", "setting_id", "run_id", "case_version"])
        await refused(
          send("POST", `${API_PREFIX}/campaigns`, campaign([{ case_id: "c", setting_id: "s", run_id: "r", [k]: bad }])),
          `spec.cases[0].${k}`,
        );
      await refused(
        send("POST", `${API_PREFIX}/campaigns`, campaign([{ case_id: "c", run_id: "r" }], { setting_id: bad })),
        "spec.defaults.setting_id",
      );
    }
    await refused(
      send(
        "POST",
        `${API_PREFIX}/campaigns`,
        campaign([{ case_id: "c", setting_id: "s", run_id: "r", scenario_id: ["x"] }]),
      ),
      "spec.cases[0].scenario_id",
    );
    // Integers and plain strings stay ids.
    const ok = await send("POST", `${API_PREFIX}/campaigns`, {
      ...campaign([{ case_id: 7, setting_id: "s", run_id: "r", payload: { runner: "noop" } }]),
      metadata: { name: "fz-ok" },
    });
    expect(ok.status, ok.text).toBe(201);
  });
  it("labels follow Kubernetes' syntax: [prefix/]name keys, values of at most 63 characters of A-Z a-z 0-9 - _ .", async () => {
    for (const labels of [
      { a: "x".repeat(64) },
      { a: "héllo" },
      { a: "-x" },
      { a: "x." },
      { a: "a b" },
      { "a b": "x" },
      { "Bad_Prefix/a": "x" },
      { "/a": "x" },
      { "loom.dev/": "x" },
      { ["k".repeat(64)]: "x" },
    ])
      await refused(
        send("POST", `${API_PREFIX}/workers`, { metadata: { name: "w9", labels }, spec: {} }),
        `metadata.labels.${Object.keys(labels)[0]}`,
      );
    const ok = await send("POST", `${API_PREFIX}/workers`, {
      metadata: {
        name: "w7",
        labels: { "team.example.com/owner": "a.b_c-1", plain: "", ["k".repeat(63)]: "v".repeat(63) },
      },
      spec: {},
    });
    expect(ok.status, ok.text).toBe(201);
  });
  it("register-worker-hosts refuses a direct_api_token_env the Hub would not push with, naming the allowed pattern", async () => {
    for (const env of ["NaN", "Infinity", "LOOM_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY"]) {
      const r = await refused(
        send("POST", "/api/admin/register-worker-hosts", {
          hosts: [
            {
              worker_id: "hx",
              host: "127.0.0.1",
              connection_mode: "direct-worker-api",
              max_concurrency: 1,
              initial_concurrency: 1,
              direct_api_token_env: env,
            },
          ],
        }),
        "workers[0].direct_api_token_env",
      );
      expect(r.text).toContain("LOOM_DIRECT_TOKEN_*");
    }
    const ok = await send("POST", "/api/admin/register-worker-hosts", {
      hosts: [
        {
          worker_id: "hx",
          host: "127.0.0.1",
          connection_mode: "direct-worker-api",
          max_concurrency: 1,
          initial_concurrency: 1,
          direct_api_token_env: "LOOM_DIRECT_TOKEN_HX",
        },
      ],
    });
    expect(ok.status, ok.text).toBe(200);
  });
  it("dispatch-repo-run refuses control characters in a command other than tab and newline", async () => {
    const run = { repo_url: "https://example.invalid/r.git" };
    for (const command of ["make\u0007", "make\rclean", "echo \u001b[2J", "a\u007f"])
      await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, command }), "command");
    await refused(send("POST", "/api/tasks/dispatch-repo-run", { ...run, commands: ["make", "x\u0008"] }), "commands");
    const ok = await send("POST", "/api/tasks/dispatch-repo-run", { ...run, command: "make\tall\nmake test" });
    expect(ok.status, ok.text).toBe(201);
  });
  it("a watch with timeoutSeconds past 2^31-1 ms stays open instead of ending at once", async () => {
    for (const t of [2147484, 1e9]) {
      const ac = new AbortController();
      const res = await fetch(`${u}${API_PREFIX}/workers?watch=1&timeoutSeconds=${t}`, { signal: ac.signal });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      const ended = (async () => {
        for (;;) if ((await reader.read()).done) return "ended";
      })().catch(() => "aborted");
      expect(await Promise.race([ended, new Promise((r) => setTimeout(() => r("open"), 500))])).toBe("open");
      ac.abort();
      await ended;
    }
  });
});

describe("status writes with garbage are refused", () => {
  const lease = {
    worker: "w1",
    epoch: 1,
    leased_at: "2030-01-01T00:00:00Z",
    lease_until: "2030-01-01T00:10:00Z",
    placement: "shared",
    reservation: { cpu_millis: 0, memory_mb: 0, disk_mb: 0, gpu_count: 0 },
  };
  const patch = (status: unknown) =>
    send("PATCH", `${API_PREFIX}/tasks/t2/status`, { status }, "application/merge-patch+json");
  it("lease_until that is not a time", async () => {
    await refused(patch({ state: "leased", lease: { ...lease, lease_until: "x" } }), "status.lease.lease_until");
  });
  it("a lease on a worker that does not exist", async () => {
    await refused(patch({ state: "leased", lease: { ...lease, worker: "ghost" } }), "status.lease.worker");
  });
  it("leased with no lease", async () => {
    await refused(patch({ state: "leased", lease: null }), "status.lease");
    await refused(patch({ state: "running", lease: null }), "status.lease");
  });
});

describe("bounded per-client memory", () => {
  it("calls naming unknown workers add no liveness entries", async () => {
    const before = h.hub.scheduler.ctx.liveness.size;
    for (let i = 0; i < 50; i++) {
      await send("POST", "/api/tasks/start", { worker_id: `ghost-${i}`, task_id: "t1" });
      await send("POST", "/api/tasks/claim", { worker_id: `ghost-${i}` });
      await send("POST", "/api/workers/heartbeat", { worker_id: `ghost-${i}` });
    }
    expect(h.hub.scheduler.ctx.liveness.size).toBe(before);
  });
  it("field selectors parse in one pass, even on a pathological 64 KiB selector", () => {
    // The old regex backtracked over runs of spaces before a missing operator: quadratic.
    expect(() => parseFieldSelector("a" + " ".repeat(64 * 1024) + "b")).toThrow(/not field=value/);
    expect(parseFieldSelector("status.state  !=  queued,metadata.name==a\\,b")).toEqual([
      { field: "status.state", op: "!=", value: "queued" },
      { field: "metadata.name", op: "=", value: "a,b" },
    ]);
  });
});
