// Errors as data. The v1 surfaces (/api/...) answer `{"error": code, ...}`; the resource
// API answers Kubernetes Status objects. Bad input is always a 4xx naming the field.
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { HubError } from "../protocol/errors.ts";
import { StoreError } from "../store/errors.ts";
import { ValidationError } from "../resources/validate.ts";

export function v1ErrorBody(e: unknown): { status: number; body: Record<string, unknown> } {
  if (e instanceof HubError) return { status: e.status, body: e.body };
  if (e instanceof StoreError) {
    const code = {
      NotFound: "not_found",
      AlreadyExists: "already_exists",
      Conflict: "conflict",
      Invalid: "invalid",
      Gone: "gone",
      BadRequest: "bad_request",
      RequestEntityTooLarge: "too_large",
    }[e.reason];
    return {
      status: e.code,
      body: {
        error: code,
        detail: e.message,
        ...(e.causes.length ? { errors: e.causes.map(({ field, message }) => ({ field, message })) } : {}),
      },
    };
  }
  if (e instanceof ValidationError)
    return {
      status: 400,
      body: { error: "invalid", detail: e.message, errors: e.errors.map(({ field, message }) => ({ field, message })) },
    };
  const fe = e as FastifyError;
  if (fe && typeof fe.statusCode === "number" && fe.statusCode >= 400 && fe.statusCode < 500) {
    const code =
      fe.code === "FST_ERR_CTP_INVALID_JSON_BODY" || fe.name === "SyntaxError"
        ? "invalid_json"
        : fe.code === "FST_ERR_CTP_BODY_TOO_LARGE"
          ? "body_too_large"
          : "bad_request";
    const field = (fe as { field?: unknown }).field;
    return {
      status: fe.statusCode,
      body: { error: code, detail: fe.message, ...(typeof field === "string" ? { field } : {}) },
    };
  }
  return { status: 500, body: { error: (e as Error)?.name ?? "Error", detail: (e as Error)?.message ?? String(e) } };
}

export function v1ErrorHandler(this: unknown, e: unknown, req: FastifyRequest, reply: FastifyReply) {
  const { status, body } = v1ErrorBody(e);
  if (status >= 500) req.log.error({ err: e }, "request failed");
  reply.code(status).header("cache-control", "no-store").send(body);
}
