// fetch() that trusts a given CA. Node's global fetch cannot be handed a CA without the
// undici package, so with a CA the request goes through node:https and the reply is
// wrapped as a web Response (streamed, so watches work the same).
import { readFileSync } from "node:fs";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { Readable } from "node:stream";

export type Fetch = (
  url: string,
  init?: { method?: string; headers?: Record<string, string>; body?: string | Buffer; signal?: AbortSignal },
) => Promise<Response>;

/** The env var naming a PEM file of CA certificates to trust for the Hub. */
export const CA_FILE_ENV = "LOOM_CA_FILE";

/** The CA PEM from a flag, else from LOOM_CA_FILE; a file that cannot be read is an error naming the file (callers name the flag). */
export function readCa(
  flag: string | undefined,
  env: NodeJS.ProcessEnv = process.env,
): { file: string; pem: Buffer } | undefined {
  const file = flag ?? (env[CA_FILE_ENV] || undefined);
  if (!file) return undefined;
  try {
    const pem = readFileSync(file);
    if (!pem.toString("utf8").includes("-----BEGIN CERTIFICATE-----")) throw new Error("no PEM certificate in it");
    return { file, pem };
  } catch (e) {
    throw new Error(`${file}: ${(e as Error).message}`, { cause: e });
  }
}

/** Global fetch without a CA; otherwise one that verifies the server against `ca` only. */
export function fetchTrusting(ca: Buffer | undefined): Fetch {
  if (!ca) return (url, init) => fetch(url, init);
  return (url, init = {}) =>
    new Promise<Response>((resolve, reject) => {
      const u = new URL(url);
      const request = u.protocol === "https:" ? httpsRequest : httpRequest;
      const req = request(
        u,
        { method: init.method ?? "GET", headers: init.headers, ca, signal: init.signal },
        (res) => {
          const headers = new Headers();
          for (const [k, v] of Object.entries(res.headers))
            if (v !== undefined) for (const one of [v].flat()) headers.append(k, one);
          const nullBody = res.statusCode === 204 || res.statusCode === 304 || init.method === "HEAD";
          if (nullBody) res.resume();
          resolve(
            new Response(nullBody ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>), {
              status: res.statusCode ?? 0,
              statusText: res.statusMessage ?? "",
              headers,
            }),
          );
        },
      );
      // fetch() reports a failed connection as a TypeError whose cause says why; so does this.
      req.on("error", (e) =>
        reject(e.name === "AbortError" ? e : Object.assign(new TypeError("fetch failed"), { cause: e })),
      );
      req.end(init.body);
    });
}
