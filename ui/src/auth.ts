// The Hub token: entered once, kept in sessionStorage only (gone when the tab closes), sent
// as a bearer header on every call, never put in a URL.
const KEY = "loom.hub-token";

export const token = {
  get: (): string | undefined => sessionStorage.getItem(KEY) ?? undefined,
  set: (t: string) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class Unauthorized extends Error {}

/** fetch() against the Hub this page came from, with the token as a bearer header. */
export async function request(path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  const t = token.get();
  if (t) headers.set("authorization", `Bearer ${t}`);
  if (!headers.has("accept")) headers.set("accept", "application/json");
  return fetch(path, { ...init, headers, credentials: "omit", cache: "no-store", referrerPolicy: "no-referrer" });
}

/** GET (or POST with a JSON body) a JSON document; 401/403 become Unauthorized. */
export async function json<T>(
  path: string,
  init: { method?: string; body?: unknown; signal?: AbortSignal } = {},
): Promise<T> {
  const res = await request(path, {
    method: init.method ?? "GET",
    signal: init.signal,
    ...(init.body !== undefined
      ? { body: JSON.stringify(init.body), headers: { "content-type": "application/json" } }
      : {}),
  });
  if (res.status === 401 || res.status === 403) throw new Unauthorized(`${res.status}`);
  const text = await res.text();
  const body = (text ? JSON.parse(text) : {}) as { message?: string; error?: string; detail?: string };
  if (!res.ok) throw new Error(`${res.status} ${body.message ?? body.detail ?? body.error ?? text.slice(0, 200)}`);
  return body as T;
}
