import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { type JSONSchema, loadCrds } from "../../src/resources/crds.ts";
import { generateTypes, GENERATED_PATH } from "../../src/resources/gen-types.ts";
import { compileAll, compileSchema, validateObject } from "../../src/resources/validate.ts";

// Where a schema may keep fields it does not declare: free-form payloads and snapshots.
const PRESERVE_ALLOWED = new Set([
  "Task:spec.payload",
  "Task:spec.expected",
  "Task:status.lease.admission",
  "Task:status.attempts[].admission",
  "Task:status.error",
  "Worker:status.registration.host_resources",
  "Campaign:spec.defaults",
  "Campaign:spec.cases[]",
]);

function walk(s: JSONSchema, path: string, visit: (s: JSONSchema, path: string) => void) {
  visit(s, path);
  for (const [k, v] of Object.entries(s.properties ?? {})) walk(v, path ? `${path}.${k}` : k, visit);
  if (s.items) walk(s.items, `${path}[]`, visit);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    walk(s.additionalProperties, `${path}{}`, visit);
}

const crds = loadCrds();

describe("CRDs are valid apiextensions.k8s.io/v1 definitions", () => {
  it("has one CRD per kind: Worker, Task, Campaign, Queue", () => {
    expect([...crds.keys()].sort()).toEqual(["Campaign", "Queue", "Task", "Worker"]);
  });

  for (const crd of crds.values()) {
    describe(crd.kind, () => {
      const raw = crd.raw as any;
      it("declares group loom.dev, version v1alpha1, cluster scope and a matching name", () => {
        expect(raw.apiVersion).toBe("apiextensions.k8s.io/v1");
        expect(raw.kind).toBe("CustomResourceDefinition");
        expect(raw.spec.group).toBe("loom.dev");
        expect(raw.metadata.name).toBe(`${crd.plural}.loom.dev`);
        expect(raw.spec.versions.map((v: any) => v.name)).toEqual(["v1alpha1"]);
        expect(raw.spec.versions[0].served && raw.spec.versions[0].storage).toBe(true);
      });
      it("has the status subresource and printer columns", () => {
        expect(crd.hasStatus).toBe(true);
        expect(crd.columns.length).toBeGreaterThan(1);
        for (const c of crd.columns) expect(c.jsonPath.startsWith(".")).toBe(true);
      });
      it("is structural: every field has a type", () => {
        const untyped: string[] = [];
        walk(crd.schema, "", (s, p) => {
          // An IntOrString (x-kubernetes-int-or-string with anyOf integer and string) is structural without a type.
          if (
            !s.type &&
            !s["x-kubernetes-int-or-string"] &&
            !(s["x-kubernetes-preserve-unknown-fields"] && !s.properties)
          )
            untyped.push(p || "<root>");
        });
        expect(untyped).toEqual([]);
      });
      it("keeps unknown fields only where it is meant to", () => {
        const found: string[] = [];
        walk(crd.schema, "", (s, p) => {
          if (s["x-kubernetes-preserve-unknown-fields"]) found.push(`${crd.kind}:${p}`);
        });
        for (const f of found) expect(PRESERVE_ALLOWED, f).toContain(f);
      });
      it("uses no JSON Schema keyword a structural schema forbids", () => {
        const text = JSON.stringify(crd.schema);
        for (const k of [
          "$ref",
          "definitions",
          "additionalItems",
          "patternProperties",
          "dependencies",
          "$schema",
          "id",
        ])
          expect(text).not.toContain(`"${k}":`);
        walk(crd.schema, "", (s, p) => {
          if (s.properties && s.additionalProperties !== undefined)
            throw new Error(`${p}: properties and additionalProperties together`);
        });
      });
    });
  }

  it("compiles every kind with ajv", () => {
    expect(compileAll().sort()).toEqual(["Campaign", "Queue", "Task", "Worker"]);
  });

  it("compiles in strict mode: a stray key in a schema fails compilation, naming the key", () => {
    // What a description wrapped onto a second YAML line turns into: a key of its own.
    const stray = {
      type: "object",
      properties: { order: { type: "integer", description: "claimed in this order", "then by name.": null } },
    };
    expect(() => compileSchema(stray)).toThrow(/unknown keyword: "then by name\."/);
  });

  it("the generated TypeScript types match the CRDs (run `npm run gen:types` after a CRD change)", () => {
    expect(readFileSync(GENERATED_PATH, "utf8")).toBe(generateTypes());
  });
});

describe("validation compiled from the CRDs", () => {
  const worker = (spec: object) => ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name: "evaluation-01" },
    spec,
  });
  const task = (spec: object) => ({ apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name: "t" }, spec });

  it("accepts the contract's worker", () => {
    expect(
      validateObject(
        worker({
          host: "h",
          connection_mode: "ssh-start",
          max_concurrency: 4,
          initial_concurrency: 2,
          concurrency_policy: "fixed",
          resource_capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
          capabilities: ["linux"],
        }),
      ),
    ).toEqual([]);
  });
  it("rejects negative, fractional, boolean and unknown resource fields, naming each", () => {
    const errs = validateObject(
      worker({ resource_capacity: { cpu_millis: -1, memory_mb: 1.5, disk_mb: true, tpu: 1 } }),
    );
    expect(errs.map((e) => `${e.field}: ${e.message}`).sort()).toEqual([
      "spec.resource_capacity.cpu_millis: must be non-negative",
      "spec.resource_capacity.disk_mb: must be an integer",
      "spec.resource_capacity.memory_mb: must be an integer",
      "spec.resource_capacity.tpu: unknown field",
    ]);
  });
  it("gpu_types requires a positive gpu_count, on workers and on tasks", () => {
    expect(
      validateObject(worker({ resource_capacity: { gpu_types: ["a100"] } })).map((e) => `${e.field}: ${e.message}`),
    ).toEqual(["spec.resource_capacity.gpu_types: requires a positive gpu_count"]);
    expect(
      validateObject(task({ execution_profile: { resources: { gpu_count: 0, gpu_types: ["a100"] } } })).map(
        (e) => e.field,
      ),
    ).toEqual(["spec.execution_profile.resources.gpu_types"]);
    expect(validateObject(task({ execution_profile: { resources: { gpu_count: 1, gpu_types: ["a100"] } } }))).toEqual(
      [],
    );
  });
  it("placement is shared or exclusive", () => {
    expect(validateObject(task({ execution_profile: { placement: "dedicated" } }))[0]).toMatchObject({
      field: "spec.execution_profile.placement",
      message: "must be one of: shared, exclusive",
    });
  });
  it("initial_concurrency must not exceed max_concurrency", () => {
    expect(validateObject(worker({ max_concurrency: 2, initial_concurrency: 3 }))[0]).toMatchObject({
      field: "spec.initial_concurrency",
    });
  });
  it("rejects a bad name, an unknown kind and a wrong apiVersion", () => {
    expect(validateObject({ ...worker({}), metadata: { name: "-bad name" } })[0].field).toBe("metadata.name");
    expect(validateObject({ apiVersion: "loom.dev/v1alpha1", kind: "Pod", metadata: { name: "x" } })[0].field).toBe(
      "kind",
    );
    expect(validateObject({ ...worker({}), apiVersion: "v1" })[0].field).toBe("apiVersion");
  });
  it("keeps payloads free-form", () => {
    expect(
      validateObject(task({ payload: { runner: "shell", command: "echo hi", anything: { nested: [1] } } })),
    ).toEqual([]);
  });
});
