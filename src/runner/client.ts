// The Runner's side of RUNNER_PROTOCOL §1a: JSON over fetch, the Hub token as a Bearer
// header. The token is held privately and never appears in an error or a log line.
import { HubError } from "../protocol/errors.ts";
import type {
  ClaimReply,
  ClaimRequest,
  CompleteRequest,
  FailRequest,
  HeartbeatReply,
  HeartbeatRequest,
  LeaseReply,
  RegisterReply,
  RegisterRequest,
  RenewRequest,
  UploadReply,
} from "../protocol/types.gen.ts";
import { type Fetch, fetchTrusting } from "../tls/fetch.ts";

// A non-2xx or non-JSON reply is a HubError (status 0: no reply at all), as on the Hub's side.
export { HubError };
export type { ClaimReply, ClaimRequest, HeartbeatReply, RegisterReply, RegisterRequest, UploadReply };

export interface HubClientOptions {
  /** Base URL of the Hub, e.g. http://127.0.0.1:8765 */
  baseUrl: string;
  /** Name of the env var holding the Hub token (default LOOM_HUB_TOKEN). */
  tokenEnv?: string;
  /** The token itself, instead of reading tokenEnv. */
  token?: string;
  /** Per-request timeout for ordinary calls (default 30 s). */
  timeoutMs?: number;
  /** Timeout for result uploads (default 120 s). */
  uploadTimeoutMs?: number;
  /** PEM of the CA that signed the Hub's certificate; without it the system CAs are trusted. */
  ca?: Buffer;
}

export class HubClient {
  readonly baseUrl: string;
  readonly #token: string | undefined;
  readonly #timeoutMs: number;
  readonly #uploadTimeoutMs: number;
  readonly #fetch: Fetch;

  constructor(opts: HubClientOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.#token = opts.token ?? (process.env[opts.tokenEnv ?? "LOOM_HUB_TOKEN"] || undefined);
    this.#timeoutMs = opts.timeoutMs ?? 30_000;
    this.#uploadTimeoutMs = opts.uploadTimeoutMs ?? 120_000;
    this.#fetch = fetchTrusting(opts.ca);
  }

  get hasToken(): boolean {
    return this.#token !== undefined;
  }

  private async request<T>(
    path: string,
    init: { body: string | Buffer; headers: Record<string, string>; timeoutMs: number; signal?: AbortSignal },
  ): Promise<T> {
    const headers: Record<string, string> = { Accept: "application/json", ...init.headers };
    if (this.#token) headers.Authorization = `Bearer ${this.#token}`;
    const timeout = AbortSignal.timeout(init.timeoutMs);
    const signal = init.signal ? AbortSignal.any([timeout, init.signal]) : timeout;
    let res: Response;
    try {
      res = await this.#fetch(this.baseUrl + path, { method: "POST", headers, body: init.body, signal });
    } catch (e) {
      const cause = e instanceof Error ? ((e.cause as Error | undefined)?.message ?? e.message) : String(e);
      throw HubError.received(
        0,
        { error: timeout.aborted ? "timeout" : init.signal?.aborted ? "aborted" : "network_error", detail: cause },
        path,
      );
    }
    const text = await res.text().catch(() => "");
    let body: unknown;
    try {
      body = text === "" ? {} : JSON.parse(text);
    } catch {
      throw HubError.received(res.status, text, path); // v1 Runners raise on a non-JSON reply too
    }
    if (!res.ok) throw HubError.received(res.status, body, path);
    if (body === null || typeof body !== "object") throw HubError.received(res.status, body, path);
    return body as T;
  }

  private post<T>(path: string, body: object, timeoutMs = this.#timeoutMs, signal?: AbortSignal): Promise<T> {
    return this.request<T>(path, {
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
      timeoutMs,
      signal,
    });
  }

  register(body: RegisterRequest): Promise<RegisterReply> {
    return this.post("/api/workers/register", body);
  }

  heartbeat(body: HeartbeatRequest): Promise<HeartbeatReply> {
    return this.post("/api/workers/heartbeat", body);
  }

  /** With wait_seconds the Hub holds the request open (long-poll); the timeout leaves room for it. */
  claim(body: ClaimRequest, signal?: AbortSignal): Promise<ClaimReply> {
    const waitMs = Math.max(0, body.wait_seconds ?? 0) * 1000;
    return this.post("/api/tasks/claim", body, Math.max(this.#timeoutMs, waitMs + 15_000), signal);
  }

  start(workerId: string, taskId: string): Promise<LeaseReply> {
    return this.post("/api/tasks/start", { worker_id: workerId, task_id: taskId });
  }

  renew(workerId: string, taskId: string, leaseSeconds: number): Promise<LeaseReply> {
    const body: RenewRequest = { worker_id: workerId, task_id: taskId, lease_seconds: leaseSeconds };
    return this.post("/api/tasks/renew", body);
  }

  /** The raw ZIP as the body (not multipart), as v1 does. */
  uploadResult(taskId: string, workerId: string, zip: Buffer): Promise<UploadReply> {
    return this.request("/api/results/upload", {
      body: zip,
      headers: { "Content-Type": "application/zip", "X-Task-Id": taskId, "X-Worker-Id": workerId },
      timeoutMs: this.#uploadTimeoutMs,
    });
  }

  complete(body: CompleteRequest): Promise<LeaseReply> {
    return this.post("/api/tasks/complete", body);
  }

  fail(body: FailRequest): Promise<LeaseReply> {
    return this.post("/api/tasks/fail", body);
  }
}
