// The floor: a bare fastify server answering the Runner requests the lease benchmark sends
// (register, claim, start, complete, and dispatch to seed it) from an in-memory FIFO, with
// no admission and no durability. What Loom does beyond this is what Loom costs.
import Fastify from "fastify";

type T = {
  id: string;
  payload: unknown;
  state: "queued" | "leased" | "running" | "returned";
  worker?: string;
  until?: string;
};
const tasks = new Map<string, T>();
const fifo: T[] = [];
let head = 0;

const f = Fastify({ logger: false, bodyLimit: 16 * 1024 * 1024 });
const settings = (max: number) => ({
  initial_concurrency: max,
  desired_concurrency: max,
  max_concurrency: max,
  concurrency_policy: "fixed",
});
const workers = new Map<string, number>();

f.get("/api/healthz", async () => ({ ok: true, time: new Date().toISOString() }));
f.post("/api/tasks/dispatch", async (req, reply) => {
  const b = req.body as { tasks: { task_id: string; payload: unknown }[] };
  const created = [];
  for (const r of b.tasks) {
    if (tasks.has(r.task_id)) continue;
    const t: T = { id: r.task_id, payload: r.payload, state: "queued" };
    tasks.set(t.id, t);
    fifo.push(t);
    created.push({ task_id: t.id, state: "queued" });
  }
  return reply.code(created.length ? 201 : 200).send({ created, existing: [] });
});
f.post("/api/workers/register", async (req) => {
  const b = req.body as { worker_id: string; max_concurrency: number; resource_capacity: unknown };
  workers.set(b.worker_id, b.max_concurrency);
  return { ok: true, worker_id: b.worker_id, ...settings(b.max_concurrency), resource_capacity: b.resource_capacity };
});
f.post("/api/tasks/claim", async (req, reply) => {
  const b = req.body as { worker_id: string; limit?: number; lease_seconds?: number };
  const max = workers.get(b.worker_id);
  if (max === undefined) return reply.code(403).send({ error: "worker_not_available" });
  const out = [];
  const until = new Date(Date.now() + (b.lease_seconds ?? 600) * 1000).toISOString();
  while (out.length < (b.limit ?? 1) && head < fifo.length) {
    const t = fifo[head++];
    t.state = "leased";
    t.worker = b.worker_id;
    t.until = until;
    out.push({
      task_id: t.id,
      task_kind: "execution",
      lease_until: until,
      attempt_no: 1,
      assigned_worker_id: b.worker_id,
      payload: t.payload,
    });
  }
  return { tasks: out, ...settings(max), active_count: out.length };
});
const held = (b: { worker_id: string; task_id: string }) => {
  const t = tasks.get(b.task_id);
  if (!t) return { code: 404, body: { error: "task_not_found", task_id: b.task_id } };
  if (t.worker !== b.worker_id) return { code: 409, body: { error: "lease_worker_mismatch", task_id: b.task_id } };
  return { t };
};
for (const [verb, next] of [
  ["start", "running"],
  ["complete", "returned"],
] as const) {
  f.post(`/api/tasks/${verb}`, async (req, reply) => {
    const h = held(req.body as { worker_id: string; task_id: string });
    if (!h.t) return reply.code(h.code).send(h.body);
    const old = h.t.state;
    h.t.state = next;
    return { ok: true, task_id: h.t.id, old_state: old, new_state: next };
  });
}

const url = await f.listen({ host: "127.0.0.1", port: 0 });
process.stderr.write(`floor server listening on ${url}\n`);
process.once("SIGTERM", () => void f.close().then(() => process.exit(0)));
