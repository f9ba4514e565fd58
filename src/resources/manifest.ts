// Campaign manifest v1 (RUNNER_PROTOCOL §5) -> a Campaign resource, and the pure expansion
// of a Campaign into one normalised Task per case. The Campaign controller and the file
// loader both call expandCampaign, so a file is rejected for exactly what the controller
// would fail on.
import { API_VERSION } from "./crds.ts";
import { validateObject } from "./validate.ts";
import type { Campaign, Task, TaskSpec } from "./types.ts";
import type { OwnerReference } from "./meta.ts";
import { caseTaskId, packageId, slug } from "./ids.ts";
import { mergeProfiles, profileShapeErrors } from "./profile.ts";
import { type ItemFieldError, dedupeErrors, fieldError, isPlainObject, rebaseField } from "./input-errors.ts";
import { readV1Manifest } from "./v1-manifest.ts";
import { jsonClone } from "./json.ts";
import { HAS_CONTROL } from "./limits.ts";

/** `nominate_after_seconds` is the campaign's starvation threshold and `queue` its Queue, both copied into each task (see the Campaign CRD). */
export const MANIFEST_KEYS = [
  "schema_version",
  "campaign_id",
  "nominate_after_seconds",
  "queue",
  "defaults",
  "cases",
] as const;

/**
 * The keys a case may have. Identity, scheduling, then what the Runner executes; the
 * execution keys are copied into the payload. `commands` is accepted as another name for
 * `phases` because the normalised payload carries both.
 */
export const CASE_KEYS = [
  "task_id",
  "case_id",
  "setting_id",
  "run_id",
  "case_version",
  "scenario_id",
  "package_id",
  "required_capability",
  "priority",
  "expected",
  "execution_profile",
  "retry_policy",
  "payload",
  "runner",
  "command",
  "source",
  "phases",
  "commands",
  "env",
  "artifact_paths",
  "timeout_seconds",
  "continue_on_error",
  // `vars` are `{name}` template values; the other three are v1 contracts Loom carries in the payload.
  "vars",
  "extensions",
  "oracle",
  "trajectory_export",
] as const;

/** Defaults may set anything a case may, except its own task_id (which would repeat in every case). */
export const DEFAULT_KEYS = CASE_KEYS.filter((k) => k !== "task_id");

export const PHASE_KEYS = [
  "name",
  "command",
  "args",
  "cwd",
  "env",
  "timeout_seconds",
  "continue_on_error",
  "artifact_paths",
] as const;
export const RUNNERS = ["noop", "shell", "repo"] as const;
export const CAMPAIGN_LABEL = "loom.dev/campaign";
export const DEFAULT_TIMEOUT_SECONDS = 300;
export const DEFAULT_RUNNER = "repo";
export const DEFAULT_CAPABILITY = "linux";

export type Phase = {
  name: string;
  command?: string | string[];
  args?: string[];
  cwd?: string;
  env?: Record<string, string>;
  timeout_seconds?: number;
  continue_on_error?: boolean;
  artifact_paths?: string[];
};

export type ExpandResult = { tasks: Task[]; errors: ItemFieldError[] };
/** `notes` name the v1 fields kept without Loom acting on them (never errors). */
export type ManifestResult = { campaign?: Campaign; tasks: Task[]; errors: ItemFieldError[]; notes: ItemFieldError[] };

type Obj = Record<string, unknown>;
type FieldCheck = (v: unknown, field: string) => ItemFieldError[];

const ok: ItemFieldError[] = [];
const bad = (field: string, message: string, reason: ItemFieldError["reason"] = "FieldValueInvalid") => [
  fieldError(field, message, reason),
];

const isId = (v: unknown) => (typeof v === "string" && v !== "" && !HAS_CONTROL.test(v)) || Number.isSafeInteger(v);
const checkString: FieldCheck = (v, f) =>
  typeof v === "string" ? ok : bad(f, "must be a string", "FieldValueTypeInvalid");
const checkBool: FieldCheck = (v, f) =>
  typeof v === "boolean" ? ok : bad(f, "must be a boolean", "FieldValueTypeInvalid");
const checkPositive: FieldCheck = (v, f) =>
  typeof v === "number" && Number.isFinite(v) && v > 0 ? ok : bad(f, "must be a positive number");
const checkStringList: FieldCheck = (v, f) => {
  if (!Array.isArray(v)) return bad(f, "must be a list of strings", "FieldValueTypeInvalid");
  return v.flatMap((x, i) =>
    typeof x === "string" ? [] : bad(`${f}[${i}]`, "must be a string", "FieldValueTypeInvalid"),
  );
};
const checkCommand: FieldCheck = (v, f) =>
  typeof v === "string" ? (v.trim() ? ok : bad(f, "must not be empty")) : checkStringList(v, f);
const checkEnv: FieldCheck = (v, f) => {
  if (!isPlainObject(v)) return bad(f, "must be a map of strings", "FieldValueTypeInvalid");
  return Object.entries(v).flatMap(([k, x]) =>
    typeof x === "string" ? [] : bad(`${f}.${k}`, "must be a string", "FieldValueTypeInvalid"),
  );
};
const checkRunner: FieldCheck = (v, f) =>
  (RUNNERS as readonly unknown[]).includes(v)
    ? ok
    : bad(f, `must be one of: ${RUNNERS.join(", ")}`, "FieldValueNotSupported");
const checkSource: FieldCheck = (v, f) =>
  isPlainObject(v) || (typeof v === "string" && v !== "")
    ? ok
    : bad(f, "must be an object or a non-empty string", "FieldValueTypeInvalid");
const checkRetry: FieldCheck = (v, f) => {
  if (!isPlainObject(v)) return bad(f, "must be an object", "FieldValueTypeInvalid");
  return v.categories !== undefined ? checkStringList(v.categories, `${f}.categories`) : ok;
};

/** Checks for the keys Loom interprets inside a payload (anything else passes through unchanged). */
const PAYLOAD_CHECKS: Record<string, FieldCheck> = {
  runner: checkRunner,
  command: checkCommand,
  source: checkSource,
  phases: (v, f) => checkPhaseList(v, f),
  commands: (v, f) => checkPhaseList(v, f),
  env: checkEnv,
  artifact_paths: checkStringList,
  timeout_seconds: checkPositive,
  continue_on_error: checkBool,
  retry_policy: checkRetry,
  execution_profile: (v, f) => profileShapeErrors(v, f),
};

/**
 * Checks for case and defaults keys. Keys the Campaign CRD checks (the ids) and the Task CRD
 * checks (priority, required_capability, expected, the insides of execution_profile and
 * retry_policy) are left to them, so one rule has one message.
 */
const LAYER_CHECKS: Record<string, FieldCheck> = {
  ...PAYLOAD_CHECKS,
  vars: (v, f) => (isPlainObject(v) ? ok : bad(f, "must be a map of template values", "FieldValueTypeInvalid")),
  extensions: (v, f) => (isPlainObject(v) ? ok : bad(f, "must be an object", "FieldValueTypeInvalid")),
  oracle: (v, f) => (isPlainObject(v) ? ok : bad(f, "must be an object", "FieldValueTypeInvalid")),
  trajectory_export: (v, f) => (isPlainObject(v) ? ok : bad(f, "must be an object", "FieldValueTypeInvalid")),
  payload: (v, f) =>
    isPlainObject(v) ? checkKnown(v, f, PAYLOAD_CHECKS) : bad(f, "must be an object", "FieldValueTypeInvalid"),
};

function checkKnown(obj: Obj, base: string, checks: Record<string, FieldCheck>): ItemFieldError[] {
  const errs: ItemFieldError[] = [];
  for (const [k, v] of Object.entries(obj))
    if (checks[k] && v !== undefined) errs.push(...checks[k](v, `${base}.${k}`));
  if (
    obj.phases !== undefined &&
    obj.commands !== undefined &&
    JSON.stringify(obj.phases) !== JSON.stringify(obj.commands)
  )
    errs.push(fieldError(`${base}.commands`, "conflicts with phases (commands is another name for phases; set one)"));
  return errs;
}

function unknownKeys(obj: Obj, allowed: readonly string[], base: string): ItemFieldError[] {
  return Object.keys(obj)
    .filter((k) => !allowed.includes(k))
    .map((k) => fieldError(`${base}.${k}`, "unknown field", "FieldUnknown"));
}

function checkPhaseList(v: unknown, field: string): ItemFieldError[] {
  if (!Array.isArray(v)) return bad(field, "must be a list of phases", "FieldValueTypeInvalid");
  const errs: ItemFieldError[] = [];
  const names = new Map<string, number>();
  v.forEach((p, j) => {
    const at = `${field}[${j}]`;
    if (!isPlainObject(p)) return errs.push(...bad(at, "must be an object", "FieldValueTypeInvalid"));
    errs.push(...unknownKeys(p, PHASE_KEYS, at));
    if (typeof p.name !== "string" || p.name === "")
      errs.push(
        ...bad(
          `${at}.name`,
          p.name === undefined ? "required" : "must be a non-empty string",
          p.name === undefined ? "FieldValueRequired" : "FieldValueTypeInvalid",
        ),
      );
    else if (names.has(p.name))
      errs.push(
        ...bad(
          `${at}.name`,
          `duplicate phase name "${p.name}" (also ${field}[${names.get(p.name)}])`,
          "FieldValueDuplicate",
        ),
      );
    else names.set(p.name, j);
    const checks: Record<string, FieldCheck> = {
      command: checkCommand,
      args: checkStringList,
      cwd: checkString,
      env: checkEnv,
      timeout_seconds: checkPositive,
      continue_on_error: checkBool,
      artifact_paths: checkStringList,
    };
    errs.push(...checkKnown(p, at, checks));
  });
  return errs;
}

/** Phase layers, earliest first: a known name overrides that phase (env merges); a new name is appended and needs a command. */
function mergePhaseLayers(layers: { list: unknown; field: string }[]): { phases: Phase[]; errors: ItemFieldError[] } {
  const phases: Phase[] = [];
  const errors: ItemFieldError[] = [];
  for (const { list, field } of layers) {
    if (!Array.isArray(list)) continue;
    list.forEach((p, j) => {
      if (!isPlainObject(p) || typeof p.name !== "string" || p.name === "") return;
      const i = phases.findIndex((x) => x.name === p.name);
      if (i >= 0) {
        const base = phases[i];
        const env =
          base.env || p.env
            ? { ...(base.env ?? {}), ...(isPlainObject(p.env) ? (p.env as Record<string, string>) : {}) }
            : undefined;
        phases[i] = { ...base, ...(p as Phase), ...(env ? { env } : {}) };
      } else if (p.command === undefined) {
        errors.push(
          fieldError(`${field}[${j}].command`, `required: no earlier phase is named "${p.name}"`, "FieldValueRequired"),
        );
      } else phases.push({ ...(p as Phase) });
    });
  }
  return { phases, errors };
}

/** Objects merge key by key, recursively; anything else (lists included) is replaced. */
function deepMerge(a: Obj, b: Obj): Obj {
  const out: Obj = { ...a };
  for (const [k, v] of Object.entries(b)) {
    if (v === undefined) continue;
    out[k] = isPlainObject(out[k]) && isPlainObject(v) ? deepMerge(out[k], v) : v;
  }
  return out;
}

/** `{name}` placeholders expand to the task's own values; unknown names are left as written. */
function expander(vars: Record<string, string>): <T>(v: T) => T {
  const one = (s: string) => s.replace(/\{([A-Za-z_]+)\}/g, (m, k: string) => (k in vars ? vars[k] : m));
  const walk = (v: unknown): unknown => {
    if (typeof v === "string") return one(v);
    if (Array.isArray(v)) return v.map(walk);
    if (isPlainObject(v)) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  return walk as <T>(v: T) => T;
}

const first = (...vs: unknown[]) => vs.find((v) => v !== undefined);
const objOr = (v: unknown): Obj => (isPlainObject(v) ? v : {});
const idString = (v: unknown): string | undefined => (isId(v) ? String(v) : undefined);
const phasesOf = (layer: Obj) =>
  layer.phases !== undefined ? { list: layer.phases, key: "phases" } : { list: layer.commands, key: "commands" };

/**
 * One normalised Task per case (RUNNER_PROTOCOL §5 "Normalised task"). Pure: the same
 * Campaign always gives the same tasks. Error fields are relative to the Campaign spec
 * (`cases[3].execution_profile.resources.gpu_types`, `defaults.env.X`); tasks with errors
 * of their own, and later duplicates, are left out of `tasks`.
 */
/** The Campaign layer: its id and its defaults (with the defaults' payload). */
function campaignLayer(spec: Obj, errors: ItemFieldError[]): { cid: string; d: Obj; dp: Obj } {
  let cid = "unknown";
  if (spec.campaign_id === undefined || spec.campaign_id === "")
    errors.push(fieldError("campaign_id", "required", "FieldValueRequired"));
  else if (typeof spec.campaign_id !== "string")
    errors.push(fieldError("campaign_id", "must be a string", "FieldValueTypeInvalid"));
  // Ids are slugged as v1 slugs them, so its normalised form and Loom's tasks agree.
  else cid = slug(spec.campaign_id);

  let d: Obj = {};
  if (spec.defaults !== undefined) {
    if (!isPlainObject(spec.defaults))
      errors.push(fieldError("defaults", "must be an object", "FieldValueTypeInvalid"));
    else {
      d = spec.defaults;
      errors.push(...unknownKeys(d, DEFAULT_KEYS, "defaults"), ...checkKnown(d, "defaults", LAYER_CHECKS));
    }
  }
  return { cid, d, dp: objOr(d.payload) };
}

type CaseIds = Record<"case_id" | "setting_id" | "run_id", string>;
type CaseIdentity = {
  ids: CaseIds;
  id: string;
  resolved: boolean;
  case_version: string;
  scenario_id: unknown;
  package_id: unknown;
  vars: Record<string, string>;
};

/** The case layer's identity: its ids (case over defaults), its task id and the template values. */
function caseIdentity(cid: string, c: Obj, d: Obj, at: string, caseErrors: ItemFieldError[]): CaseIdentity {
  const ids: CaseIds = { case_id: "unknown", setting_id: "unknown", run_id: "unknown" };
  let resolved = true;
  for (const k of ["case_id", "setting_id", "run_id"] as const) {
    const v = first(c[k], d[k]);
    if (v === undefined || v === null) {
      caseErrors.push(fieldError(`${at}.${k}`, "required (on the case or in defaults)", "FieldValueRequired"));
      resolved = false;
    } else {
      const s = idString(v);
      if (s === undefined)
        resolved = false; // reported by the layer checks
      else ids[k] = slug(s);
    }
  }
  const id = caseTaskId(cid, { task_id: idString(c.task_id), ...ids });
  const case_version = idString(first(c.case_version, d.case_version)) ?? "v1";
  const scenario_id = first(c.scenario_id, d.scenario_id) ?? ids.setting_id;
  const given = first(c.package_id, d.package_id);
  const package_id = given === undefined || given === null ? packageId(cid, ids.setting_id) : slug(given);
  // Template values below the task's own identity, as v1 had them (defaults < case < ids).
  const own = Object.entries({ ...objOr(d.vars), ...objOr(c.vars) }).filter(([, v]) =>
    ["string", "number", "boolean"].includes(typeof v),
  );
  const vars: Record<string, string> = {
    ...Object.fromEntries(own.map(([k, v]) => [k, String(v)])),
    campaign_id: cid,
    ...ids,
    task_id: id,
    case_version,
    scenario_id: String(scenario_id),
    package_id: String(package_id),
  };
  return { ids, id, resolved, case_version, scenario_id, package_id, vars };
}

type Layers = { d: Obj; dp: Obj; c: Obj; cp: Obj; at: string };

/** The payload layer: payload < defaults < case for every key, then phases, profile and contracts. */
function casePayload(
  l: Layers,
  cid: string,
  who: CaseIdentity,
  index: number,
  caseErrors: ItemFieldError[],
): { payload: Obj; profile: unknown; retry: Obj } {
  const { d, dp, c, cp, at } = l;
  const { ids } = who;
  const subject = who.resolved ? who.id : undefined;
  const expand = expander(who.vars);
  // payload = defaults.payload merged with case.payload; the keys below then layer payload < defaults < case.
  const payload = deepMerge(dp, cp);
  const pick = (k: string) => first(c[k], d[k], payload[k]);
  const valid = (k: string, v: unknown) => v !== undefined && (PAYLOAD_CHECKS[k]?.(v, k).length ?? 0) === 0;
  const pickValid = (k: string) => [c[k], d[k], payload[k]].find((v) => valid(k, v));

  const runner = (pickValid("runner") as string | undefined) ?? DEFAULT_RUNNER;
  const command = pickValid("command");
  if (runner === "shell" && pick("command") === undefined)
    caseErrors.push(fieldError(`${at}.command`, "required when runner is shell", "FieldValueRequired"));
  const source = first(
    pickValid("source"),
    valid("source", payload.source_descriptor) ? payload.source_descriptor : undefined,
  );

  const env: Record<string, string> = {};
  for (const layer of [payload.env, d.env, c.env]) if (valid("env", layer)) Object.assign(env, layer);

  const retry: Obj = {};
  for (const layer of [payload.retry_policy, d.retry_policy, c.retry_policy])
    if (isPlainObject(layer)) Object.assign(retry, layer);
  if ("categories" in retry) {
    retry.retry_categories ??= retry.categories;
    delete retry.categories;
  }

  const layers = [
    { layer: d, field: "defaults" },
    { layer: dp, field: "defaults.payload" },
    { layer: c, field: at },
    { layer: cp, field: `${at}.payload` },
  ].map(({ layer, field }) => {
    const { list, key } = phasesOf(layer);
    return { list, field: `${field}.${key}` };
  });
  const merged = mergePhaseLayers(layers);
  caseErrors.push(...merged.errors.map((e) => (e.field.startsWith("defaults") ? e : { ...e, subject })));
  const phases = expand(merged.phases);

  const profile = mergeProfiles(d.execution_profile, dp.execution_profile, c.execution_profile, cp.execution_profile);
  const contracts = v1Contracts([d, dp, c, cp], expand);

  return {
    payload: {
      ...payload,
      runner,
      ...(command !== undefined ? { command: expand(command) } : {}),
      artifact_paths: expand((pickValid("artifact_paths") as string[] | undefined) ?? []),
      env: expand(env),
      timeout_seconds: pickValid("timeout_seconds") ?? DEFAULT_TIMEOUT_SECONDS,
      continue_on_error: pickValid("continue_on_error") ?? false,
      normalized: {
        campaign_id: cid,
        case_id: ids.case_id,
        run_id: ids.run_id,
        setting_id: ids.setting_id,
        source_index: index + 1,
      }, // v1 counts cases from 1
      retry_policy: retry,
      phases,
      commands: phases,
      ...(source !== undefined ? { source, source_descriptor: source } : {}),
      execution_profile: profile,
      ...contracts,
    },
    profile,
    retry,
  };
}

/** The Task layer: the object the Campaign owns, from the case's identity and payload. */
function caseTask(
  campaign: Campaign,
  owner: string,
  cid: string,
  l: Layers,
  who: CaseIdentity,
  p: { payload: Obj; profile: unknown; retry: Obj },
): Task {
  const { d, c } = l;
  const expected = first(c.expected, d.expected);
  const taskSpec = {
    task_kind: "execution",
    campaign_id: cid,
    ...who.ids,
    case_version: who.case_version,
    scenario_id: who.scenario_id,
    package_id: who.package_id,
    required_capability: first(c.required_capability, d.required_capability) ?? DEFAULT_CAPABILITY,
    priority: first(c.priority, d.priority) ?? 0,
    ...(campaign.spec.nominate_after_seconds !== undefined
      ? { nominate_after_seconds: campaign.spec.nominate_after_seconds }
      : {}),
    ...(campaign.spec.queue !== undefined ? { queue: campaign.spec.queue } : {}),
    execution_profile: p.profile,
    retry_policy: p.retry,
    payload: p.payload,
    ...(expected !== undefined ? { expected } : {}),
  };
  const ownerRef = {
    apiVersion: API_VERSION,
    kind: "Campaign",
    name: owner,
    controller: true,
    ...(campaign.metadata?.uid ? { uid: campaign.metadata.uid } : {}),
  };
  // A JSON copy: no object is shared between tasks, the payload and the Campaign (shared
  // objects would also print as YAML anchors, and structuredClone keeps sharing).
  return jsonClone({
    apiVersion: API_VERSION,
    kind: "Task" as const,
    metadata: {
      name: who.id,
      labels: { [CAMPAIGN_LABEL]: owner },
      // uid is filled in once the Campaign is stored; until then the name identifies it.
      ownerReferences: [ownerRef as OwnerReference],
    },
    // Case and default values are unchecked manifest input; expandCampaign checks every task
    // against the Task schema before anyone sees it.
    spec: taskSpec as unknown as TaskSpec,
  });
}

export function expandCampaign(campaign: Campaign): ExpandResult {
  const errors: ItemFieldError[] = [];
  const tasks: Task[] = [];
  const spec: Obj = isPlainObject(campaign?.spec) ? campaign.spec : {};
  if (!isPlainObject(campaign?.spec))
    return { tasks, errors: [fieldError("", "spec must be an object", "FieldValueTypeInvalid")] };
  const { cid, d, dp } = campaignLayer(spec, errors);

  if (!Array.isArray(spec.cases)) {
    errors.push(
      fieldError(
        "cases",
        spec.cases === undefined ? "required" : "must be a list",
        spec.cases === undefined ? "FieldValueRequired" : "FieldValueTypeInvalid",
      ),
    );
    return { tasks, errors: dedupeErrors(errors) };
  }

  const owner = campaign.metadata?.name ?? slug(cid);
  const seen = new Map<string, number>();
  spec.cases.forEach((raw, i) => {
    const at = `cases[${i}]`;
    if (!isPlainObject(raw)) return errors.push(fieldError(at, "must be an object", "FieldValueTypeInvalid"));
    const c: Obj = raw;
    const cp = objOr(c.payload);
    const caseErrors: ItemFieldError[] = [...unknownKeys(c, CASE_KEYS, at), ...checkKnown(c, at, LAYER_CHECKS)];
    const who = caseIdentity(cid, c, d, at, caseErrors);
    const { id, resolved } = who;
    const subject = resolved ? id : undefined;
    const l: Layers = { d, dp, c, cp, at };
    const task = caseTask(campaign, owner, cid, l, who, casePayload(l, cid, who, i, caseErrors));

    for (const e of validateObject(task)) {
      if (e.field.startsWith("spec.nominate_after_seconds") || e.field.startsWith("spec.queue")) continue; // the Campaign's own fields: its schema reports them once
      const field = taskFieldToCase(e.field, at, c, d);
      const message = e.field === "metadata.name" ? `task id "${id}" ${e.message}` : e.message;
      caseErrors.push(field.startsWith("defaults") ? { ...e, field, message } : { ...e, field, message, subject });
    }
    for (const e of caseErrors)
      errors.push(e.field.startsWith("defaults") || e.subject !== undefined ? e : { ...e, subject });

    const firstAt = seen.get(id);
    if (firstAt !== undefined) {
      errors.push(
        fieldError(
          c.task_id !== undefined ? `${at}.task_id` : at,
          `duplicate task id "${id}" (also cases[${firstAt}])`,
          "FieldValueDuplicate",
          id,
        ),
      );
      return;
    }
    if (!resolved) return;
    seen.set(id, i);
    if (caseErrors.length === 0) tasks.push(task);
  });
  return { tasks, errors: dedupeErrors(errors) };
}

/**
 * v1's layered contracts, lowest layer first: `extensions` merge by top-level key and are not
 * templated; `oracle` and `trajectory_export` are taken whole from the highest layer that sets them.
 */
function v1Contracts(layers: Obj[], expand: <T>(v: T) => T): Obj {
  const out: Obj = {};
  const ext = layers.map((l) => l.extensions).filter(isPlainObject);
  if (ext.length) out.extensions = Object.assign({}, ...ext);
  for (const k of ["oracle", "trajectory_export"]) {
    const top = layers
      .map((l) => l[k])
      .filter(isPlainObject)
      .at(-1);
    if (top) out[k] = expand(top);
  }
  return out;
}

/** A Task schema error, in the case's terms; a scalar inherited from defaults is reported there. */
function taskFieldToCase(field: string, at: string, c: Obj, d: Obj): string {
  if (field === "metadata.name") return c.task_id !== undefined ? `${at}.task_id` : at;
  for (const nested of ["execution_profile", "retry_policy", "payload"]) {
    const r = rebaseField(field, `spec.${nested}`, `${at}.${nested}`);
    if (r !== undefined) return r;
  }
  const top = /^spec\.([^.[]+)/.exec(field)?.[1];
  if (top !== undefined && c[top] === undefined && d[top] !== undefined) return rebaseField(field, "spec", "defaults")!;
  return rebaseField(field, "spec", at) ?? `${at}${field ? `.${field}` : ""}`;
}

/** The Campaign resource for a parsed manifest object (schema v1), with the manifest's own checks. */
export function manifestToCampaign(input: unknown): {
  campaign?: Campaign;
  errors: ItemFieldError[];
  notes: ItemFieldError[];
} {
  if (!isPlainObject(input))
    return { errors: [fieldError("", "a manifest must be an object", "FieldValueTypeInvalid")], notes: [] };
  const { doc, notes, annotations } = readV1Manifest(input, MANIFEST_KEYS, CASE_KEYS);
  const errors: ItemFieldError[] = unknownKeys(doc, MANIFEST_KEYS, "").map((e) => ({ ...e, field: e.field.slice(1) }));
  if (doc.schema_version === undefined) errors.push(fieldError("schema_version", "required", "FieldValueRequired"));
  else if (doc.schema_version !== 1) errors.push(fieldError("schema_version", "must be 1", "FieldValueNotSupported"));
  const cid = doc.campaign_id;
  if (cid === undefined || cid === "") errors.push(fieldError("campaign_id", "required", "FieldValueRequired"));
  else if (typeof cid !== "string") errors.push(fieldError("campaign_id", "must be a string", "FieldValueTypeInvalid"));
  if (doc.cases === undefined) errors.push(fieldError("cases", "required", "FieldValueRequired"));
  else if (!Array.isArray(doc.cases)) errors.push(fieldError("cases", "must be a list", "FieldValueTypeInvalid"));
  else if (doc.cases.length === 0) errors.push(fieldError("cases", "must list at least one case"));
  const name = slug(typeof cid === "string" ? cid : "");
  const spec: Obj = Object.fromEntries(
    Object.entries({
      schema_version: doc.schema_version,
      campaign_id: cid,
      nominate_after_seconds: doc.nominate_after_seconds,
      queue: doc.queue,
      defaults: doc.defaults,
      cases: doc.cases,
    }).filter(([, v]) => v !== undefined),
  );
  const campaign = {
    apiVersion: API_VERSION as Campaign["apiVersion"],
    kind: "Campaign" as const,
    metadata: { name, labels: { [CAMPAIGN_LABEL]: name }, ...(Object.keys(annotations).length ? { annotations } : {}) },
    // Manifest fields are unchecked input; finishManifest checks the Campaign against its schema.
    spec: spec as unknown as Campaign["spec"],
  };
  return { campaign, errors, notes };
}

/** Manifest -> Campaign -> Tasks, every check in one pass; fields are in the manifest's terms. */
export function convertManifest(doc: unknown): ManifestResult {
  const { campaign, errors, notes } = manifestToCampaign(doc);
  if (!campaign) return { tasks: [], errors, notes };
  return { ...finishManifest(campaign, errors, new Set(errors.map((e) => e.field))), notes };
}

/** Schema and expansion errors for a manifest's Campaign; `suppress` names fields the caller already reported in its own words. */
function finishManifest(
  campaign: Campaign,
  errors: ItemFieldError[],
  suppress: Set<string>,
): Omit<ManifestResult, "notes"> {
  const out = [...errors];
  for (const e of validateObject(campaign)) {
    const field = e.field === "metadata.name" ? "campaign_id" : (rebaseField(e.field, "spec", "") ?? e.field);
    if (suppress.has(field)) continue;
    out.push({
      ...e,
      field,
      ...(e.field === "metadata.name" ? { message: `"${campaign.metadata.name}" ${e.message}` } : {}),
    });
  }
  const expanded = expandCampaign(campaign);
  out.push(...expanded.errors.filter((e) => !suppress.has(e.field)));
  return { campaign, tasks: expanded.tasks, errors: dedupeErrors(out) };
}

/**
 * A JSONL manifest: one case per line, each carrying the same campaign_id and
 * schema_version; there are no defaults. Errors carry the line they belong to.
 */
export function convertJsonlManifest(text: string): ManifestResult & { lines: number[] } {
  const errors: ItemFieldError[] = [];
  const cases: Obj[] = [];
  const lines: number[] = [];
  let campaignId: unknown;
  let lineNo = 0;
  for (const line of text.split(/\r?\n/)) {
    lineNo++;
    if (line.trim() === "") continue;
    const at = `cases[${cases.length}]`;
    let obj: unknown;
    try {
      obj = JSON.parse(line);
    } catch (e) {
      errors.push({ ...fieldError("", `invalid JSON: ${(e as Error).message}`), line: lineNo });
      continue;
    }
    if (!isPlainObject(obj)) {
      errors.push({ ...fieldError(at, "must be an object", "FieldValueTypeInvalid"), line: lineNo });
      continue;
    }
    const { campaign_id, schema_version, defaults, ...rest } = obj;
    if (schema_version === undefined)
      errors.push({ ...fieldError(`${at}.schema_version`, "required", "FieldValueRequired"), line: lineNo });
    else if (schema_version !== 1)
      errors.push({ ...fieldError(`${at}.schema_version`, "must be 1", "FieldValueNotSupported"), line: lineNo });
    if (campaign_id === undefined || campaign_id === "")
      errors.push({ ...fieldError(`${at}.campaign_id`, "required", "FieldValueRequired"), line: lineNo });
    else if (typeof campaign_id !== "string")
      errors.push({ ...fieldError(`${at}.campaign_id`, "must be a string", "FieldValueTypeInvalid"), line: lineNo });
    else if (campaignId === undefined) campaignId = campaign_id;
    else if (campaign_id !== campaignId)
      errors.push({
        ...fieldError(`${at}.campaign_id`, `must be "${campaignId}", as on the first line (one campaign per file)`),
        line: lineNo,
      });
    if (defaults !== undefined)
      errors.push({
        ...fieldError(`${at}.defaults`, "not allowed: a JSONL manifest has no defaults", "FieldUnknown"),
        line: lineNo,
      });
    cases.push(rest);
    lines.push(lineNo);
  }
  if (cases.length === 0 && errors.length === 0) errors.push(fieldError("cases", "must list at least one case"));
  const { campaign, notes } = manifestToCampaign({ schema_version: 1, campaign_id: campaignId ?? "", cases });
  // campaign_id and schema_version are checked line by line above.
  const result = { ...finishManifest(campaign!, errors, new Set(["campaign_id", "schema_version", "cases"])), notes };
  const errs = result.errors.map((e) => {
    if (e.line !== undefined) return e;
    const m = /^cases\[(\d+)\]/.exec(e.field);
    return m ? { ...e, line: lines[Number(m[1])] } : e;
  });
  return { ...result, errors: errs, lines };
}
