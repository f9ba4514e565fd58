// POST /api/results/upload, bounded at every step. The fence is checked from the headers
// before a byte of the body is read; the body streams to a temp file (hashed on the way) and
// is cut off past the size limit; only a few uploads run at once; and a refused upload, or
// one that fails half-way, leaves no file behind. Inflation limits live in results/zip.ts.
import { createHash, randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, open, rm } from "node:fs/promises";
import { join } from "node:path";
import { Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { FastifyInstance, FastifyRequest } from "fastify";
import { HubError } from "../protocol/errors.ts";
import type { UploadedFile } from "../scheduler/transitions.ts";
import { assertActsAs } from "./hub.ts";
import { replySchema } from "./reply-schemas.ts";

const header = (req: FastifyRequest, name: string): string | undefined => {
  const v = req.headers[name];
  return typeof v === "string" && v !== "" ? v : undefined;
};

/** Stream `source` into `path`, at most `limit` bytes; fsync before returning. Removes the file on any failure. */
async function receive(source: NodeJS.ReadableStream, path: string, limit: number): Promise<UploadedFile> {
  const hash = createHash("sha256");
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      bytes += chunk.length;
      if (bytes > limit)
        return cb(
          Object.assign(new Error(`the upload is larger than ${limit} bytes`), {
            statusCode: 413,
            code: "FST_ERR_CTP_BODY_TOO_LARGE",
          }),
        );
      hash.update(chunk);
      cb(null, chunk);
    },
  });
  try {
    await pipeline(source, meter, createWriteStream(path, { flags: "wx" }));
    const fh = await open(path, "r+");
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    return { path, bytes, sha256: hash.digest("hex") };
  } catch (e) {
    await rm(path, { force: true });
    throw e;
  }
}

export async function uploadRoute(f: FastifyInstance): Promise<void> {
  const hub = f.hub;
  const scheduler = hub.scheduler;
  const limit = hub.opts.uploadLimitBytes;
  const incoming = join(scheduler.resultsDir, ".incoming");
  // Whatever a crash left half-written is nobody's result.
  await rm(incoming, { recursive: true, force: true });
  await mkdir(incoming, { recursive: true });
  let running = 0;
  // Uploads past the limit wait, unread (the socket holds their bytes), for a slot: a fleet
  // finishing together is served in turn. Only past a bounded queue, or after a bounded
  // wait, is one refused with 429: memory stays bounded either way.
  const waiting: (() => void)[] = [];
  const maxWaiting = hub.opts.uploadQueue;
  const waitMs = hub.opts.uploadWaitMs;
  /** True: the caller holds a slot (counted in `running`) until it calls release(). */
  const slot = (): Promise<boolean> => {
    if (running < hub.opts.uploadConcurrency) return (running++, Promise.resolve(true));
    if (waiting.length >= maxWaiting) return Promise.resolve(false);
    return new Promise((resolve) => {
      const go = () => (clearTimeout(timer), resolve(true));
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(go), 1);
        resolve(false);
      }, waitMs);
      waiting.push(go);
    });
  };
  // A finished upload hands its slot straight to the next one waiting.
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };

  // The body stays an unread stream until the handler has checked everything it can without it.
  f.removeAllContentTypeParsers();
  f.addContentTypeParser("*", (_req, payload, done) => done(null, payload));

  f.post("/api/results/upload", replySchema("upload", 201), async (req, reply) => {
    // A refusal before the body is read leaves it to Node, which discards it unread.
    const taskId = header(req, "x-task-id");
    const workerId = header(req, "x-worker-id");
    if (!taskId) throw new HubError(400, "X-Task-Id required");
    const length = req.headers["content-length"];
    if (length === undefined) throw new HubError(411, "content_length_required");
    if (Number(length) > limit)
      throw new HubError(413, "body_too_large", {
        detail: `the upload is ${length} bytes; the limit is ${limit}`,
        limit,
      });
    assertActsAs(req, workerId);
    scheduler.uploadFence({ taskId, workerId });
    if (!(await slot())) {
      reply.header("retry-after", "2");
      throw new HubError(429, "too_many_uploads", {
        detail: `${running} uploads are running and ${waiting.length} waiting; retry shortly`,
        limit: hub.opts.uploadConcurrency,
      });
    }
    try {
      // The fence again: the lease may have changed while this upload waited for its slot.
      scheduler.uploadFence({ taskId, workerId });
      const file = await receive(req.body as NodeJS.ReadableStream, join(incoming, `${randomUUID()}.zip.part`), limit);
      const out = await scheduler.upload({ taskId, workerId }, file);
      return reply.code(201).send(out);
    } finally {
      release();
    }
  });
}
