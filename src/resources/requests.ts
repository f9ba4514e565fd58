// The v1 request bodies (RUNNER_PROTOCOL 1a/1b) as schemas. Fields that a resource also
// holds take their rule from the CRD; the rest are stated here once. Bodies stay open (a v1
// Runner sends fields Loom does not read), but every field Loom reads or stores is checked,
// and the default limits (safe integers, bounded strings without control characters,
// bounded arrays and nesting) apply to all of them.
import type { JSONSchema } from "./crds.ts";
import { LIMITS, MAX_INT } from "./limits.ts";
import { compileSchema, crdField, type FieldError } from "./validate.ts";

const ID: JSONSchema = { type: "string", minLength: 1, maxLength: 253, pattern: "^[A-Za-z0-9]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$" };
const TEXT: JSONSchema = { type: "string", maxLength: LIMITS.stringLength };
const COUNT: JSONSchema = { type: "number", minimum: 0, maximum: MAX_INT };
const obj = (properties: Record<string, JSONSchema>, required: string[] = []): JSONSchema => ({ type: "object", properties, ...(required.length ? { required } : {}) });

/** What a Runner reports about its host; the capacity defaults read these numbers. */
const HOST_RESOURCES = obj({ cpu_count: COUNT, mem_total_mb: COUNT, mem_available_mb: COUNT, disk_total_mb: COUNT, disk_available_mb: COUNT, gpu_count: COUNT });
const HEALTH = obj({ hostname: { ...TEXT, maxLength: 253 }, platform: TEXT, resources: HOST_RESOURCES, source_cache: obj({ enabled: { type: "boolean" }, keys: { type: "array", maxItems: 10_000, items: TEXT } }) });
const FENCED = { worker_id: ID, task_id: ID, attempt_no: { type: "integer", minimum: 0 } };

const SCHEMAS = {
  register: obj({
    worker_id: ID,
    max_concurrency: crdField("Worker", "spec.max_concurrency"),
    initial_concurrency: crdField("Worker", "spec.initial_concurrency"),
    capabilities: crdField("Worker", "spec.capabilities"),
    health: HEALTH,
  }),
  heartbeat: obj({ worker_id: ID, current_runs: { type: "array", maxItems: 1024, items: { type: "object", properties: { task_id: TEXT } } }, health: HEALTH }),
  claim: obj({ worker_id: ID }),
  start: obj(FENCED),
  renew: obj(FENCED),
  complete: obj(FENCED),
  fail: obj({ ...FENCED, error: { type: "object", properties: { type: TEXT, detail: { type: "string", maxLength: LIMITS.freeStringLength } } } }),
  push: obj({ task_id: ID, worker_id: ID }),
  "repo-run": obj({
    repo_url: { type: "string", minLength: 1, maxLength: 2048 },
    command: { type: "string", minLength: 1, maxLength: 64 * 1024, pattern: "^[^\\u0000]*$" },
    commit: TEXT,
    ref: TEXT,
    task_id: ID,
    campaign_id: TEXT,
    case_id: TEXT,
    setting_id: TEXT,
    run_id: TEXT,
    operator: TEXT,
    required_capability: crdField("Task", "spec.required_capability"),
    priority: crdField("Task", "spec.priority"),
    placement: { type: "string", enum: ["shared", "exclusive"] },
    timeout_seconds: { type: "integer", minimum: 1, maximum: LIMITS.leaseSeconds },
    env: { type: "object", maxProperties: 256, additionalProperties: { type: "string", maxLength: 64 * 1024, pattern: "^[^\\u0000]*$" } },
    artifact_paths: { type: "array", maxItems: 256, items: TEXT },
  }),
} satisfies Record<string, JSONSchema>;

const checks = new Map(Object.entries(SCHEMAS).map(([k, s]) => [k, compileSchema(s)]));

export type RequestName = keyof typeof SCHEMAS;

export function requestErrors(name: RequestName, body: unknown): FieldError[] {
  return checks.get(name)!(body);
}

