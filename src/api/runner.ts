// The Runner API v1 (RUNNER_PROTOCOL 1a): what pull Runners call. Paths, fields and codes
// are v1's, so an existing Runner works unchanged; section 7's fencing applies throughout.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { CLAMPED_HEADER, claimClamps, clampNotice } from "../scheduler/claim-params.ts";
import { HubError } from "../scheduler/errors.ts";
import * as transitions from "../scheduler/transitions.ts";
import { heartbeat, register } from "../scheduler/workers.ts";
import { assertActsAs } from "./auth.ts";
import { uploadRoute } from "./upload.ts";

type Body = Record<string, unknown>;
const body = (req: FastifyRequest): Body => (req.body && typeof req.body === "object" && !Buffer.isBuffer(req.body) ? (req.body as Body) : {});

export async function runnerRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const ctx = hub.scheduler.ctx;

  f.post("/api/workers/register", async (req) => {
    const b = body(req);
    assertActsAs(req, b.worker_id);
    return register(ctx, b);
  });
  f.post("/api/workers/heartbeat", async (req) => {
    const b = body(req);
    assertActsAs(req, b.worker_id);
    return heartbeat(ctx, b);
  });
  f.post("/api/tasks/claim", async (req, reply) => {
    const b = body(req);
    assertActsAs(req, b.worker_id);
    // A client that goes away (the response closes before it is written) ends its long-poll.
    const ac = new AbortController();
    const gone = () => { if (!reply.raw.writableFinished) ac.abort(); };
    reply.raw.once("close", gone);
    const stop = () => ac.abort();
    hub.stopping.addEventListener("abort", stop, { once: true });
    const clamped = clampNotice(claimClamps(b));
    if (clamped) reply.header(CLAMPED_HEADER, clamped);
    try {
      return await hub.scheduler.claim(b, ac.signal);
    } finally {
      hub.stopping.removeEventListener("abort", stop);
    }
  });
  for (const verb of ["start", "renew", "complete", "fail"] as const) {
    f.post(`/api/tasks/${verb}`, async (req) => {
      const b = body(req);
      assertActsAs(req, b.worker_id);
      return transitions[verb](ctx, b);
    });
  }
  await f.register(uploadRoute);
  f.get("/api/results/:id", async (req, reply) => {
    const { id } = req.params as { id: string };
    const r = await hub.store.get("Result", id);
    const spec = r?.spec as { path: string; task_id: string; bytes: number } | undefined;
    if (!spec) throw new HubError(404, "result_not_found", { result_id: id });
    const st = await stat(spec.path).catch(() => undefined);
    if (!st) throw new HubError(404, "result_not_found", { result_id: id, detail: "the result file is missing" });
    reply.header("content-type", "application/zip");
    reply.header("content-length", st.size);
    reply.header("content-disposition", `attachment; filename="${spec.task_id}__${id}.zip"`);
    return reply.send(createReadStream(spec.path));
  });
}
