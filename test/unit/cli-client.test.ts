// The CLI's client side without a Hub: both error shapes become one error, and apply
// computes the merge patch kubectl would send. (Watch resumption runs against a real Hub in
// test/integration/cli-watch.test.ts.)
import { describe, expect, it } from "vitest";
import { createMergePatch, describePatch, planPatch } from "../../src/cli/apply.ts";
import { ApiError, resolveConnection, toApiError, UsageError } from "../../src/cli/client.ts";
import { selectors } from "../../src/cli/get.ts";
import { resolveKind } from "../../src/cli/kinds.ts";
import type { StoredObject } from "../../src/store/store.ts";

describe("errors: one type for v1 bodies and Status objects", () => {
  it("a Status keeps its reason, message and field causes", () => {
    const e = toApiError(422, "Unprocessable Entity", {
      kind: "Status",
      apiVersion: "v1",
      status: "Failure",
      code: 422,
      reason: "Invalid",
      message: 'Worker "w" is invalid',
      details: {
        kind: "Worker",
        name: "w",
        causes: [{ reason: "FieldValueInvalid", field: "spec.max_concurrency", message: "must be >= 1" }],
      },
    });
    expect(e).toBeInstanceOf(ApiError);
    expect(e.exitCode).toBe(1);
    expect(e.render()).toBe('error: Invalid: Worker "w" is invalid\n  spec.max_concurrency: must be >= 1\n');
  });

  it("a v1 body: `error` is the reason, `detail` or the remaining facts the message, `errors[]` the causes", () => {
    expect(toApiError(404, "Not Found", { error: "task_not_found", task_id: "nope" }).render()).toBe(
      "error: task_not_found: task_id=nope\n",
    );
    const e = toApiError(400, "Bad Request", {
      error: "invalid_dispatch",
      detail: "repo_url: required",
      errors: [{ field: "repo_url", message: "required" }],
    });
    expect(e.render()).toBe("error: invalid_dispatch: repo_url: required\n  repo_url: required\n");
    expect(
      toApiError(400, "Bad Request", { error: "desired_concurrency_must_be_integer", field: "desired_concurrency" })
        .causes,
    ).toEqual([{ field: "desired_concurrency", message: "desired_concurrency_must_be_integer" }]);
  });

  it("anything else keeps the HTTP status", () => {
    expect(toApiError(502, "Bad Gateway", "<html>proxy</html>").render()).toBe(
      "error: Bad Gateway: <html>proxy</html>\n",
    );
  });

  it("the controller comes from the flag, then LOOM_CONTROLLER, then the default; the token only from the environment", () => {
    expect(resolveConnection(undefined, {})).toEqual({ controller: "http://127.0.0.1:8765", token: undefined });
    expect(resolveConnection(undefined, { LOOM_CONTROLLER: "http://hub:1/", LOOM_HUB_TOKEN: "t" })).toEqual({
      controller: "http://hub:1",
      token: "t",
    });
    expect(resolveConnection("http://flag:2", { LOOM_CONTROLLER: "http://hub:1" }).controller).toBe("http://flag:2");
    expect(() => resolveConnection("not a url", {})).toThrow(UsageError);
    expect(() => resolveConnection("ftp://x", {})).toThrow(/--controller/);
  });
});

describe("resource types and selectors, as kubectl takes them", () => {
  it("plural, singular, kind and the CRDs' short names name a type; anything else is a usage error listing them", () => {
    for (const n of ["workers", "worker", "Worker", "lw"]) expect(resolveKind(n).kind).toBe("Worker");
    expect(resolveKind("lt").path).toBe("/apis/loom.dev/v1alpha1/tasks");
    expect(resolveKind("ev").writable).toBe(false);
    expect(() => resolveKind("pods")).toThrow(UsageError);
    expect(() => resolveKind("pods")).toThrow(/use one of: .*workers \(worker, lw\)/);
  });

  it("--state becomes the field selector status.state=STATE, for tasks and known states only", () => {
    expect(
      selectors(resolveKind("tasks"), { state: "queued", selector: "a=b", fieldSelector: "spec.campaign_id=c" }),
    ).toEqual({
      labelSelector: "a=b",
      fieldSelector: "spec.campaign_id=c,status.state=queued",
    });
    expect(selectors(resolveKind("tasks"), {}, "t1")).toEqual({
      labelSelector: undefined,
      fieldSelector: "metadata.name=t1",
    });
    expect(() => selectors(resolveKind("tasks"), { state: "sleeping" })).toThrow(/--state: unknown state "sleeping"/);
    expect(() => selectors(resolveKind("workers"), { state: "queued" })).toThrow(UsageError);
  });
});

describe("apply: the merge patch that makes the stored object match the file", () => {
  const stored = (kind: string, spec: object, status?: object, labels: Record<string, string> = {}) =>
    ({
      apiVersion: "loom.dev/v1alpha1",
      kind,
      metadata: { name: "x", resourceVersion: "7", labels },
      spec,
      ...(status ? { status } : {}),
    }) as unknown as StoredObject;

  it("changed keys, null for removed ones, nothing when equal", () => {
    expect(createMergePatch({ a: 1, b: { c: 2, d: 3 } }, { a: 1, b: { c: 5 } })).toEqual({ b: { c: 5, d: null } });
    expect(createMergePatch({ a: [1, 2] }, { a: [1, 2] })).toBeUndefined();
    expect(createMergePatch({ a: [1, 2] }, { a: [2] })).toEqual({ a: [2] });
  });

  it("declared labels win, others stay; the resourceVersion read is a precondition", () => {
    const cur = stored("Worker", { max_concurrency: 4, host: "h" }, undefined, {
      "loom.dev/origin": "registration",
      tier: "cpu",
    });
    const p = planPatch(cur, stored("Worker", { max_concurrency: 8 }, undefined, { tier: "gpu" }));
    expect(p.patch).toEqual({
      metadata: { labels: { tier: "gpu" }, resourceVersion: "7" },
      spec: { max_concurrency: 8, host: null },
    });
    expect(describePatch(cur, { spec: p.patch!.spec })).toEqual([
      "spec.max_concurrency: 4 -> 8",
      'spec.host: "h" -> (removed)',
    ]);
    expect(
      planPatch(cur, stored("Worker", { max_concurrency: 4, host: "h" }, undefined, { tier: "cpu" })).patch,
    ).toBeUndefined();
  });

  it("an operator's cordon survives a re-apply that does not mention it", () => {
    const cur = stored("Worker", { max_concurrency: 4, unschedulable: true });
    expect(planPatch(cur, stored("Worker", { max_concurrency: 4 })).patch).toBeUndefined();
  });

  it("a task that left the queue keeps its spec, with a warning", () => {
    const running = stored("Task", { priority: 1 }, { state: "running" });
    const p = planPatch(running, stored("Task", { priority: 5 }));
    expect(p.patch).toBeUndefined();
    expect(p.warning).toMatch(/running/);
    expect(
      planPatch(stored("Task", { priority: 1 }, { state: "queued" }), stored("Task", { priority: 5 })).patch?.spec,
    ).toEqual({ priority: 5 });
  });
});
