// PATCH on the resource API in the formats kubectl sends: JSON Patch next to merge patch,
// and server-side apply with field managers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHub, type TestHub } from "../support/hub.ts";

let h: TestHub;
const W = "/apis/loom.dev/v1alpha1/workers";
beforeAll(async () => {
  h = await startHub();
  const worker = {
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name: "p1", labels: { zone: "a" } },
    spec: { max_concurrency: 2, capabilities: ["linux"] },
  };
  expect((await send("POST", W, worker, "application/json")).status).toBe(201);
});
afterAll(() => h?.close());

async function send(method: string, path: string, body: unknown, type: string, raw?: string) {
  const res = await fetch(h.url + path, {
    method,
    headers: { "content-type": type },
    body: raw ?? JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("PATCH formats", () => {
  it("applies a JSON Patch (application/json-patch+json) as one write", async () => {
    const r = await send(
      "PATCH",
      `${W}/p1`,
      [
        { op: "test", path: "/spec/max_concurrency", value: 2 },
        { op: "replace", path: "/spec/max_concurrency", value: 3 },
        { op: "add", path: "/spec/capabilities/-", value: "gpu" },
        { op: "remove", path: "/metadata/labels/zone" },
      ],
      "application/json-patch+json",
    );
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.spec).toMatchObject({ max_concurrency: 3, capabilities: ["linux", "gpu"] });
    expect(r.body.metadata.labels ?? {}).toEqual({});
    expect(r.body.metadata.generation).toBe(2);
  });

  it("refuses a failed test, a bad path and an invalid result, changing nothing", async () => {
    const before = (await fetch(`${h.url}${W}/p1`).then((r) => r.json())) as Record<string, any>;
    const failedTest = await send(
      "PATCH",
      `${W}/p1`,
      [
        { op: "test", path: "/spec/max_concurrency", value: 99 },
        { op: "replace", path: "/spec/max_concurrency", value: 1 },
      ],
      "application/json-patch+json",
    );
    expect(failedTest.status).toBe(422);
    expect(failedTest.body).toMatchObject({
      kind: "Status",
      reason: "Invalid",
      details: { causes: [{ field: "spec.max_concurrency" }] },
    });
    expect(failedTest.body.message).toContain("operation 0 (/spec/max_concurrency): test failed");
    const badPath = await send(
      "PATCH",
      `${W}/p1`,
      [{ op: "remove", path: "/spec/nope" }],
      "application/json-patch+json",
    );
    expect(badPath.status).toBe(422);
    const invalid = await send(
      "PATCH",
      `${W}/p1`,
      [{ op: "replace", path: "/spec/max_concurrency", value: -1 }],
      "application/json-patch+json",
    );
    expect(invalid.status).toBe(422);
    expect(JSON.stringify(invalid.body)).toContain("spec.max_concurrency");
    const stale = await send(
      "PATCH",
      `${W}/p1`,
      [
        { op: "test", path: "/metadata/resourceVersion", value: "1" },
        { op: "replace", path: "/spec/max_concurrency", value: 1 },
      ],
      "application/json-patch+json",
    );
    expect(stale.status).toBe(422);
    const after = (await fetch(`${h.url}${W}/p1`).then((r) => r.json())) as Record<string, any>;
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
  });

  it("names the formats it takes when given another", async () => {
    const strategic = await send("PATCH", `${W}/p1`, {}, "application/strategic-merge-patch+json");
    expect(strategic.status).toBe(415);
    expect(strategic.body.message).toContain("--type=json");
    expect(strategic.body.message).toContain("application/apply-patch+yaml");
  });
});

describe("server-side apply (application/apply-patch+yaml)", () => {
  const apply = (name: string, yaml: string, query: string) =>
    send("PATCH", `${W}/${name}?${query}`, undefined, "application/apply-patch+yaml", yaml);
  const read = async (name: string) =>
    (await fetch(`${h.url}${W}/${name}`).then((r) => r.json())) as Record<string, any>;
  /** What people write: spec and metadata, without the resourceVersion (Loom's status writes move it). */
  const declared = async (name: string) => {
    const {
      spec,
      metadata: { resourceVersion: _rv, ...metadata },
    } = await read(name);
    return { spec, metadata };
  };
  const fieldsOf = (o: Record<string, any>, manager: string) =>
    o.metadata.managedFields?.find((e: Record<string, any>) => e.manager === manager)?.fieldsV1;

  it("creates, merges, records each manager's fields, and removes what a manager stops applying", async () => {
    const first = await apply(
      "s1",
      "apiVersion: loom.dev/v1alpha1\nkind: Worker\nmetadata: {name: s1, labels: {team: a}}\nspec: {host: s1.example, max_concurrency: 2, capabilities: [linux]}\n",
      "fieldManager=ops",
    );
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.body.spec).toEqual({ host: "s1.example", max_concurrency: 2, capabilities: ["linux"] });
    expect(first.body.metadata.managedFields).toEqual([
      {
        manager: "ops",
        operation: "Apply",
        apiVersion: "loom.dev/v1alpha1",
        time: expect.any(String),
        fieldsType: "FieldsV1",
        fieldsV1: {
          "f:metadata": { "f:labels": { "f:team": {} } },
          "f:spec": { "f:host": {}, "f:max_concurrency": {}, "f:capabilities": {} },
        },
      },
    ]);
    // A second manager sets a field no one owns, and co-owns one with the same value.
    const second = await apply(
      "s1",
      '{"apiVersion":"loom.dev/v1alpha1","kind":"Worker","metadata":{"name":"s1"},"spec":{"host":"s1.example","unschedulable":true}}',
      "fieldManager=cordoner",
    );
    expect(second.status, JSON.stringify(second.body)).toBe(200);
    expect(second.body.spec).toEqual({
      host: "s1.example",
      max_concurrency: 2,
      capabilities: ["linux"],
      unschedulable: true,
    });
    expect(fieldsOf(second.body, "cordoner")).toEqual({ "f:spec": { "f:host": {}, "f:unschedulable": {} } });
    // ops leaves out labels, capabilities and host: the first two go, host stays (cordoner holds it).
    const third = await apply(
      "s1",
      "kind: Worker\nmetadata: {name: s1}\nspec: {max_concurrency: 2}\n",
      "fieldManager=ops",
    );
    expect(third.status, JSON.stringify(third.body)).toBe(200);
    expect(third.body.spec).toEqual({ host: "s1.example", max_concurrency: 2, unschedulable: true });
    expect(third.body.metadata.labels).toBeUndefined();
    expect(fieldsOf(third.body, "ops")).toEqual({ "f:spec": { "f:max_concurrency": {} } });
    expect(third.body.metadata.generation).toBe(first.body.metadata.generation + 2);
    // The same apply again changes nothing, not even the time in the record.
    const settled = await declared("s1");
    const again = await apply(
      "s1",
      "kind: Worker\nmetadata: {name: s1}\nspec: {max_concurrency: 2}\n",
      "fieldManager=ops",
    );
    expect(again.status).toBe(200);
    expect(await declared("s1")).toEqual(settled);
  });

  it("a field another manager owns with another value is a Conflict naming field and manager; force takes it over", async () => {
    expect(
      (
        await apply(
          "s2",
          "kind: Worker\nmetadata: {name: s2}\nspec: {max_concurrency: 2, host: a.example}\n",
          "fieldManager=ops",
        )
      ).status,
    ).toBe(201);
    const before = await declared("s2");
    const refused = await apply(
      "s2",
      "kind: Worker\nmetadata: {name: s2}\nspec: {max_concurrency: 4, host: a.example}\n",
      "fieldManager=scaler&force=false",
    );
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      kind: "Status",
      reason: "Conflict",
      details: {
        causes: [
          {
            reason: "FieldManagerConflict",
            field: "spec.max_concurrency",
            message: 'conflict with "ops" using loom.dev/v1alpha1',
          },
        ],
      },
    });
    expect(refused.body.message).toContain('spec.max_concurrency is owned by "ops"');
    expect(await declared("s2")).toEqual(before);

    const forced = await apply(
      "s2",
      "kind: Worker\nmetadata: {name: s2}\nspec: {max_concurrency: 4, host: a.example}\n",
      "fieldManager=scaler&force=true",
    );
    expect(forced.status, JSON.stringify(forced.body)).toBe(200);
    expect(forced.body.spec.max_concurrency).toBe(4);
    expect(fieldsOf(forced.body, "ops")).toEqual({ "f:spec": { "f:host": {} } });
    expect(fieldsOf(forced.body, "scaler")).toEqual({ "f:spec": { "f:max_concurrency": {}, "f:host": {} } });
    // ops no longer owns max_concurrency: leaving it out removes nothing of scaler's.
    const opsAgain = await apply(
      "s2",
      "kind: Worker\nmetadata: {name: s2}\nspec: {host: a.example}\n",
      "fieldManager=ops",
    );
    expect(opsAgain.body.spec.max_concurrency).toBe(4);
  });

  it("keeps the record across other writes (merge patch, PUT without managedFields)", async () => {
    expect(
      (await apply("s3", "kind: Worker\nmetadata: {name: s3}\nspec: {max_concurrency: 2}\n", "fieldManager=ops"))
        .status,
    ).toBe(201);
    expect(
      (await send("PATCH", `${W}/s3`, { spec: { host: "b.example" } }, "application/merge-patch+json")).status,
    ).toBe(200);
    const cur = await read("s3");
    const { managedFields: _m, ...meta } = cur.metadata;
    const put = await send("PUT", `${W}/s3`, { ...cur, metadata: meta }, "application/json");
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    expect(fieldsOf(put.body, "ops")).toEqual({ "f:spec": { "f:max_concurrency": {} } });
  });

  it("refuses bad input, changing nothing: no fieldManager, a schema violation, YAML that does not parse, a kind that does not match, status", async () => {
    expect(
      (await apply("s4", "kind: Worker\nmetadata: {name: s4}\nspec: {max_concurrency: 2}\n", "fieldManager=ops"))
        .status,
    ).toBe(201);
    const before = await declared("s4");
    const noManager = await apply(
      "s4",
      "kind: Worker\nmetadata: {name: s4}\nspec: {max_concurrency: 3}\n",
      "force=true",
    );
    expect(noManager.status).toBe(400);
    expect(noManager.body.details.causes[0].field).toBe("fieldManager");
    const invalid = await apply(
      "s4",
      "kind: Worker\nmetadata: {name: s4}\nspec: {max_concurrency: -1}\n",
      "fieldManager=ops",
    );
    expect(invalid.status).toBe(422);
    expect(invalid.body.details.causes).toContainEqual(expect.objectContaining({ field: "spec.max_concurrency" }));
    const unknown = await apply("s4", "kind: Worker\nmetadata: {name: s4}\nspec: {bogus: 1}\n", "fieldManager=ops");
    expect(unknown.status).toBe(422);
    expect(unknown.body.details.causes).toContainEqual(expect.objectContaining({ field: "spec.bogus" }));
    expect((await apply("s4", "kind: Worker\nmetadata: {name: s4\nspec: [", "fieldManager=ops")).status).toBe(400);
    const wrongKind = await apply("s4", "kind: Task\nmetadata: {name: s4}\n", "fieldManager=ops");
    expect(wrongKind.status).toBe(400);
    expect(wrongKind.body.details.causes[0].field).toBe("kind");
    const recorded = await apply(
      "s4",
      "kind: Worker\nmetadata: {name: s4, managedFields: [{manager: x}]}\nspec: {max_concurrency: 3}\n",
      "fieldManager=ops",
    );
    expect(recorded.status).toBe(400);
    const status = await send(
      "PATCH",
      `${W}/s4/status?fieldManager=ops`,
      undefined,
      "application/apply-patch+yaml",
      "kind: Worker\nmetadata: {name: s4}\nstatus: {}\n",
    );
    expect(status.status).toBe(415);
    expect(await declared("s4")).toEqual(before);
    const badCreate = await apply(
      "s5",
      "kind: Worker\nmetadata: {name: s5}\nspec: {max_concurrency: 0}\n",
      "fieldManager=ops",
    );
    expect(badCreate.status).toBe(422);
    expect((await fetch(`${h.url}${W}/s5`)).status).toBe(404);
  });

  it("a created Task starts with Loom's status, whatever status the configuration carries", async () => {
    const r = await send(
      "PATCH",
      "/apis/loom.dev/v1alpha1/tasks/s-task?fieldManager=ops",
      undefined,
      "application/apply-patch+yaml",
      "kind: Task\nmetadata: {name: s-task}\nspec: {case_id: c, setting_id: s, run_id: '1', payload: {runner: noop}}\nstatus: {state: clean}\n",
    );
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body.status.state).toBe("queued");
  });
});
