// Errors of the Runner and data APIs: v1's `{"error": code, ...detail}` bodies with an
// HTTP status. Thrown by the scheduler, turned into replies by the API layer.
import { requestErrors, type RequestName } from "../resources/requests.ts";

export class HubError extends Error {
  constructor(readonly status: number, readonly code: string, readonly detail: Record<string, unknown> = {}) {
    super(typeof detail.detail === "string" ? `${code}: ${detail.detail}` : code);
    this.name = "HubError";
  }
  body(): Record<string, unknown> {
    return { error: this.code, ...this.detail };
  }
}

export const isHubError = (e: unknown): e is HubError => e instanceof HubError;

/** A request body that breaks its schema (resources/requests.ts): 400 naming every bad field. */
export function checkRequest(name: RequestName, body: unknown): void {
  const errors = requestErrors(name, body);
  if (!errors.length) return;
  throw new HubError(400, "invalid_request", {
    field: errors[0].field,
    detail: errors.map((e) => `${e.field || "body"}: ${e.message}`).join("; "),
    errors: errors.map(({ field, message }) => ({ field, message })),
  });
}

/** A number field of a request: `dflt` when absent, else a 400 naming the field unless it is within [min, max]. */
export function numIn(v: unknown, min: number, max: number, dflt: number, field: string): number {
  if (v === undefined || v === null) return dflt;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max) throw new HubError(400, `invalid_${field}`, { field, detail: `must be a number from ${min} to ${max}`, received: v });
  return v;
}
