// The one error of the v1 wire protocol: `{"error": code, ...detail}` with an HTTP status.
// The Hub throws it (the API layer turns it into the reply); a Runner's client builds it
// from a reply it received, so both sides read the same `status`, `code` and `detail`.
import { requestErrors, type RequestName } from "./schemas.ts";
import type { RequestTypes } from "./types.gen.ts";
import { isJsonObject } from "../resources/json.ts";

/**
 * The codes the Hub answers with: v1's (RUNNER_PROTOCOL §1, kept as v1 spells them, even
 * "X-Task-Id required") and Loom's own, plus the two families named by their field:
 * `invalid_<field>` and `<field>_required`. A code a client depends on is never renamed.
 */
export const HUB_ERROR_CODES = [
  // the Runner API
  "runner_api_version_required",
  "unsupported_runner_api_version",
  "concurrency_values_must_be_integers",
  "initial_concurrency_must_be_between_one_and_max_concurrency",
  "unsupported_concurrency_policy",
  "worker_not_available",
  "task_not_found",
  "lease_worker_mismatch",
  "stale_lease",
  "task_cancelled",
  "X-Task-Id required",
  "X-Worker-Id required",
  "content_length_required",
  "body_too_large",
  "too_many_uploads",
  "result_not_found",
  "result_unreadable",
  // dispatch and the operator's verbs
  "dispatch_requires_schema_version",
  "unsupported_dispatch_schema_version",
  "task_id_conflict",
  "hosts_required",
  "unsupported_inventory_version",
  "target_type_task_target_id_state_reason_required",
  "override_needs_lease",
  "worker_not_found",
  "unsupported_group_by",
  "oracle_dispatch_not_supported",
  // push
  "runner_token_missing",
  "token_env_not_allowed",
  "direct_worker_endpoint_not_registered",
  "no_eligible_direct_worker",
  "task_not_queueable",
  "worker_not_eligible",
  "worker_resource_unavailable",
  "worker_capacity_reached",
  "push_refused",
  "push_not_delivered",
  "push_delivery_unknown",
  // the per-worker token
  "forbidden",
] as const;

export type HubErrorCode =
  (typeof HUB_ERROR_CODES)[number] | `invalid_${string}` | `${string}_required` | `${string}_must_be_integer`;

export class HubError extends Error {
  override readonly name = "HubError";
  constructor(
    readonly status: number,
    readonly code: HubErrorCode,
    readonly detail: Record<string, unknown> = {},
    message?: string,
  ) {
    super(message ?? (typeof detail.detail === "string" ? `${code}: ${detail.detail}` : code));
  }

  /** The reply body: `{"error": code, ...detail}`, as the Hub sends it and the client received it. */
  get body(): Record<string, unknown> {
    return { error: this.code, ...this.detail };
  }

  /** True when no HTTP reply came at all (network error, timeout), so retrying later may help. */
  get network(): boolean {
    return this.status === 0;
  }

  /** A non-2xx or non-JSON reply a client received from `path`; status 0 means none arrived. */
  static received(status: number, body: unknown, path: string): HubError {
    const obj = isJsonObject(body) ? body : undefined;
    const { error: _e, ...detail } = obj ?? (body === undefined ? {} : { body });
    // Whatever code that Hub sent, or none: a client may talk to a newer Hub, so it is taken as it came.
    const code = (typeof obj?.error === "string" ? obj.error : "") as HubErrorCode;
    return new HubError(
      status,
      code,
      detail,
      `${path}: ${status === 0 ? "no reply" : `HTTP ${status}`} ${describeBody(body)}`.trim(),
    );
  }
}

function describeBody(body: unknown): string {
  if (body === undefined || body === null) return "";
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return text.length > 300 ? text.slice(0, 300) + "…" : text;
}

export const isHubError = (e: unknown): e is HubError => e instanceof HubError;

/** A request body that breaks its schema (schemas.ts) is a 400 naming every bad field; one that keeps it is that request. */
export function checkRequest<N extends RequestName>(name: N, body: unknown): RequestTypes[N] {
  const errors = requestErrors(name, body);
  if (!errors.length) return body as RequestTypes[N]; // the schema these types are generated from has just accepted it
  throw new HubError(400, "invalid_request", {
    field: errors[0].field,
    detail: errors.map((e) => `${e.field || "body"}: ${e.message}`).join("; "),
    errors: errors.map(({ field, message }) => ({ field, message })),
  });
}
