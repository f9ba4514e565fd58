// Errors of the Runner and data APIs: v1's `{"error": code, ...detail}` bodies with an
// HTTP status. Thrown by the scheduler, turned into replies by the API layer.
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
