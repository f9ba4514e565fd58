// The wire protocol module: its generated types are current, requests are refused with v1's
// codes before the schema's, and the API reaches the scheduler only through its typed verbs.
import { readdirSync, readFileSync } from "node:fs";
import { join, posix } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { HubError } from "../../src/protocol/errors.ts";
import { generateProtocolTypes, PROTOCOL_TYPES_PATH } from "../../src/protocol/gen.ts";
import {
  parseClaim,
  parseDispatch,
  parseFail,
  parseHeartbeat,
  parseOverride,
  parseRegister,
  parseRenew,
  parseSetConcurrency,
  parseStart,
} from "../../src/protocol/parse.ts";

const SRC = join(import.meta.dirname, "..", "..", "src");

/** The HubError a call throws, as its status and body. */
function refusal(fn: () => unknown): { status: number; body: Record<string, unknown> } {
  try {
    fn();
  } catch (e) {
    if (e instanceof HubError) return { status: e.status, body: e.body };
    throw e;
  }
  throw new Error("expected a HubError");
}

const register = (extra: Record<string, unknown> = {}) => ({
  worker_id: "w1",
  runner_api_version: 1,
  max_concurrency: 2,
  initial_concurrency: 1,
  ...extra,
});

describe("the protocol's generated types", () => {
  it("match schemas.ts (run `npm run gen:types` after a change)", () => {
    expect(readFileSync(PROTOCOL_TYPES_PATH, "utf8")).toBe(generateProtocolTypes());
  });
});

describe("parsing a request", () => {
  it("answers v1's codes in v1's order, before the schema", () => {
    expect(refusal(() => parseRegister({}))).toEqual({ status: 400, body: { error: "runner_api_version_required" } });
    expect(refusal(() => parseRegister({ runner_api_version: 2 }))).toMatchObject({
      status: 400,
      body: { error: "unsupported_runner_api_version", received: 2, expected: 1 },
    });
    expect(refusal(() => parseRegister({ runner_api_version: 1 }))).toEqual({
      status: 400,
      body: { error: "worker_id_required" },
    });
    expect(refusal(() => parseRegister(register({ concurrency_policy: "greedy" })))).toMatchObject({
      body: { error: "unsupported_concurrency_policy", received: "greedy" },
    });
    expect(refusal(() => parseStart({ task_id: "t" }))).toEqual({ status: 400, body: { error: "worker_id_required" } });
    expect(refusal(() => parseStart({ worker_id: "w1" }))).toEqual({
      status: 400,
      body: { error: "task_id_required" },
    });
    expect(refusal(() => parseSetConcurrency({ worker_id: "w1", desired_concurrency: 1.5 }))).toMatchObject({
      body: { error: "desired_concurrency_must_be_integer", field: "desired_concurrency" },
    });
  });

  it("names the field and the rule a body breaks", () => {
    const r = refusal(() => parseRegister(register({ health: { hostname: 7 } })));
    expect(r).toMatchObject({ status: 400, body: { error: "invalid_request", field: "health.hostname" } });
    expect(r.body.errors).toEqual([{ field: "health.hostname", message: expect.stringContaining("string") }]);
    expect(refusal(() => parseHeartbeat({ worker_id: "w1", current_runs: "all" }))).toMatchObject({
      body: { error: "invalid_request", field: "current_runs" },
    });
    expect(refusal(() => parseStart({ worker_id: "w1", task_id: "t", attempt_no: -1 }))).toMatchObject({
      body: { error: "invalid_request", field: "attempt_no" },
    });
    expect(refusal(() => parseFail({ worker_id: "w1", task_id: "t", error: "boom" }))).toMatchObject({
      body: { error: "invalid_request", field: "error" },
    });
    expect(refusal(() => parseRenew({ worker_id: "w1", task_id: "t", lease_seconds: "soon" }))).toMatchObject({
      body: { error: "invalid_lease_seconds", field: "lease_seconds" },
    });
    expect(refusal(() => parseOverride({ target_id: "t", state: "done", reason: "x" }))).toMatchObject({
      body: { error: "invalid_state", field: "state" },
    });
    expect(refusal(() => parseDispatch({ schema_version: 1, case_ids: [{}] }))).toMatchObject({
      body: { error: "invalid_task_extensions" },
    });
  });

  it("gives the typed request with v1's defaults, clamps and readings", () => {
    expect(parseRegister({ worker_id: "w1", runner_api_version: 1 })).toMatchObject({
      worker_id: "w1",
      max_concurrency: 1,
      initial_concurrency: 1,
      concurrency_policy: "fixed",
      capabilities: [],
      health: {},
    });
    // v1 took the numbers as `int(x)`: a numeric string is a number, and out-of-range ones are clamped.
    expect(parseClaim({ worker_id: "w1", limit: "5", wait_seconds: 100 })).toMatchObject({
      worker_id: "w1",
      limit: 5,
      waitMs: 60_000,
      leaseSeconds: 600,
      clamps: [{ field: "wait_seconds", asked: 100, used: 60 }],
    });
    expect(parseRenew({ worker_id: "w1", task_id: "t", lease_seconds: 10 })).toEqual({
      worker_id: "w1",
      task_id: "t",
      lease_seconds: 30,
    });
    expect(parseFail({ worker_id: "w1", task_id: "t" })).toEqual({
      worker_id: "w1",
      task_id: "t",
      error: { type: "run_error" },
    });
    expect(parseStart({ worker_id: "w1", task_id: "t", attempt_no: 2, extra: "kept by v1 Runners" })).toEqual({
      worker_id: "w1",
      task_id: "t",
      attempt_no: 2,
    });
    expect(parseOverride({ task_id: "t", state: "clean", reason: 5 })).toEqual({
      task_id: "t",
      state: "clean",
      reason: "5",
      operator: "local-admin",
    });
  });

  it("builds a client's HubError from the reply it received", () => {
    const e = HubError.received(409, { error: "lease_worker_mismatch", task_id: "t" }, "/api/tasks/start");
    expect([e.status, e.code, e.detail, e.network]).toEqual([409, "lease_worker_mismatch", { task_id: "t" }, false]);
    expect(e.message).toBe('/api/tasks/start: HTTP 409 {"error":"lease_worker_mismatch","task_id":"t"}');
    expect(HubError.received(0, { error: "timeout" }, "/x").network).toBe(true);
    expect(HubError.received(502, "<html>", "/x")).toMatchObject({ code: "", detail: { body: "<html>" } });
    // A client reads the reply back as it came.
    expect(HubError.received(0, { error: "network_error", detail: "ECONNREFUSED" }, "/x").body).toEqual({
      error: "network_error",
      detail: "ECONNREFUSED",
    });
  });
});

function files(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of readdirSync(join(SRC, dir), { withFileTypes: true }))
    if (e.isFile() && e.name.endsWith(".ts")) out.set(`${dir}/${e.name}`, readFileSync(join(SRC, dir, e.name), "utf8"));
  return out;
}

describe("the API's way into the scheduler", () => {
  const api = files("api");

  it("no route reaches the scheduler's context", () => {
    const offenders = [...api]
      .filter(([, text]) => /\bSchedulerContext\b|scheduler\.ctx\b|scheduler\/context\.ts/.test(text))
      .map(([f]) => f);
    expect(offenders).toEqual([]);
  });

  it("no import cycle among the files of api/ and protocol/", () => {
    const all = new Map([...api, ...files("protocol")]);
    const edges = new Map(
      [...all].map(([f, text]) => [
        f,
        ts
          .preProcessFile(text, true, true)
          .importedFiles.map((i) => i.fileName)
          .filter((s) => s.startsWith("."))
          .map((s) => posix.normalize(posix.join(posix.dirname(f), s)))
          .filter((t) => all.has(t)),
      ]),
    );
    const cycles: string[] = [];
    const state = new Map<string, "open" | "done">();
    const visit = (f: string, path: string[]) => {
      if (state.get(f) === "done") return;
      if (state.get(f) === "open") return void cycles.push([...path.slice(path.indexOf(f)), f].join(" -> "));
      state.set(f, "open");
      for (const t of edges.get(f) ?? []) visit(t, [...path, f]);
      state.set(f, "done");
    };
    for (const f of all.keys()) visit(f, []);
    expect(cycles).toEqual([]);
  });
});
