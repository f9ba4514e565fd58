// Errors of the resource API as Kubernetes Status objects (api-conventions "Response Status
// Kind"): a machine `reason`, the HTTP `code`, and `details.causes` naming each bad field, so
// clients (kubectl habits, the Loom CLI) never parse messages.
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { StoreError } from "../store/errors.ts";

export type StatusReason =
  | "NotFound"
  | "AlreadyExists"
  | "Conflict"
  | "Invalid"
  | "BadRequest"
  | "Gone"
  | "Expired"
  | "MethodNotAllowed"
  | "UnsupportedMediaType"
  | "RequestEntityTooLarge"
  | "Forbidden"
  | "Unauthorized"
  | "TooSlow"
  | "Timeout"
  | "TooManyRequests"
  | "InternalError";
export type StatusCause = { reason: string; message: string; field: string };
export type StatusDetails = { name?: string; group?: string; kind?: string; causes?: StatusCause[] };
export type Status = {
  kind: "Status";
  apiVersion: "v1";
  metadata: Record<string, never>;
  status: "Failure";
  message: string;
  reason: StatusReason;
  details?: StatusDetails;
  code: number;
};

/** An error the resource API raises itself (the store raises StoreError). */
export class StatusError extends Error {
  constructor(
    readonly reason: StatusReason,
    readonly code: number,
    message: string,
    readonly causes: StatusCause[] = [],
  ) {
    super(message);
    this.name = `${reason}Error`;
  }
}

export const badRequest = (message: string, field?: string) =>
  new StatusError(
    "BadRequest",
    400,
    message,
    field === undefined ? [] : [{ reason: "FieldValueInvalid", message, field }],
  );

export function status(reason: StatusReason, code: number, message: string, details: StatusDetails = {}): Status {
  const d = Object.fromEntries(
    Object.entries(details).filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0)),
  );
  return {
    kind: "Status",
    apiVersion: "v1",
    metadata: {},
    status: "Failure",
    message,
    reason,
    ...(Object.keys(d).length ? { details: d } : {}),
    code,
  };
}

/** The object a request was about, for `details`. */
export type Target = { kind?: string; group?: string; name?: string };

export function toStatus(e: unknown, target: Target = {}): Status {
  if (e instanceof StoreError) {
    const causes = e.causes.map((c) => ({ reason: c.reason, message: c.message, field: c.field }));
    // A watch from a compacted revision is "Expired" in Kubernetes; clients relist on it.
    return status(e.reason === "Gone" ? "Expired" : e.reason, e.code, e.message, { ...target, causes });
  }
  if (e instanceof StatusError) return status(e.reason, e.code, e.message, { ...target, causes: e.causes });
  const fe = e as FastifyError & { field?: unknown };
  const causes =
    typeof fe?.field === "string" ? [{ reason: "FieldValueInvalid", message: fe.message, field: fe.field }] : undefined;
  if (fe?.code === "FST_ERR_CTP_INVALID_JSON_BODY" || fe?.name === "SyntaxError")
    return status("BadRequest", 400, fe.message, { ...target, causes });
  if (fe?.code === "FST_ERR_CTP_BODY_TOO_LARGE") return status("RequestEntityTooLarge", 413, fe.message, target);
  if (fe?.code === "FST_ERR_CTP_INVALID_MEDIA_TYPE") return status("UnsupportedMediaType", 415, fe.message, target);
  if (typeof fe?.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500)
    return status("BadRequest", fe.statusCode, fe.message, { ...target, causes });
  return status("InternalError", 500, `internal error: ${(e as Error)?.message ?? String(e)}`, target);
}

export function sendStatus(reply: FastifyReply, s: Status): FastifyReply {
  return reply
    .code(s.code)
    .header("content-type", "application/json; charset=utf-8")
    .header("cache-control", "no-store")
    .send(s);
}

/** The error handler of the resource API: every failure becomes a Status. */
export function statusErrorHandler(targetOf: (req: FastifyRequest) => Target) {
  return function (this: unknown, e: unknown, req: FastifyRequest, reply: FastifyReply) {
    const s = toStatus(e, targetOf(req));
    if (s.code >= 500) req.log.error({ err: e }, "request failed");
    return sendStatus(reply, s);
  };
}

/**
 * The shared auth hook answers 401/403 in the v1 shape before any route runs; on this
 * surface the same refusal is re-worded as a Status, keeping its message.
 */
export async function authRefusalAsStatus(
  _req: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
): Promise<unknown> {
  const code = reply.statusCode;
  if ((code !== 401 && code !== 403) || typeof payload !== "string") return payload;
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(payload) as Record<string, unknown>;
  } catch {
    return payload;
  }
  if (body.kind === "Status") return payload;
  const detail =
    typeof body.detail === "string"
      ? body.detail
      : code === 401
        ? "a valid token is required"
        : "this token may not call the resource API";
  reply.header("content-type", "application/json; charset=utf-8");
  return JSON.stringify(status(code === 401 ? "Unauthorized" : "Forbidden", code, detail));
}
