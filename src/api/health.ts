// Probes and metrics. /livez, /readyz and /healthz answer without a token, as Kubernetes
// components do, and say nothing but check names and short reasons. /metrics is
// Prometheus text and needs the token like every other path.
import type { FastifyInstance, FastifyReply, FastifyRequest } from "fastify";
import { type HealthCheck, renderChecks, runChecks } from "../observability/health.ts";

/** Paths that answer without a token. */
export const PROBE_PATH = /^\/(livez|readyz|healthz)(\/[a-z-]+)?$/;

export async function healthRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const probe = (endpoint: string, checks: () => HealthCheck[]) => {
    const answer = async (req: FastifyRequest, reply: FastifyReply, only?: string) => {
      const q = req.query as Record<string, string | string[] | undefined>;
      const exclude = ([] as string[]).concat(q.exclude ?? []);
      const all = checks();
      const picked = only ? all.filter((c) => c.name === only) : all;
      if (only && !picked.length)
        return reply.code(404).type("text/plain").send(`no check named ${only} in ${endpoint}\n`);
      const results = await runChecks(picked, exclude);
      const ok = results.every((r) => r.ok);
      return reply
        .code(ok ? 200 : 500)
        .type("text/plain; charset=utf-8")
        .header("x-content-type-options", "nosniff")
        .send(renderChecks(endpoint, results, q.verbose !== undefined));
    };
    f.get(`/${endpoint}`, (req, reply) => answer(req, reply));
    f.get(`/${endpoint}/:check`, (req, reply) => answer(req, reply, (req.params as { check: string }).check));
  };
  probe("livez", () => hub.checks.livez);
  probe("readyz", () => hub.checks.readyz);
  // healthz is the union, as the Kubernetes API server's legacy endpoint is.
  probe("healthz", () => [
    ...hub.checks.livez,
    ...hub.checks.readyz.filter((c) => !hub.checks.livez.some((l) => l.name === c.name)),
  ]);

  f.get("/metrics", async (_req, reply) => reply.type(hub.metrics.contentType).send(await hub.metrics.text()));
}
