// The Hub's HTTP API: a fastify plugin tree with no listen() of its own (`loom hub`
// listens). Every route shares one Hub (store, informer, scheduler) and one auth hook.
import type { FastifyInstance } from "fastify";
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

export async function app(f: FastifyInstance, o: AppOptions): Promise<void> {
  f.decorate("hub", o.hub);
  f.decorateRequest("principal", undefined as never);

  // v1 Runners send JSON with or without a content type; an empty body means {}.
  f.removeAllContentTypeParsers();
  f.addContentTypeParser("*", { parseAs: "buffer" }, (req, body: Buffer, done) => {
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
  });

  f.addHook("onRequest", async (req, reply) => {
    const path = req.url.split("?")[0];
    // The web view's static files hold no data; the page sends the token with each API call.
    if (isUiPath(path)) return;
    if (req.method === "GET" && PROBE_PATH.test(path)) return void (req.principal = { kind: "anonymous" });
    const p = authenticate(req, o.auth);
    if (!p) return reply.code(401).header("cache-control", "no-store").send({ error: "unauthorized" });
    if (p.kind === "worker" && !RUNNER_PATHS.has(path))
      return reply
        .code(403)
        .header("cache-control", "no-store")
        .send({ error: "forbidden", detail: "a worker token may only call the Runner API" });
    req.principal = p;
  });
  // Every parameter Loom reads is single-valued; a repeated one is ambiguous, so it is refused.
  f.addHook("preValidation", async (req) => {
    const q = req.query as Record<string, unknown> | undefined;
    for (const [k, v] of Object.entries(q ?? {}))
      if (Array.isArray(v))
        throw Object.assign(new Error(`query parameter ${k} is given ${v.length} times; give it once`), {
          statusCode: 400,
          field: k,
        });
  });
  f.addHook("onSend", async (_req, reply, payload) => {
    if (!reply.hasHeader("cache-control")) reply.header("cache-control", "no-store");
    return payload;
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
