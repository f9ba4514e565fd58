// The Hub's HTTP API: a fastify plugin tree with no listen() of its own (`loom hub`
// listens). Every route shares one Hub (store, informer, scheduler) and one auth hook.
import type { FastifyInstance, FastifyRequest } from "fastify";
import { authenticate, type AuthConfig } from "./auth.ts";
import { v1ErrorHandler } from "./errors.ts";
import type { ApiHub } from "./hub.ts";
import { jsonTooDeep, LIMITS } from "../resources/limits.ts";
import { runnerRoutes } from "./runner.ts";
import { adminRoutes } from "./admin.ts";
import { dataRoutes } from "./data.ts";
import { historyRoutes } from "./history.ts";
import { v1DataRoutes } from "./v1-data.ts";
import { discoveryRoutes } from "./discovery.ts";
import { openApiRoutes } from "./openapi.ts";
import { resourceRoutes } from "./resources.ts";
import { resultLogRoutes } from "./result-logs.ts";
import { isUiPath, uiRoutes } from "./ui.ts";
import { healthRoutes, PROBE_PATH } from "./health.ts";
import { resultRoutes } from "./results.ts";

export type AppOptions = { hub: ApiHub; auth: AuthConfig };

/** Paths a per-worker Runner token may call; everything else needs the Hub token. */
const RUNNER_PATHS = new Set([
  "/api/workers/register",
  "/api/workers/heartbeat",
  "/api/tasks/claim",
  "/api/tasks/start",
  "/api/tasks/renew",
  "/api/tasks/complete",
  "/api/tasks/fail",
  "/api/results/upload",
  "/api/healthz",
  "/api/meta",
]);

/** Every parameter Loom reads is single-valued; a repeated one is ambiguous, so it is refused. */
function repeatedParameter(query: unknown): Error | undefined {
  for (const [k, v] of Object.entries((query as Record<string, unknown> | undefined) ?? {}))
    if (Array.isArray(v))
      return Object.assign(new Error(`query parameter ${k} is given ${v.length} times; give it once`), {
        statusCode: 400,
        field: k,
      });
  return undefined;
}

export async function app(f: FastifyInstance, o: AppOptions): Promise<void> {
  f.decorate("hub", o.hub);
  f.decorateRequest("principal", undefined as never);

  // v1 Runners send JSON with or without a content type; an empty body means {}.
  f.removeAllContentTypeParsers();
  const parseBody = (req: FastifyRequest, body: Buffer, done: (err: Error | null, body?: unknown) => void): void => {
    // Server-side apply sends YAML (or JSON, which is YAML too); the resource API parses it (server-side-apply.ts).
    if (req.headers["content-type"]?.startsWith("application/apply-patch+yaml")) return done(null, body);
    if (body.length === 0) return done(null, {});
    // Refused before parsing: nothing downstream (validation, merge, clone) ever meets a deep value.
    if (jsonTooDeep(body))
      return done(
        Object.assign(new Error(`body: JSON nests deeper than ${LIMITS.depth} levels`), {
          statusCode: 400,
          code: "FST_ERR_CTP_INVALID_JSON_BODY",
          field: "body",
        }),
        undefined,
      );
    try {
      done(null, JSON.parse(body.toString("utf8")));
    } catch (e) {
      const err = Object.assign(new Error(`invalid JSON body: ${(e as Error).message}`), {
        statusCode: 400,
        code: "FST_ERR_CTP_INVALID_JSON_BODY",
      });
      done(err, undefined);
    }
  };
  // JSON is named as well as caught by "*": fastify remembers the parser of a named type,
  // and looks the catch-all up again (parsing the header) on every request that uses it.
  f.addContentTypeParser("application/json", { parseAs: "buffer" }, parseBody);
  f.addContentTypeParser("*", { parseAs: "buffer" }, parseBody);

  // One synchronous hook for what every request needs before its handler: the default
  // cache-control (a handler may set its own), the caller's identity, and the refusal of a
  // repeated query parameter.
  f.addHook("onRequest", (req, reply, done) => {
    reply.header("cache-control", "no-store");
    const path = req.url.split("?")[0];
    // The web view's static files hold no data; the page sends the token with each API call.
    if (isUiPath(path)) return done(repeatedParameter(req.query));
    if (req.method === "GET" && PROBE_PATH.test(path)) {
      req.principal = { kind: "anonymous" };
      return done(repeatedParameter(req.query));
    }
    const p = authenticate(req, o.auth);
    if (!p) return void reply.code(401).send({ error: "unauthorized" });
    if (p.kind === "worker" && !RUNNER_PATHS.has(path))
      return void reply.code(403).send({ error: "forbidden", detail: "a worker token may only call the Runner API" });
    req.principal = p;
    done(repeatedParameter(req.query));
  });
  f.setErrorHandler(v1ErrorHandler);
  f.setNotFoundHandler((req, reply) => reply.code(404).send({ error: "not_found", path: req.url.split("?")[0] }));

  await f.register(runnerRoutes);
  await f.register(adminRoutes);
  await f.register(dataRoutes);
  await f.register(historyRoutes);
  await f.register(v1DataRoutes);
  await f.register(discoveryRoutes);
  await f.register(openApiRoutes);
  await f.register(resourceRoutes);
  await f.register(resultLogRoutes);
  await f.register(uiRoutes);
  await f.register(healthRoutes);
  await f.register(resultRoutes);
}
