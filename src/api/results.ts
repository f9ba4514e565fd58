// The result list: which ZIPs a task's attempts uploaded, with their verdicts and issues, so
// `loom get results` and `loom logs` find one without knowing its id. The files themselves
// come from GET /api/results/:id.
import type { FastifyInstance } from "fastify";
import type { StoredObject } from "../store/store.ts";

type ResultSpec = {
  task_id: string;
  attempt_no: number;
  worker_id?: string;
  verdict: string;
  bytes: number;
  sha256: string;
  issues?: string[];
  uploaded_at: string;
};

export async function resultRoutes(f: FastifyInstance): Promise<void> {
  f.get("/api/results", async (req) => {
    const taskId = (req.query as Record<string, string | undefined>).task_id;
    const { items } = await f.hub.store.list<StoredObject & { spec: ResultSpec }>(
      "Result",
      taskId ? { labelSelector: `loom.dev/task=${taskId}` } : {},
    );
    const results = items.map(({ metadata, spec }) => ({
      result_id: metadata.name,
      task_id: spec.task_id,
      attempt_no: spec.attempt_no,
      worker_id: spec.worker_id ?? null,
      verdict: spec.verdict,
      bytes: spec.bytes,
      sha256: spec.sha256,
      issues: spec.issues ?? [],
      uploaded_at: spec.uploaded_at,
    }));
    results.sort((a, b) => a.uploaded_at.localeCompare(b.uploaded_at) || a.result_id.localeCompare(b.result_id));
    return { results };
  });
}
