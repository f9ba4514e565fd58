// GET /api/results/:id/logs: the text logs inside a stored result ZIP (stdout/stderr of the
// task and of each phase), so a viewer can show them without downloading the whole archive.
// Each log is cut to its last LOG_TAIL_BYTES: the end of a log is where failures are.
import { readFile } from "node:fs/promises";
import type { FastifyInstance } from "fastify";
import { readZip, ZipError } from "../results/zip.ts";
import { HubError } from "../protocol/errors.ts";

export const LOG_TAIL_BYTES = 64 * 1024;
const isLog = (name: string) => /(^|[/.])(stdout|stderr)\.txt$/.test(name) || name.endsWith(".log");

export async function resultLogRoutes(f: FastifyInstance): Promise<void> {
  f.get("/api/results/:id/logs", async (req) => {
    const { id } = req.params as { id: string };
    const r = await f.hub.store.get("Result", id);
    const spec = r?.spec as { path: string; task_id: string; verdict?: string; files?: string[] } | undefined;
    if (!spec) throw new HubError(404, "result_not_found", { result_id: id });
    const buf = await readFile(spec.path).catch(() => undefined);
    if (!buf) throw new HubError(404, "result_not_found", { result_id: id, detail: "the result file is missing" });
    let entries: Map<string, Buffer>;
    try {
      entries = await readZip(buf, { select: isLog });
    } catch (e) {
      if (!(e instanceof ZipError)) throw e;
      throw new HubError(422, "result_unreadable", { result_id: id, detail: e.message });
    }
    const logs = [...entries].map(([name, data]) => ({
      name,
      bytes: data.length,
      truncated: data.length > LOG_TAIL_BYTES,
      text: data.subarray(Math.max(0, data.length - LOG_TAIL_BYTES)).toString("utf8"),
    }));
    return { result_id: id, task_id: spec.task_id, verdict: spec.verdict ?? null, files: spec.files ?? [], logs };
  });
}
