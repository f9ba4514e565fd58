// The Runner API v1 (RUNNER_PROTOCOL 1a): what pull Runners call. Paths, fields and codes
// are v1's, so an existing Runner works unchanged; section 7's fencing applies throughout.
// Each body is parsed into its typed request (protocol/parse.ts) before the scheduler sees
// it, and each reply is written through its schema.
import { createReadStream } from "node:fs";
import { stat } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import { CLAMPED_HEADER, claimClamps, clampNotice } from "../protocol/clamps.ts";
import { HubError } from "../protocol/errors.ts";
import {
  bodyOf,
  parseClaim,
  parseComplete,
  parseFail,
  parseHeartbeat,
  parseRegister,
  parseRenew,
  parseStart,
} from "../protocol/parse.ts";
import { assertActsAs } from "./hub.ts";
import { replySchema } from "./reply-schemas.ts";
import { uploadRoute } from "./upload.ts";

export async function runnerRoutes(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const scheduler = hub.scheduler;

  f.post("/api/workers/register", replySchema("register"), async (req) => {
    const b = bodyOf(req.body);
    assertActsAs(req, b.worker_id);
    return scheduler.register(parseRegister(b));
  });
  f.post("/api/workers/heartbeat", replySchema("heartbeat"), async (req) => {
    const b = bodyOf(req.body);
    assertActsAs(req, b.worker_id);
    return scheduler.heartbeat(parseHeartbeat(b));
  });
  f.post("/api/tasks/claim", replySchema("claim"), async (req, reply) => {
    const b = bodyOf(req.body);
    assertActsAs(req, b.worker_id);
    const clamped = clampNotice(claimClamps(b));
    if (clamped) reply.header(CLAMPED_HEADER, clamped);
    const order = parseClaim(b);
    // A claim that does not wait answers at once: nothing to end early.
    if (order.waitMs <= 0) return scheduler.claim(order);
    // A client that goes away (the response closes before it is written) ends its long-poll.
    const ac = new AbortController();
    const gone = () => {
      if (!reply.raw.writableFinished) ac.abort();
    };
    reply.raw.once("close", gone);
    const stop = () => ac.abort();
    hub.stopping.addEventListener("abort", stop, { once: true });
    try {
      return await scheduler.claim(order, ac.signal);
    } finally {
      hub.stopping.removeEventListener("abort", stop);
    }
  });
  const lease = replySchema("lease");
  const verbs = {
    start: (b: Record<string, unknown>) => scheduler.start(parseStart(b)),
    renew: (b: Record<string, unknown>) => scheduler.renew(parseRenew(b)),
    complete: (b: Record<string, unknown>) => scheduler.complete(parseComplete(b)),
    fail: (b: Record<string, unknown>) => scheduler.fail(parseFail(b)),
  };
  for (const [verb, run] of Object.entries(verbs)) {
    f.post(`/api/tasks/${verb}`, lease, async (req) => {
      const b = bodyOf(req.body);
      assertActsAs(req, b.worker_id);
      return run(b);
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
