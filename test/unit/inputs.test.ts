// Files become resources: ids, profile layering, inventory v1, manifest v1 (JSON, YAML,
// JSONL), Loom resource documents, and every error reported in one pass with its path.
import { mkdtempSync, mkdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { stringify } from "yaml";
import { caseTaskId, packageId, slug, taskId } from "../../src/resources/ids.ts";
import { emptyProfile, mergeProfiles, profileShapeErrors } from "../../src/resources/profile.ts";
import { inventoryToWorkers } from "../../src/resources/inventory.ts";
import {
  CASE_KEYS,
  DEFAULT_KEYS,
  convertJsonlManifest,
  convertManifest,
  expandCampaign,
} from "../../src/resources/manifest.ts";
import { assertLoaded, jsonErrorOffset, loadPaths, parseDocuments } from "../../src/resources/load.ts";
import {
  InputValidationError,
  type ItemFieldError,
  formatInputError,
  formatInputErrors,
} from "../../src/resources/input-errors.ts";
import type { Campaign, Task } from "../../src/resources/types.ts";

const fields = (errs: ItemFieldError[]) => errs.map((e) => `${e.field}: ${e.message}`);

// The inventory of RESOURCE_ADMISSION.md "Worker Capacity".
const contractInventory = () => ({
  inventory_version: 1,
  controller: { connection_mode: "prestarted" },
  controller_public_url: "http://CONTROL_HOST:8765",
  workers: [
    {
      worker_id: "evaluation-01",
      host: "WORKER_HOST",
      connection_mode: "ssh-start",
      max_concurrency: 4,
      initial_concurrency: 2,
      concurrency_policy: "fixed",
      resource_capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
      capabilities: ["linux"],
    },
  ],
});

const worker = (over: Record<string, unknown> = {}) => ({
  worker_id: "w",
  initial_concurrency: 1,
  max_concurrency: 2,
  ...over,
});
const inventory = (...workers: unknown[]) => ({ inventory_version: 1, workers });

// The manifest of RESOURCE_ADMISSION.md "Task Execution Profile".
const contractManifest = () => ({
  schema_version: 1,
  campaign_id: "demo",
  defaults: {
    execution_profile: { placement: "shared", resources: { cpu_millis: 750, memory_mb: 1536, disk_mb: 2048 } },
  },
  cases: [
    {
      case_id: "long-context",
      setting_id: "baseline",
      run_id: "001",
      execution_profile: { resources: { memory_mb: 4096 } },
    },
  ],
});

const manifest = (cases: unknown[], defaults?: Record<string, unknown>) => ({
  schema_version: 1,
  campaign_id: "demo",
  ...(defaults ? { defaults } : {}),
  cases,
});
const c = (over: Record<string, unknown> = {}) => ({ case_id: "a", setting_id: "base", run_id: "001", ...over });
const onlyTask = (doc: unknown): Task => {
  const r = convertManifest(doc);
  expect(fields(r.errors)).toEqual([]);
  expect(r.tasks).toHaveLength(1);
  return r.tasks[0];
};

describe("ids (RUNNER_PROTOCOL §5 Task id)", () => {
  it("slug turns each run of other characters into one dash and trims dashes", () => {
    expect(slug("a b//c")).toBe("a-b-c");
    expect(slug("--x--")).toBe("x");
    expect(slug(" café au lait ")).toBe("caf-au-lait");
    expect(slug("keep_these.chars-ok")).toBe("keep_these.chars-ok");
  });
  it("slug of nothing is unknown", () => {
    expect(slug("")).toBe("unknown");
    expect(slug("!!!")).toBe("unknown");
    expect(slug(undefined)).toBe("unknown");
  });
  it("task id is campaign__case__setting__run-N from slugged parts", () => {
    expect(taskId("peer-demo", "case-b", "baseline", "2")).toBe("peer-demo__case-b__baseline__run-2");
    expect(taskId("my campaign", "case/1", "base line", "001")).toBe("my-campaign__case-1__base-line__run-001");
  });
  it("a case's own task_id wins, slugged", () => {
    expect(caseTaskId("c", { task_id: "My Task!", case_id: "a", setting_id: "s", run_id: "1" })).toBe("My-Task");
    expect(caseTaskId("c", { case_id: "a", setting_id: "s", run_id: "1" })).toBe("c__a__s__run-1");
  });
  it("package id is slug(campaign-setting)", () => {
    expect(packageId("demo", "base line")).toBe("demo-base-line");
  });
});

describe("execution profile layering", () => {
  it("an omitted profile is shared with zero requirements", () => {
    expect(mergeProfiles()).toEqual({ placement: "shared", resources: {} });
    expect(mergeProfiles(undefined, undefined)).toEqual(emptyProfile());
  });
  it("later layers override placement; resources merge by name", () => {
    const p = mergeProfiles(
      { placement: "shared", resources: { cpu_millis: 750, memory_mb: 1536, disk_mb: 2048 } },
      { resources: { memory_mb: 4096 } },
      { placement: "exclusive" },
    );
    expect(p).toEqual({ placement: "exclusive", resources: { cpu_millis: 750, memory_mb: 4096, disk_mb: 2048 } });
  });
  it("gpu_types is a sorted set", () => {
    expect(mergeProfiles({ resources: { gpu_count: 1, gpu_types: ["l4", "a100", "l4"] } }).resources.gpu_types).toEqual(
      ["a100", "l4"],
    );
  });
  it("a later gpu_types replaces an earlier one", () => {
    expect(
      mergeProfiles({ resources: { gpu_types: ["a100"] } }, { resources: { gpu_types: ["l4"] } }).resources.gpu_types,
    ).toEqual(["l4"]);
  });
  it("shape errors name the layer", () => {
    expect(fields(profileShapeErrors("x", "defaults.execution_profile"))).toEqual([
      "defaults.execution_profile: must be an object",
    ]);
    expect(fields(profileShapeErrors({ resources: [] }, "cases[0].execution_profile"))).toEqual([
      "cases[0].execution_profile.resources: must be an object",
    ]);
    expect(profileShapeErrors(undefined, "x")).toEqual([]);
  });
});

describe("inventory v1 -> Worker resources", () => {
  it("the contract's inventory becomes one Worker with its fields as spec", () => {
    const r = inventoryToWorkers(contractInventory());
    expect(r.errors).toEqual([]);
    expect(r.workers).toEqual([
      {
        apiVersion: "loom.dev/v1alpha1",
        kind: "Worker",
        metadata: { name: "evaluation-01" },
        spec: {
          host: "WORKER_HOST",
          connection_mode: "ssh-start",
          max_concurrency: 4,
          initial_concurrency: 2,
          concurrency_policy: "fixed",
          resource_capacity: { cpu_millis: 4000, memory_mb: 6144, disk_mb: 30000, gpu_count: 0 },
          capabilities: ["linux"],
        },
      },
    ]);
    expect(r.settings).toEqual({
      controller: { connection_mode: "prestarted" },
      controller_public_url: "http://CONTROL_HOST:8765",
    });
  });

  it("worker_id falls back to host", () => {
    const r = inventoryToWorkers(inventory({ host: "gpu-box.lan", initial_concurrency: 1 }));
    expect(r.errors).toEqual([]);
    expect(r.workers[0].metadata.name).toBe("gpu-box.lan");
    expect(r.workers[0].spec.host).toBe("gpu-box.lan");
  });

  it("connection_defaults are copied under each worker's own fields", () => {
    const r = inventoryToWorkers({
      inventory_version: 1,
      connection_defaults: { user: "loom", port: 22, connection_mode: "ssh-start", capabilities: ["linux"] },
      workers: [worker({ worker_id: "a", port: 2222 }), worker({ worker_id: "b" })],
    });
    expect(r.errors).toEqual([]);
    expect(r.workers.map((w) => [w.spec.user, w.spec.port, w.spec.connection_mode])).toEqual([
      ["loom", 2222, "ssh-start"],
      ["loom", 22, "ssh-start"],
    ]);
  });

  it("controller URLs are kept as settings", () => {
    const r = inventoryToWorkers({
      ...inventory(worker()),
      controller_worker_url: "http://10.0.0.1:8765",
      controller_private_url: "https://hub.internal",
    });
    expect(r.errors).toEqual([]);
    expect(r.settings).toEqual({
      controller_worker_url: "http://10.0.0.1:8765",
      controller_private_url: "https://hub.internal",
    });
  });

  describe("inventory_version", () => {
    it("missing is an error", () => {
      expect(fields(inventoryToWorkers({ workers: [worker()] }).errors)).toEqual(["inventory_version: required"]);
    });
    it("anything but 1 is an error", () => {
      expect(fields(inventoryToWorkers({ inventory_version: 2, workers: [worker()] }).errors)).toEqual([
        "inventory_version: must be 1",
      ]);
      expect(fields(inventoryToWorkers({ inventory_version: "1", workers: [worker()] }).errors)).toEqual([
        "inventory_version: must be 1",
      ]);
    });
  });

  it("keys v1 knew but Loom does not act on are kept and noted; keys neither knows are errors with the nearest name", () => {
    const r = inventoryToWorkers({
      inventory_version: 1,
      connection_defaults: { ssh: { control_persist: "5m" }, worker_id: "x" },
      workers: [worker({ worker_id: "w1", labels: { rack: "r1" }, transport_mode: "ssh" })],
    });
    expect(fields(r.errors)).toEqual([
      "connection_defaults.worker_id: worker_id cannot be a default: it must be unique per worker",
    ]);
    expect(r.notes.map((n) => n.field)).toEqual([
      "connection_defaults.ssh",
      "workers[0].labels",
      "workers[0].transport_mode",
    ]);
    // the worker keeps its own and the inherited v1 keys, as written, in one annotation
    expect(JSON.parse(r.workers[0].metadata.annotations!["loom.dev/v1-fields"])).toEqual({
      ssh: { control_persist: "5m" },
      labels: { rack: "r1" },
      transport_mode: "ssh",
    });
    expect(r.workers[0].spec).not.toHaveProperty("labels");
  });

  it("a typo is an error at every level, with a did-you-mean hint when a known name is near", () => {
    const r = inventoryToWorkers({
      inventory_version: 1,
      hosts: [],
      controller: { connection_mode: "teleport", colour: "red", bind_hots: "0.0.0.0" },
      connection_defaults: { bogus: 1 },
      workers: [worker({ worker_id: "w1", max_concurency: 4, gpu: 1 })],
    });
    expect(fields(r.errors)).toEqual([
      "hosts: unknown field: neither v1 nor Loom reads it",
      "controller.connection_mode: must be one of: ssh-start, prestarted, local-process",
      "controller.colour: unknown field: neither v1 nor Loom reads it",
      "controller.bind_hots: unknown field: neither v1 nor Loom reads it; did you mean `bind_host`?",
      "connection_defaults.bogus: unknown field: neither v1 nor Loom reads it",
      "workers[0].max_concurency: unknown field: neither v1 nor Loom reads it; did you mean `max_concurrency`?",
      "workers[0].gpu: unknown field: neither v1 nor Loom reads it; did you mean `cpu`?",
    ]);
    expect(r.errors.find((e) => e.field === "workers[0].max_concurency")?.subject).toBe("w1");
    expect(r.notes).toEqual([]);
  });

  it("duplicate worker ids are errors naming both entries", () => {
    const r = inventoryToWorkers(
      inventory(worker({ worker_id: "w1" }), worker({ worker_id: "w2" }), worker({ worker_id: undefined, host: "w1" })),
    );
    expect(fields(r.errors)).toEqual(['workers[2].host: duplicate worker id "w1" (also workers[0])']);
    expect(r.workers.map((w) => w.metadata.name)).toEqual(["w1", "w2"]);
  });

  it("a worker needs an id (or a host) and initial_concurrency", () => {
    const r = inventoryToWorkers(inventory({ max_concurrency: 2 }, { worker_id: 7, initial_concurrency: 1 }));
    expect(fields(r.errors)).toEqual([
      "workers[0].worker_id: required (or host, which it falls back to)",
      "workers[0].initial_concurrency: required",
      "workers[1].worker_id: must be a string",
    ]);
  });

  it("a worker id must be a valid resource name", () => {
    const r = inventoryToWorkers(inventory(worker({ worker_id: "bad id" })));
    expect(fields(r.errors)).toEqual([
      "workers[0].worker_id: must be 1-253 characters of A-Z a-z 0-9 _ . - and start with a letter or digit",
    ]);
  });

  // RUNNER_PROTOCOL §4 "Resource vector" and "Concurrency policies", each with its exact path.
  describe("resource_capacity and concurrency rules (§4)", () => {
    const errorsFor = (over: Record<string, unknown>) =>
      fields(
        inventoryToWorkers(
          inventory(
            worker({ worker_id: "w1", ...over }),
            worker({ worker_id: "w2" }),
            worker({ worker_id: "evaluation-01", ...over }),
          ),
        ).errors,
      );
    it("resource fields are non-negative", () => {
      expect(errorsFor({ resource_capacity: { cpu_millis: -1 } })).toEqual([
        "workers[0].resource_capacity.cpu_millis: must be non-negative",
        "workers[2].resource_capacity.cpu_millis: must be non-negative",
      ]);
    });
    it("bools are rejected", () => {
      expect(errorsFor({ resource_capacity: { memory_mb: true } })).toContain(
        "workers[2].resource_capacity.memory_mb: must be an integer",
      );
    });
    it("fractions are rejected (the CRD declares whole units)", () => {
      expect(errorsFor({ resource_capacity: { disk_mb: 1.5 } })).toContain(
        "workers[2].resource_capacity.disk_mb: must be an integer",
      );
    });
    it("an unknown resource key is an error", () => {
      expect(errorsFor({ resource_capacity: { vram_mb: 1 } })).toContain(
        "workers[2].resource_capacity.vram_mb: unknown field",
      );
    });
    it("gpu_types requires a positive gpu_count", () => {
      expect(errorsFor({ resource_capacity: { gpu_count: 0, gpu_types: ["l4"] } })).toContain(
        "workers[2].resource_capacity.gpu_types: requires a positive gpu_count",
      );
      expect(errorsFor({ resource_capacity: { gpu_types: ["l4"] } })).toContain(
        "workers[2].resource_capacity.gpu_types: requires a positive gpu_count",
      );
    });
    it("gpu_types with a positive gpu_count is kept as a sorted set", () => {
      const r = inventoryToWorkers(
        inventory(worker({ resource_capacity: { gpu_count: 2, gpu_types: ["l4", "a100", "l4"] } })),
      );
      expect(r.errors).toEqual([]);
      expect(r.workers[0].spec.resource_capacity).toEqual({ gpu_count: 2, gpu_types: ["a100", "l4"] });
    });
    it("1 <= initial_concurrency <= max_concurrency", () => {
      expect(errorsFor({ initial_concurrency: 3, max_concurrency: 2 })).toContain(
        "workers[2].initial_concurrency: must be between 1 and max_concurrency",
      );
      expect(errorsFor({ initial_concurrency: 0 })).toContain("workers[2].initial_concurrency: must be >= 1");
      expect(errorsFor({ max_concurrency: 2000 })).toContain("workers[2].max_concurrency: must be <= 1024");
    });
    it("concurrency_policy is fixed or adaptive; connection_mode is one of the four", () => {
      expect(errorsFor({ concurrency_policy: "greedy", connection_mode: "ssh" })).toEqual(
        expect.arrayContaining([
          "workers[2].concurrency_policy: must be one of: fixed, adaptive",
          "workers[2].connection_mode: must be one of: ssh-start, long-poll, direct-worker-api, prestarted",
        ]),
      );
    });
    it("the worker id is part of each message", () => {
      const r = inventoryToWorkers(
        inventory(
          worker({ worker_id: "w1" }),
          worker({ worker_id: "w2" }),
          worker({ worker_id: "evaluation-01", resource_capacity: { cpu_millis: -5 } }),
        ),
      );
      expect(formatInputErrors(r.errors.map((e) => ({ ...e, source: "inventory.json" })))).toEqual([
        "inventory.json: workers[2] (evaluation-01).resource_capacity.cpu_millis: must be non-negative",
      ]);
    });
  });

  it("a bad value inherited from connection_defaults is reported there, once", () => {
    const r = inventoryToWorkers({
      inventory_version: 1,
      connection_defaults: { port: 0 },
      workers: [worker({ worker_id: "a" }), worker({ worker_id: "b" }), worker({ worker_id: "c", port: 70000 })],
    });
    expect(fields(r.errors)).toEqual(["connection_defaults.port: must be >= 1", "workers[2].port: must be <= 65535"]);
  });

  it("every problem is reported in one pass", () => {
    const r = inventoryToWorkers({
      inventory_version: 3,
      controller_public_url: "not a url",
      workers: [
        worker({ worker_id: "a", resource_capacity: { cpu_millis: -1, gpu_types: ["x"] } }),
        "nope",
        worker({ worker_id: "a", port: 0 }),
      ],
    });
    expect(fields(r.errors)).toEqual([
      "inventory_version: must be 1",
      "controller_public_url: must be an http(s) URL",
      "workers[0].resource_capacity.cpu_millis: must be non-negative",
      "workers[0].resource_capacity.gpu_types: requires a positive gpu_count",
      "workers[1]: must be an object",
      "workers[2].port: must be >= 1",
      'workers[2].worker_id: duplicate worker id "a" (also workers[0])',
    ]);
  });

  it("never throws on junk", () => {
    for (const junk of [null, 1, "x", [], { workers: "x" }, { inventory_version: 1, workers: [null, [], 1] }])
      expect(() => inventoryToWorkers(junk)).not.toThrow();
    expect(fields(inventoryToWorkers([]).errors)).toEqual([": an inventory must be an object"]);
  });
});

describe("campaign manifest v1 -> Campaign -> Tasks", () => {
  it("the manifest becomes a Campaign with the spec as given", () => {
    const r = convertManifest(contractManifest());
    expect(r.errors).toEqual([]);
    expect(r.campaign).toEqual({
      apiVersion: "loom.dev/v1alpha1",
      kind: "Campaign",
      metadata: { name: "demo", labels: { "loom.dev/campaign": "demo" } },
      spec: contractManifest(),
    });
  });

  it("the contract's example: case resources merge over defaults by name", () => {
    const t = onlyTask(contractManifest());
    expect(t.metadata.name).toBe("demo__long-context__baseline__run-001");
    expect(t.spec.execution_profile).toEqual({
      placement: "shared",
      resources: { cpu_millis: 750, memory_mb: 4096, disk_mb: 2048 },
    });
    expect(t.spec.payload?.execution_profile).toEqual(t.spec.execution_profile);
  });

  it("a normalised task has the v1 defaults", () => {
    const t = onlyTask(manifest([c()]));
    expect(t.spec).toEqual({
      task_kind: "execution",
      campaign_id: "demo",
      case_id: "a",
      setting_id: "base",
      run_id: "001",
      case_version: "v1",
      scenario_id: "base",
      package_id: "demo-base",
      required_capability: "linux",
      priority: 0,
      execution_profile: { placement: "shared", resources: {} },
      retry_policy: {},
      payload: {
        runner: "repo",
        artifact_paths: [],
        env: {},
        timeout_seconds: 300,
        continue_on_error: false,
        normalized: { campaign_id: "demo", case_id: "a", run_id: "001", setting_id: "base", source_index: 1 },
        retry_policy: {},
        phases: [],
        commands: [],
        execution_profile: { placement: "shared", resources: {} },
      },
    });
  });

  it("the campaign's nominate_after_seconds is copied into every task; a bad one is reported once, on the campaign field", () => {
    const r = convertManifest({ ...manifest([c(), c({ case_id: "b" })]), nominate_after_seconds: 5 });
    expect(fields(r.errors)).toEqual([]);
    expect(r.campaign!.spec.nominate_after_seconds).toBe(5);
    expect(r.tasks.map((t) => t.spec.nominate_after_seconds)).toEqual([5, 5]);
    expect(onlyTask(manifest([c()])).spec).not.toHaveProperty("nominate_after_seconds");
    for (const bad of [0, 1.5, "60"]) {
      const b = convertManifest({ ...manifest([c()]), nominate_after_seconds: bad });
      expect(
        b.errors.map((e) => e.field),
        String(bad),
      ).toEqual(["nominate_after_seconds"]);
    }
  });

  it("the Task is labelled with and owned by its Campaign (uid when known)", () => {
    const { campaign } = convertManifest(manifest([c()]));
    const stored = { ...campaign!, metadata: { ...campaign!.metadata, uid: "u-1" } } as Campaign;
    const [t] = expandCampaign(stored).tasks;
    expect(t.metadata.labels).toEqual({ "loom.dev/campaign": "demo" });
    expect(t.metadata.ownerReferences).toEqual([
      { apiVersion: "loom.dev/v1alpha1", kind: "Campaign", name: "demo", uid: "u-1", controller: true },
    ]);
    expect(expandCampaign(campaign!).tasks[0].metadata.ownerReferences![0]).not.toHaveProperty("uid");
  });

  it("identity fields resolve directly or through defaults; explicit values win", () => {
    const r = convertManifest(
      manifest([c({ setting_id: undefined, run_id: undefined }), c({ case_id: "b", run_id: 7 })], {
        setting_id: "s",
        run_id: "002",
        case_version: "v2",
        scenario_id: "scn",
        package_id: "pkg",
        required_capability: "gpu",
        priority: 3,
      }),
    );
    expect(r.errors).toEqual([]);
    expect(
      r.tasks.map((t) => [
        t.metadata.name,
        t.spec.case_version,
        t.spec.scenario_id,
        t.spec.package_id,
        t.spec.required_capability,
        t.spec.priority,
      ]),
    ).toEqual([
      ["demo__a__s__run-002", "v2", "scn", "pkg", "gpu", 3],
      ["demo__b__base__run-7", "v2", "scn", "pkg", "gpu", 3],
    ]);
  });

  it("every case must resolve case_id, setting_id and run_id", () => {
    const r = convertManifest(manifest([{ case_id: "a" }, c({ setting_id: "" })]));
    // The ids' types are the Campaign schema's rules, reported before what resolving them finds.
    expect(fields(r.errors)).toEqual([
      "cases[1].setting_id: must not be empty",
      "cases[0].setting_id: required (on the case or in defaults)",
      "cases[0].run_id: required (on the case or in defaults)",
    ]);
    expect(r.tasks).toEqual([]);
  });

  it("a case's own task_id is used, slugged", () => {
    expect(onlyTask(manifest([c({ task_id: "nightly run #1" })])).metadata.name).toBe("nightly-run-1");
  });

  it("payload is defaults.payload merged with case.payload", () => {
    const t = onlyTask(
      manifest([c({ payload: { opts: { b: 2 }, model: "m2" } })], {
        payload: { opts: { a: 1 }, model: "m1", keep: true },
      }),
    );
    expect(t.spec.payload).toMatchObject({ opts: { a: 1, b: 2 }, model: "m2", keep: true });
  });

  it("runner, command, artifact_paths, timeout_seconds, continue_on_error: case > defaults > payload", () => {
    const t = onlyTask(
      manifest([c({ timeout_seconds: 5 })], {
        runner: "shell",
        command: "echo hi",
        artifact_paths: ["out/"],
        continue_on_error: true,
        timeout_seconds: 60,
        payload: { runner: "noop", timeout_seconds: 10 },
      }),
    );
    expect(t.spec.payload).toMatchObject({
      runner: "shell",
      command: "echo hi",
      artifact_paths: ["out/"],
      continue_on_error: true,
      timeout_seconds: 5,
    });
  });

  it("env layers payload < defaults < case", () => {
    const t = onlyTask(
      manifest([c({ env: { B: "case", C: "case" } })], {
        env: { A: "defaults", B: "defaults" },
        payload: { env: { A: "payload", Z: "payload" } },
      }),
    );
    expect(t.spec.payload?.env).toEqual({ A: "defaults", B: "case", C: "case", Z: "payload" });
  });

  it("retry_policy layers payload < defaults < case and fills spec.retry_policy", () => {
    const t = onlyTask(
      manifest([c({ retry_policy: { different_worker: true } })], {
        retry_policy: { max_attempts: 3 },
        payload: { retry_policy: { max_attempts: 9, categories: ["rate_limited"] } },
      }),
    );
    expect(t.spec.retry_policy).toEqual({
      max_attempts: 3,
      retry_categories: ["rate_limited"],
      different_worker: true,
    });
    expect(t.spec.payload?.retry_policy).toEqual(t.spec.retry_policy);
  });

  it("execution_profile layers defaults -> defaults.payload -> case -> case.payload", () => {
    const t = onlyTask(
      manifest(
        [
          c({
            execution_profile: { placement: "exclusive", resources: { disk_mb: 3 } },
            payload: { execution_profile: { resources: { gpu_count: 1 } } },
          }),
        ],
        {
          execution_profile: { placement: "shared", resources: { cpu_millis: 1, memory_mb: 1 } },
          payload: { execution_profile: { resources: { memory_mb: 2 } } },
        },
      ),
    );
    expect(t.spec.execution_profile).toEqual({
      placement: "exclusive",
      resources: { cpu_millis: 1, memory_mb: 2, disk_mb: 3, gpu_count: 1 },
    });
  });

  it("source becomes the payload's source and source_descriptor", () => {
    const src = { type: "git", url: "https://example.invalid/e.git", ref: "main" };
    const t = onlyTask(manifest([c()], { source: src }));
    expect(t.spec.payload).toMatchObject({ source: src, source_descriptor: src });
  });

  it("{name} placeholders expand in commands, phases, env and artifact paths", () => {
    const t = onlyTask(
      manifest([c()], {
        runner: "shell",
        command: "echo {case_id}/{setting_id}/{run_id} {unknown}",
        env: { OUT: "out/{task_id}" },
        artifact_paths: ["{case_id}.log"],
        phases: [{ name: "p", command: "run {campaign_id}", cwd: "/w/{package_id}" }],
      }),
    );
    expect(t.spec.payload).toMatchObject({
      command: "echo a/base/001 {unknown}",
      env: { OUT: "out/demo__a__base__run-001" },
      artifact_paths: ["a.log"],
      phases: [{ name: "p", command: "run demo", cwd: "/w/demo-base" }],
    });
  });

  it("a shell runner needs a command", () => {
    expect(fields(convertManifest(manifest([c({ runner: "shell" })])).errors)).toEqual([
      "cases[0].command: required when runner is shell",
    ]);
  });

  describe("phases (§5)", () => {
    const defaults = {
      phases: [
        { name: "setup", command: "make", env: { A: "1", B: "1" } },
        { name: "test", command: "make test" },
      ],
    };
    it("phases and commands are identical", () => {
      const t = onlyTask(manifest([c()], defaults));
      expect(t.spec.payload?.phases).toEqual(defaults.phases);
      expect(t.spec.payload?.commands).toEqual(defaults.phases);
    });
    it("a case phase with an existing name overrides it, env merged", () => {
      const t = onlyTask(manifest([c({ phases: [{ name: "setup", cwd: "sub", env: { B: "2", C: "2" } }] })], defaults));
      expect(t.spec.payload?.phases).toEqual([
        { name: "setup", command: "make", cwd: "sub", env: { A: "1", B: "2", C: "2" } },
        { name: "test", command: "make test" },
      ]);
    });
    it("a new name is appended", () => {
      const t = onlyTask(
        manifest([c({ phases: [{ name: "report", command: "cat log", continue_on_error: true }] })], defaults),
      );
      expect((t.spec.payload?.phases as { name: string }[]).map((p) => p.name)).toEqual(["setup", "test", "report"]);
    });
    it("a new name without a command is an error", () => {
      expect(fields(convertManifest(manifest([c({ phases: [{ name: "report" }] })], defaults)).errors)).toEqual([
        'cases[0].phases[0].command: required: no earlier phase is named "report"',
      ]);
    });
    it("only the allowed phase keys; names required and unique", () => {
      const r = convertManifest(
        manifest([
          c({
            phases: [
              { name: "a", command: "x", shell: "bash" },
              { command: "y" },
              { name: "a", command: "z", timeout_seconds: 0 },
            ],
          }),
        ]),
      );
      expect(fields(r.errors)).toEqual([
        "cases[0].phases[0].shell: unknown field",
        "cases[0].phases[1].name: required",
        'cases[0].phases[2].name: duplicate phase name "a" (also cases[0].phases[0])',
        "cases[0].phases[2].timeout_seconds: must be a positive number",
      ]);
    });
    it("commands is another name for phases", () => {
      const t = onlyTask(manifest([c({ commands: [{ name: "only", command: "true" }] })]));
      expect(t.spec.payload?.phases).toEqual([{ name: "only", command: "true" }]);
    });
    it("defaults' phase problems are reported once, at defaults", () => {
      const r = convertManifest(manifest([c(), c({ case_id: "b" })], { phases: [{ name: "x" }] }));
      expect(fields(r.errors)).toEqual(['defaults.phases[0].command: required: no earlier phase is named "x"']);
    });
  });

  it("v1 keys Loom does not know become template values or annotations, noted, never errors", () => {
    expect(CASE_KEYS).toContain("task_id");
    expect(DEFAULT_KEYS).not.toContain("task_id");
    const r = convertManifest({
      ...manifest([c({ colour: "red" })], { task_id: "x", colour: 1, command: "echo {colour}" }),
      owner: "me",
    });
    expect(fields(r.errors)).toEqual(["defaults.task_id: unknown field"]);
    expect(r.notes.map((n) => n.field)).toEqual(["owner", "defaults.colour", "cases[0].colour"]);
    expect(r.campaign!.metadata.annotations).toEqual({ "loom.dev/v1-fields": JSON.stringify({ owner: "me" }) });
    expect(r.campaign!.spec.cases[0]).toMatchObject({ vars: { colour: "red" } });
  });

  it("Loom's own Campaign form stays strict: an unknown case key there is an error", () => {
    const campaign = {
      apiVersion: "loom.dev/v1alpha1",
      kind: "Campaign",
      metadata: { name: "x" },
      spec: { campaign_id: "x", cases: [c({ colour: "red" })] },
    } as unknown as Campaign;
    expect(fields(expandCampaign(campaign).errors)).toEqual(["cases[0].colour: unknown field"]);
  });

  it("schema_version must be 1 and campaign_id is required", () => {
    expect(fields(convertManifest({ cases: [c()] }).errors)).toEqual([
      "schema_version: required",
      "campaign_id: required",
    ]);
    expect(fields(convertManifest({ schema_version: 2, campaign_id: "x", cases: [c()] }).errors)).toEqual([
      "schema_version: must be 1",
    ]);
    expect(fields(convertManifest({ schema_version: 1, campaign_id: 5, cases: [c()] }).errors)).toEqual([
      "campaign_id: must be a string",
    ]);
    expect(fields(convertManifest({ schema_version: 1, campaign_id: "x" }).errors)).toEqual(["cases: required"]);
    expect(fields(convertManifest({ schema_version: 1, campaign_id: "x", cases: [] }).errors)).toEqual([
      "cases: must list at least one case",
    ]);
  });

  it("duplicate task ids are errors naming both cases", () => {
    const r = convertManifest(
      manifest([c(), c({ case_id: "b" }), c({ case_id: "a" }), c({ case_id: "z", task_id: "demo__b__base__run-001" })]),
    );
    expect(fields(r.errors)).toEqual([
      'cases[2]: duplicate task id "demo__a__base__run-001" (also cases[0])',
      'cases[3].task_id: duplicate task id "demo__b__base__run-001" (also cases[1])',
    ]);
    expect(r.tasks.map((t) => t.metadata.name)).toEqual(["demo__a__base__run-001", "demo__b__base__run-001"]);
  });

  describe("execution_profile and retry_policy rules, in the case's terms", () => {
    it("gpu_types requires a positive gpu_count", () => {
      const r = convertManifest(
        manifest([
          c(),
          c({ case_id: "b" }),
          c({ case_id: "x" }),
          c({ case_id: "g", execution_profile: { resources: { gpu_types: ["l4"] } } }),
        ]),
      );
      expect(formatInputErrors(r.errors.map((e) => ({ ...e, source: "campaign.yaml" })))).toEqual([
        "campaign.yaml: cases[3] (demo__g__base__run-001).execution_profile.resources.gpu_types: requires a positive gpu_count",
      ]);
      expect(r.errors[0].field).toBe("cases[3].execution_profile.resources.gpu_types");
    });
    it("a layered gpu_count of 0 still fails", () => {
      const r = convertManifest(
        manifest([c({ execution_profile: { resources: { gpu_count: 0 } } })], {
          execution_profile: { resources: { gpu_count: 1, gpu_types: ["l4"] } },
        }),
      );
      expect(fields(r.errors)).toEqual([
        "cases[0].execution_profile.resources.gpu_types: requires a positive gpu_count",
      ]);
    });
    it("placement, resource types and unknown keys", () => {
      const r = convertManifest(
        manifest([
          c({
            execution_profile: {
              placement: "dedicated",
              resources: { cpu_millis: -1, memory_mb: "1G", vram: 1 },
              priority: 1,
            },
          }),
        ]),
      );
      expect(fields(r.errors)).toEqual([
        "cases[0].execution_profile.priority: unknown field",
        "cases[0].execution_profile.placement: must be one of: shared, exclusive",
        "cases[0].execution_profile.resources.vram: unknown field",
        "cases[0].execution_profile.resources.cpu_millis: must be non-negative",
        "cases[0].execution_profile.resources.memory_mb: must be an integer",
      ]);
    });
    it("a non-object profile or resources", () => {
      expect(fields(convertManifest(manifest([c({ execution_profile: "big" })])).errors)).toEqual([
        "cases[0].execution_profile: must be an object",
      ]);
      expect(fields(convertManifest(manifest([c()], { execution_profile: { resources: 4 } })).errors)).toEqual([
        "defaults.execution_profile.resources: must be an object",
      ]);
    });
    it("retry_policy bounds and categories", () => {
      const r = convertManifest(manifest([c({ retry_policy: { max_attempts: 21, retry_categories: ["flaky"] } })]));
      expect(fields(r.errors)).toEqual([
        "cases[0].retry_policy.max_attempts: must be <= 20",
        "cases[0].retry_policy.retry_categories[0]: must be one of: terminal_resource_insufficient, token_balance_insufficient, rate_limited, auth_failed, network_unavailable",
      ]);
    });
    it("a bad scalar inherited from defaults is reported at defaults, once", () => {
      const r = convertManifest(
        manifest([c(), c({ case_id: "b" }), c({ case_id: "x", priority: "high" })], { priority: 1.5 }),
      );
      expect(fields(r.errors)).toEqual([
        "defaults.priority: must be an integer",
        "cases[2].priority: must be an integer",
      ]);
    });
  });

  it("type checks of the keys Loom interprets", () => {
    const r = convertManifest(
      manifest([
        c({
          runner: "docker",
          env: { N: 1 },
          timeout_seconds: -1,
          continue_on_error: "yes",
          artifact_paths: "out",
          payload: [],
          case_id: {},
        }),
      ]),
    );
    expect(fields(r.errors)).toEqual([
      "cases[0].case_id: must be an integer or a string",
      "cases[0].runner: must be one of: noop, shell, repo",
      "cases[0].env.N: must be a string",
      "cases[0].timeout_seconds: must be a positive number",
      "cases[0].continue_on_error: must be a boolean",
      "cases[0].artifact_paths: must be a list of strings",
      "cases[0].payload: must be an object",
    ]);
  });

  it("all errors of all cases in one pass, each naming its case", () => {
    const r = convertManifest({
      schema_version: 1,
      campaign_id: "demo",
      defaults: { timeout_seconds: -1 },
      cases: [
        c(),
        "nope",
        c({ case_id: "b", execution_profile: { resources: { gpu_types: ["x"] } } }),
        { case_id: "c" },
        c(),
      ],
    });
    expect(formatInputErrors(r.errors)).toEqual([
      "cases[1]: must be an object",
      "defaults.timeout_seconds: must be a positive number",
      "cases[2] (demo__b__base__run-001).execution_profile.resources.gpu_types: requires a positive gpu_count",
      "cases[3].setting_id: required (on the case or in defaults)",
      "cases[3].run_id: required (on the case or in defaults)",
      'cases[4] (demo__a__base__run-001): duplicate task id "demo__a__base__run-001" (also cases[0])',
    ]);
  });

  describe("expandCampaign", () => {
    const campaign = () =>
      convertManifest(
        manifest([c(), c({ case_id: "b" })], {
          runner: "shell",
          command: "echo",
          phases: [{ name: "p", command: "x", env: { A: "1" } }],
        }),
      ).campaign!;
    it("is pure: same input, same output, input untouched", () => {
      const input = campaign();
      const before = structuredClone(input);
      expect(expandCampaign(input)).toEqual(expandCampaign(structuredClone(input)));
      expect(input).toEqual(before);
    });
    it("shares no objects between tasks, payloads and the campaign", () => {
      const { tasks } = expandCampaign(campaign());
      expect(stringify(tasks)).not.toMatch(/[&*]a\d/);
      expect(tasks[0].spec.execution_profile).not.toBe(tasks[0].spec.payload?.execution_profile);
      expect(tasks[0].spec.payload?.phases).not.toBe(tasks[0].spec.payload?.commands);
    });
    it("never throws on junk", () => {
      for (const spec of [
        null,
        1,
        {},
        { campaign_id: "x", cases: "y" },
        { campaign_id: "x", defaults: [], cases: [null, 1, []] },
      ])
        expect(() =>
          expandCampaign({
            apiVersion: "loom.dev/v1alpha1",
            kind: "Campaign",
            metadata: { name: "x" },
            spec,
          } as unknown as Campaign),
        ).not.toThrow();
    });
  });
});

describe("JSONL manifests", () => {
  const line = (o: Record<string, unknown>) =>
    JSON.stringify({ schema_version: 1, campaign_id: "sweep", ...c(), ...o });
  it("one case per line; blank lines are skipped", () => {
    const r = convertJsonlManifest([line({ run_id: "1" }), "", line({ run_id: "2" }), ""].join("\n"));
    expect(r.errors).toEqual([]);
    expect(r.campaign?.spec).toEqual({
      schema_version: 1,
      campaign_id: "sweep",
      cases: [c({ run_id: "1" }), c({ run_id: "2" })],
    });
    expect(r.tasks.map((t) => t.metadata.name)).toEqual(["sweep__a__base__run-1", "sweep__a__base__run-2"]);
    expect(r.lines).toEqual([1, 3]);
  });
  it("every line shares campaign_id and schema_version; there are no defaults; errors carry their line", () => {
    const text = [
      line({ run_id: "1" }),
      line({ run_id: "2", campaign_id: "other" }),
      line({ run_id: "3", schema_version: 2 }),
      "{oops",
      line({ run_id: "4", defaults: {} }),
      JSON.stringify(c({ run_id: "5" })),
    ].join("\n");
    const r = convertJsonlManifest(text);
    expect(r.errors.map((e) => `${e.line}: ${e.field}: ${e.message}`)).toEqual([
      '2: cases[1].campaign_id: must be "sweep", as on the first line (one campaign per file)',
      "3: cases[2].schema_version: must be 1",
      expect.stringMatching(/^4: : invalid JSON: /),
      "5: cases[3].defaults: not allowed: a JSONL manifest has no defaults",
      "6: cases[4].schema_version: required",
      "6: cases[4].campaign_id: required",
    ]);
  });
  it("case errors name the line", () => {
    const r = convertJsonlManifest(
      [line({ run_id: "1" }), line({ run_id: "2", execution_profile: { placement: "solo" } })].join("\n"),
    );
    expect(formatInputErrors(r.errors.map((e) => ({ ...e, source: "sweep.jsonl" })))).toEqual([
      "sweep.jsonl:2: cases[1] (sweep__a__base__run-2).execution_profile.placement: must be one of: shared, exclusive",
    ]);
  });
  it("an empty file is an error", () => {
    expect(fields(convertJsonlManifest("\n\n").errors)).toEqual(["cases: must list at least one case"]);
  });
  it("parseDocuments picks JSONL by extension", () => {
    const r = parseDocuments(line({}), "x.jsonl");
    expect(r.errors).toEqual([]);
    expect(r.resources.map((o) => o.kind)).toEqual(["Campaign"]);
    expect(r.tasks).toHaveLength(1);
  });
});

describe("parseDocuments: what a file holds", () => {
  const workerDoc = (name: string, spec: Record<string, unknown> = {}) => ({
    apiVersion: "loom.dev/v1alpha1",
    kind: "Worker",
    metadata: { name },
    spec,
  });

  it("multi-document YAML of Loom resources; Campaigns also expand to tasks", () => {
    const text = [
      stringify(workerDoc("w1", { max_concurrency: 2 })),
      stringify({
        apiVersion: "loom.dev/v1alpha1",
        kind: "Campaign",
        metadata: { name: "c1" },
        spec: { campaign_id: "c1", cases: [c(), c({ case_id: "b" })] },
      }),
      stringify({
        apiVersion: "loom.dev/v1alpha1",
        kind: "Task",
        metadata: { name: "t1" },
        spec: { payload: { runner: "noop" } },
      }),
      "",
    ].join("---\n");
    const r = parseDocuments(text, "all.yaml");
    expect(r.errors).toEqual([]);
    expect(r.resources.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(["Worker/w1", "Campaign/c1", "Task/t1"]);
    expect(r.tasks.map((t) => t.metadata.name)).toEqual(["c1__a__base__run-001", "c1__b__base__run-001"]);
  });

  it("kind: List with items, and a JSON array of resources", () => {
    const list = parseDocuments(
      stringify({ apiVersion: "v1", kind: "List", items: [workerDoc("a"), workerDoc("b")] }),
      "list.yaml",
    );
    expect(list.errors).toEqual([]);
    expect(list.resources.map((o) => o.metadata.name)).toEqual(["a", "b"]);
    const arr = parseDocuments(JSON.stringify([workerDoc("a"), workerDoc("b", { port: 0 })]), "arr.json");
    expect(formatInputErrors(arr.errors)).toEqual(["arr.json:1: [1] (Worker/b).spec.port: must be >= 1"]);
  });

  it("an inventory and a manifest are recognised by their version keys, in YAML or JSON", () => {
    expect(parseDocuments(stringify(contractInventory()), "inv.yaml").resources.map((o) => o.kind)).toEqual(["Worker"]);
    const m = parseDocuments(JSON.stringify(contractManifest()), "m.json");
    expect(m.resources.map((o) => o.kind)).toEqual(["Campaign"]);
    expect(m.tasks).toHaveLength(1);
    expect(m.inventories).toEqual([]);
  });

  it("resource errors name the file, line, Kind/name and path", () => {
    const text = `apiVersion: loom.dev/v1alpha1
kind: Worker
metadata:
  name: w1
spec:
  resource_capacity:
    cpu_millis: -1
  flavour: x
`;
    expect(formatInputErrors(parseDocuments(text, "w.yaml").errors)).toEqual([
      "w.yaml:8: Worker/w1: spec.flavour: unknown field",
      "w.yaml:7: Worker/w1: spec.resource_capacity.cpu_millis: must be non-negative",
    ]);
  });

  it("manifest errors carry the line of the offending field", () => {
    const text = `schema_version: 1
campaign_id: demo
cases:
  - {case_id: a, setting_id: s, run_id: "1"}
  - case_id: b
    setting_id: s
    run_id: "1"
    execution_profile:
      resources:
        gpu_types: [l4]
`;
    const r = parseDocuments(text, "campaign.yaml");
    expect(formatInputErrors(r.errors)).toEqual([
      "campaign.yaml:10: cases[1] (demo__b__s__run-1).execution_profile.resources.gpu_types: requires a positive gpu_count",
    ]);
  });

  it("a Campaign resource's case errors are under spec.", () => {
    const r = parseDocuments(
      stringify({
        apiVersion: "loom.dev/v1alpha1",
        kind: "Campaign",
        metadata: { name: "c1" },
        spec: { campaign_id: "c1", cases: [c({ extra: 1 })] },
      }),
      "c.yaml",
    );
    expect(fields(r.errors)).toEqual(["spec.cases[0].extra: unknown field"]);
  });

  it("a resource needs apiVersion loom.dev/v1alpha1 and a known kind", () => {
    const r = parseDocuments(
      stringify({ kind: "Pod", metadata: { name: "p" }, spec: {} }) +
        "---\n" +
        stringify({ ...workerDoc("w"), apiVersion: "v1" }),
      "k.yaml",
    );
    expect(fields(r.errors)).toEqual([
      "apiVersion: required (loom.dev/v1alpha1)",
      "kind: must be one of: Campaign, Queue, Task, Worker",
      "apiVersion: must be loom.dev/v1alpha1",
    ]);
    expect(r.resources).toEqual([]);
  });

  it("a document that is none of these is an error; empty documents are skipped", () => {
    expect(fields(parseDocuments("hello: world\n", "x.yaml").errors)).toEqual([
      ": not a Loom resource (apiVersion, kind), an inventory (inventory_version) or a campaign manifest (schema_version, campaign_id, cases)",
    ]);
    expect(parseDocuments("---\n---\n", "empty.yaml")).toEqual({
      resources: [],
      tasks: [],
      inventories: [],
      errors: [],
      notes: [],
    });
  });

  describe("a parse error names the file and line", () => {
    it("YAML", () => {
      const r = parseDocuments("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml");
      expect(r.errors).toHaveLength(1);
      expect(r.errors[0]).toMatchObject({ source: "bad.yaml", line: 3 });
      expect(formatInputError(r.errors[0])).toMatch(/^bad\.yaml:3: invalid YAML: /);
    });
    it("YAML duplicate keys", () => {
      expect(parseDocuments("kind: Worker\nkind: Task\n", "dup.yaml").errors[0]).toMatchObject({ line: 2 });
    });
    it("JSON, with or without a position in the runtime's message", () => {
      expect(parseDocuments('{\n  "a": 1,\n  "b": }\n', "bad.json").errors[0]).toMatchObject({
        source: "bad.json",
        line: 3,
      });
      expect(parseDocuments('{\n  "a": 1\n  "b": 2\n}', "bad2.json").errors[0]).toMatchObject({ line: 3 });
      expect(parseDocuments('{\n  "a": [1,\n', "short.json").errors[0]).toMatchObject({ line: 2 });
    });
    it("the JSON scanner agrees with JSON.parse", () => {
      for (const ok of ['{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\n"]}', "[]", ' "s" '])
        expect(jsonErrorOffset(ok)).toBeUndefined();
      expect(jsonErrorOffset('{"a":}')).toBe(5);
      expect(jsonErrorOffset("[1,]")).toBe(3);
      expect(jsonErrorOffset("[01]")).toBe(2);
      expect(jsonErrorOffset("{} x")).toBe(3);
    });
    it("JSON nested deeper than the scanner's stack names no line rather than line 1", () => {
      const deep = "\n\n" + "[".repeat(50_000);
      expect(jsonErrorOffset(deep)).toBeUndefined();
      expect(parseDocuments(deep, "deep.json").errors[0]).toMatchObject({ source: "deep.json", line: undefined });
    });
    it("other documents of the file are still checked", () => {
      const r = parseDocuments("a: [\n---\n" + stringify(workerDoc("w", { port: 0 })), "two.yaml");
      expect(r.errors.map((e) => e.line)).toEqual([2, expect.any(Number)]);
      expect(r.errors[1].field).toBe("spec.port");
    });
  });

  it("names are unique per kind within a file; expanded tasks share the Task namespace", () => {
    const r = parseDocuments(
      [
        stringify(workerDoc("w")),
        stringify(workerDoc("w")),
        stringify({
          apiVersion: "loom.dev/v1alpha1",
          kind: "Campaign",
          metadata: { name: "c" },
          spec: { campaign_id: "c", cases: [c({ task_id: "t1" })] },
        }),
        stringify({ apiVersion: "loom.dev/v1alpha1", kind: "Task", metadata: { name: "t1" }, spec: {} }),
      ].join("---\n"),
      "d.yaml",
    );
    expect(formatInputErrors(r.errors)).toEqual([
      'd.yaml:10: Worker/w: metadata.name: duplicate Worker "w" (also declared at d.yaml:4)',
      'd.yaml:20: spec.cases[0] (t1): duplicate Task "t1" (also declared at d.yaml:28)',
    ]);
  });
});

describe("loadPaths: files and GitOps folders", () => {
  const tree = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(tmpdir(), "loom-inputs-"));
    for (const [rel, text] of Object.entries(files)) {
      mkdirSync(join(dir, rel, ".."), { recursive: true });
      writeFileSync(join(dir, rel), text);
    }
    return dir;
  };

  it("walks directories recursively in sorted order, only *.json, *.yaml, *.yml, *.jsonl, skipping hidden entries", () => {
    const dir = tree({
      "b/workers.yml": stringify(inventory(worker({ worker_id: "w2" }))),
      "a/inventory.json": JSON.stringify(inventory(worker({ worker_id: "w1" }))),
      "c/sweep.jsonl": JSON.stringify({ schema_version: 1, campaign_id: "s", ...c() }),
      "c/camp.yaml": stringify(manifest([c()])),
      "README.md": "# not an input",
      ".git/config.yaml": "not: loom",
    });
    const r = loadPaths([dir]);
    expect(r.errors).toEqual([]);
    expect(r.resources.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual([
      "Worker/w1",
      "Worker/w2",
      "Campaign/demo",
      "Campaign/s",
    ]);
    expect(r.inventories.map((i) => i.source)).toEqual([join(dir, "a/inventory.json"), join(dir, "b/workers.yml")]);
  });

  it("every error of every file in one pass, each naming its file", () => {
    const dir = tree({
      "inv.json": JSON.stringify(inventory(worker({ worker_id: "w1", resource_capacity: { gpu_types: ["l4"] } }))),
      "camp.yaml": stringify(manifest([c({ execution_profile: { placement: "solo" } })])),
      "broken.yaml": "a: [\n",
    });
    const r = loadPaths([dir, join(dir, "missing.yaml")]);
    expect(formatInputErrors(r.errors)).toEqual([
      `${join(dir, "missing.yaml")}: cannot read: ENOENT`,
      expect.stringMatching(new RegExp(`^${join(dir, "broken.yaml")}:2: invalid YAML: `)),
      `${join(dir, "camp.yaml")}:8: cases[0] (demo__a__base__run-001).execution_profile.placement: must be one of: shared, exclusive`,
      `${join(dir, "inv.json")}:1: workers[0] (w1).resource_capacity.gpu_types: requires a positive gpu_count`,
    ]);
  });

  it("the same name in two files is an error naming both", () => {
    const dir = tree({
      "a.json": JSON.stringify(inventory(worker({ worker_id: "w1" }))),
      "b.yaml": stringify(inventory(worker({ worker_id: "w1" }))),
    });
    const r = loadPaths([dir]);
    expect(formatInputErrors(r.errors)).toEqual([
      `${join(dir, "b.yaml")}:3: workers[0] (w1).worker_id: duplicate Worker "w1" (also declared at ${join(dir, "a.json")}:1)`,
    ]);
    expect(r.resources).toHaveLength(1);
  });

  it("a file named twice is read once", () => {
    const dir = tree({ "a.json": JSON.stringify(inventory(worker({ worker_id: "w1" }))) });
    expect(loadPaths([dir, join(dir, "a.json")]).errors).toEqual([]);
  });

  it("assertLoaded throws one InputValidationError with every formatted error", () => {
    const r = parseDocuments(
      JSON.stringify(inventory(worker({ worker_id: "a", port: 0 }), worker({ worker_id: "b", port: 0 }))),
      "inv.json",
    );
    expect(() => assertLoaded(r)).toThrow(InputValidationError);
    try {
      assertLoaded(r);
    } catch (e) {
      expect((e as InputValidationError).message).toBe(
        "inv.json:1: workers[0] (a).port: must be >= 1\ninv.json:1: workers[1] (b).port: must be >= 1",
      );
      expect((e as InputValidationError).errors).toHaveLength(2);
    }
  });
});
