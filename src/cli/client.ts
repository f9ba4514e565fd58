// The CLI's HTTP client. One error type for both error shapes the Hub answers with (v1
// `{error, detail, errors[]}` on /api/..., Kubernetes Status objects on /apis/...), so every
// verb prints failures the same way and never parses messages.
import { API_VERSION } from "../resources/crds.ts";
import { CA_FILE_ENV, type Fetch, fetchTrusting, readCa } from "../tls/fetch.ts";

export const DEFAULT_CONTROLLER = "http://127.0.0.1:8765";
export const CONTROLLER_ENV = "LOOM_CONTROLLER";
export const TOKEN_ENV = "LOOM_HUB_TOKEN";
export const RESOURCE_PREFIX = `/apis/${API_VERSION}`;

export type FieldCause = { field: string; message: string };

/** Base of every error the CLI reports itself; `exitCode` follows kubectl (1 failure, 2 usage). */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
    readonly reason?: string,
    readonly causes: FieldCause[] = [],
  ) {
    super(message);
    this.name = "CliError";
  }
  /** `error: <reason>: <message>` plus one line per field cause. */
  render(): string {
    const head = `error: ${this.reason ? `${this.reason}: ` : ""}${this.message}\n`;
    return head + this.causes.map((c) => `  ${c.field || "<request>"}: ${c.message}\n`).join("");
  }
}

/** A bad flag or argument: nothing was sent. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(message, 2);
    this.name = "UsageError";
  }
}

/** The Hub answered with a failure. */
export class ApiError extends CliError {
  constructor(
    readonly status: number,
    reason: string,
    message: string,
    causes: FieldCause[] = [],
    readonly body?: unknown,
  ) {
    super(message, 1, reason, causes);
    this.name = "ApiError";
  }
}

/** The Hub could not be reached at all. */
export class UnreachableError extends CliError {
  constructor(
    readonly url: string,
    why: string,
  ) {
    super(`cannot reach the Hub at ${url}: ${why}`, 1);
    this.name = "UnreachableError";
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

function causesOf(list: unknown): FieldCause[] {
  if (!Array.isArray(list)) return [];
  return list
    .filter(isObject)
    .map((c) => ({ field: String(c.field ?? ""), message: String(c.message ?? c.reason ?? "") }));
}

/** Either error shape (or anything else) as one ApiError. */
export function toApiError(status: number, statusText: string, body: unknown): ApiError {
  if (isObject(body) && body.kind === "Status") {
    const details = isObject(body.details) ? body.details : {};
    return new ApiError(
      status,
      String(body.reason ?? statusText),
      String(body.message ?? statusText),
      causesOf(details.causes),
      body,
    );
  }
  if (isObject(body) && typeof body.error === "string") {
    const causes = causesOf(body.errors);
    if (!causes.length && typeof body.field === "string")
      causes.push({ field: body.field, message: typeof body.detail === "string" ? body.detail : body.error });
    // v1 bodies carry their facts as fields (`task_id`, `received`); with no detail, those are the message.
    const facts = Object.entries(body)
      .filter(([k, v]) => !["error", "detail", "errors", "field"].includes(k) && v !== null && v !== undefined)
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`);
    const message =
      typeof body.detail === "string" ? body.detail : facts.length ? facts.join(", ") : `${status} ${statusText}`;
    return new ApiError(status, body.error, message, causes, body);
  }
  const text = typeof body === "string" && body.trim() ? body.trim().split("\n")[0] : `${status} ${statusText}`;
  return new ApiError(status, statusText || String(status), text, [], body);
}

export type Connection = {
  controller: string;
  token?: string;
  /** PEM of the CA that signed the Hub's certificate. */ ca?: Buffer;
};

/** `--controller`, else LOOM_CONTROLLER, else the default; the token only ever comes from the environment. */
export function resolveConnection(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
  caFlag?: string,
): Connection {
  const raw = flag ?? env[CONTROLLER_ENV] ?? DEFAULT_CONTROLLER;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--controller: not a URL: ${JSON.stringify(raw)}`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UsageError(`--controller: must be an http(s) URL, got ${JSON.stringify(raw)}`);
  const ca = caOf(caFlag, env)?.pem;
  return { controller: url.toString().replace(/\/+$/, ""), token: env[TOKEN_ENV] || undefined, ...(ca ? { ca } : {}) };
}

/** The CA from --certificate-authority or LOOM_CA_FILE; an unreadable file is a usage error naming where it came from. */
export function caOf(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): ReturnType<typeof readCa> {
  try {
    return readCa(flag, env);
  } catch (e) {
    throw new UsageError(`${flag ? "--certificate-authority" : CA_FILE_ENV}: ${(e as Error).message}`);
  }
}

export type Query = Record<string, string | number | boolean | undefined>;
export type RequestOptions = { query?: Query; body?: unknown; contentType?: string; signal?: AbortSignal };

export function withQuery(path: string, query: Query = {}): string {
  const q = Object.entries(query).filter(([, v]) => v !== undefined && v !== "");
  return q.length
    ? `${path}?${new URLSearchParams(q.map(([k, v]): [string, string] => [k, String(v)])).toString()}`
    : path;
}

function networkReason(e: unknown): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  return cause?.code ?? cause?.message ?? (e as Error).message;
}

export class Client {
  private readonly send: Fetch;
  constructor(readonly conn: Connection) {
    this.send = fetchTrusting(conn.ca);
  }

  private headers(contentType?: string): Record<string, string> {
    return {
      accept: "application/json",
      ...(contentType ? { "content-type": contentType } : {}),
      ...(this.conn.token ? { authorization: `Bearer ${this.conn.token}` } : {}),
    };
  }

  /** The raw response; errors become ApiError / UnreachableError. */
  async fetch(method: string, path: string, o: RequestOptions = {}): Promise<Response> {
    const url = this.conn.controller + withQuery(path, o.query);
    let res: Response;
    try {
      res = await this.send(url, {
        method,
        headers: this.headers(o.body === undefined ? undefined : (o.contentType ?? "application/json")),
        body: o.body === undefined ? undefined : JSON.stringify(o.body),
        signal: o.signal,
      });
    } catch (e) {
      if ((e as Error).name === "AbortError") throw e;
      throw new UnreachableError(this.conn.controller, networkReason(e));
    }
    if (!res.ok) {
      const text = await res.text().catch(() => "");
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON: keep the text
      }
      throw toApiError(res.status, res.statusText, body);
    }
    return res;
  }

  /** The parsed JSON answer. */
  async request<T = unknown>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
    const res = await this.fetch(method, path, o);
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  get<T = unknown>(path: string, query?: Query): Promise<T> {
    return this.request<T>("GET", path, { query });
  }

  post<T = unknown>(path: string, body: unknown): Promise<T> {
    return this.request<T>("POST", path, { body });
  }

  /** Newline-delimited JSON from a streaming GET (a watch), one parsed value per line. */
  async *lines(path: string, query: Query, signal: AbortSignal): AsyncGenerator<unknown> {
    const res = await this.fetch("GET", path, { query, signal });
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body) {
      buf += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        if (line) yield JSON.parse(line);
      }
    }
  }
}
