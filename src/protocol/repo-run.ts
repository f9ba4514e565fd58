// The contract's dispatch-repo-run body: one repo task from flags, no manifest needed,
// translated into the v1 dispatch document it stands for.
import { randomUUID } from "node:crypto";
import { slug } from "../resources/ids.ts";
import { checkRequest, HubError } from "./errors.ts";
import type { DispatchRequest } from "./types.gen.ts";

const isObj = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);
const str = (v: unknown) => (typeof v === "string" && v !== "" ? v : typeof v === "number" ? String(v) : undefined);

/** A command may span lines and hold tabs; any other control character is a mistake or an attack on the terminal. */
// eslint-disable-next-line no-control-regex
const COMMAND_CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F]/;

const REPO_RUN_KEYS = [
  "repo_url",
  "command",
  "commands",
  "commit",
  "ref",
  "depth",
  "source_token_env",
  "placement",
  "cpu_millis",
  "memory_mb",
  "disk_mb",
  "gpu_count",
  "gpu_types",
  "task_id",
  "package_id",
  "campaign_id",
  "case_id",
  "setting_id",
  "run_id",
  "required_capability",
  "priority",
  "timeout_seconds",
  "materialize_timeout_seconds",
  "continue_on_error",
  "env",
  "operator",
  "artifact_paths",
];

/**
 * The contract's dispatch-repo-run: one repo task from flags, no manifest needed. Several
 * commands become steps in order (`step-1`, `step-2`, ...). Without a task_id or run_id the
 * run is a fresh uuid, so two dispatches in the same instant are two tasks.
 */
export function repoRunRequest(body: unknown): DispatchRequest {
  if (!isObj(body)) throw new HubError(400, "invalid_dispatch", { detail: "body must be a JSON object" });
  const errors: { field: string; message: string }[] = [];
  for (const k of Object.keys(body))
    if (!REPO_RUN_KEYS.includes(k)) errors.push({ field: k, message: "unknown field" });
  if (!str(body.repo_url)) errors.push({ field: "repo_url", message: "required" });
  const commands =
    body.commands !== undefined ? body.commands : body.command !== undefined ? [body.command] : undefined;
  if (commands === undefined) errors.push({ field: "command", message: "required" });
  else if (!Array.isArray(commands) || !commands.length || commands.some((c) => !str(c)))
    errors.push({
      field: body.commands !== undefined ? "commands" : "command",
      message: "must be one or more non-empty commands",
    });
  else if (commands.some((c) => COMMAND_CONTROL.test(c as string)))
    errors.push({
      field: body.commands !== undefined ? "commands" : "command",
      message: "must not contain control characters other than tab and newline",
    });
  if (errors.length)
    throw new HubError(400, "invalid_dispatch", {
      detail: errors.map((e) => `${e.field}: ${e.message}`).join("; "),
      errors,
    });
  checkRequest("repo-run", body);
  const resources: Record<string, unknown> = {};
  for (const f of ["cpu_millis", "memory_mb", "disk_mb", "gpu_count", "gpu_types"])
    if (body[f] !== undefined) resources[f] = body[f];
  const caseId = str(body.case_id) ?? "repo-run";
  const campaign = str(body.campaign_id) ?? "dispatch";
  const setting = str(body.setting_id) ?? "default";
  // A named task keeps one run id, so sending it again is recognised as the same request.
  const run = str(body.run_id) ?? (str(body.task_id) ? slug(str(body.task_id)!) : randomUUID());
  const source = {
    type: "git",
    url: body.repo_url,
    ...(str(body.commit) ? { commit: body.commit } : {}),
    ...(str(body.ref) ? { ref: body.ref } : {}),
    ...(body.depth !== undefined ? { depth: body.depth } : {}),
    ...(str(body.source_token_env) ? { token_env: body.source_token_env } : {}),
  };
  const optional = (keys: string[]) =>
    Object.fromEntries(keys.filter((k) => body[k] !== undefined).map((k) => [k, body[k]]));
  return {
    schema_version: 1,
    operator: body.operator,
    tasks: [
      {
        task_id: str(body.task_id) ?? `${slug(campaign)}__${slug(caseId)}__${slug(setting)}__run-${slug(run)}`,
        campaign_id: campaign,
        case_id: caseId,
        setting_id: setting,
        run_id: run,
        ...optional(["required_capability", "priority", "package_id"]),
        execution_profile: { placement: body.placement ?? "shared", resources },
        payload: {
          runner: "repo",
          source,
          // One `command` is the step "run", as before; a `commands` list is v1's step-1, step-2, ...
          commands: (commands as string[]).map((command, i) => ({
            name: body.commands === undefined ? "run" : `step-${i + 1}`,
            command,
          })),
          ...optional(["timeout_seconds", "materialize_timeout_seconds", "continue_on_error", "env", "artifact_paths"]),
          normalized: { campaign_id: campaign, case_id: caseId, setting_id: setting, run_id: run },
        },
      },
    ],
  };
}
