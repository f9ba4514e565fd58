// The one error of the v1 wire protocol: `{"error": code, ...detail}` with an HTTP status.
// The Hub throws it (the API layer turns it into the reply); a Runner's client builds it
// from a reply it received, so both sides read the same `status`, `code` and `detail`.
import { requestErrors, type RequestName } from "./schemas.ts";
import type { RequestTypes } from "./types.gen.ts";

export class HubError extends Error {
  override readonly name = "HubError";
  constructor(
    readonly status: number,
    readonly code: string,
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
    const obj = isObj(body) ? body : undefined;
    const code = typeof obj?.error === "string" ? obj.error : "";
    const { error: _e, ...detail } = obj ?? (body === undefined ? {} : { body });
    return new HubError(status, code, detail, `${path}: ${status === 0 ? "no reply" : `HTTP ${status}`} ${describeBody(body)}`.trim());
  }
}

function describeBody(body: unknown): string {
  if (body === undefined || body === null) return "";
  const text = typeof body === "string" ? body : JSON.stringify(body);
  return text.length > 300 ? text.slice(0, 300) + "…" : text;
}

const isObj = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === "object" && !Array.isArray(v);

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
