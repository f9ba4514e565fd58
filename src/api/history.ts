// GET /api/data/history?minutes=60: the fleet's last hour for the web view's charts and
// timelines (observability/history.ts derives it from the stored tasks and Events).
import type { FastifyInstance } from "fastify";
import { HistoryBuilder, type FleetHistory } from "../observability/history.ts";
import type { EventObject } from "../reconciler/events.ts";
import { HubError } from "../protocol/errors.ts";

export async function historyRoutes(f: FastifyInstance): Promise<void> {
  const recent = new Map<number, { key: string; at: number; body: FleetHistory }>();
  f.get("/api/data/history", async (req) => {
    const raw = (req.query as Record<string, string | undefined>).minutes ?? "60";
    const minutes = Number(raw);
    // Events, where the queue's reasons come from, live about an hour: a longer window would mostly guess.
    if (!/^\d+$/.test(raw) || minutes < 5 || minutes > 180)
      throw new HubError(400, "invalid_minutes", {
        field: "minutes",
        detail: `minutes must be a whole number from 5 to 180, got ${JSON.stringify(raw)}`,
      });
    // Every open page asks every few seconds: one answer serves them all while the store has not moved, for a second at most.
    const key = `${minutes}/${f.hub.cache.revision}`;
    const hit = recent.get(minutes);
    if (hit && hit.key === key && Date.now() - hit.at < 1_000) return hit.body;
    const now = Date.now();
    const { items } = await f.hub.store.list<EventObject>("Event");
    const b = new HistoryBuilder(items, { now, minutes });
    // A pass over every task yields to I/O in slices, so no request waits behind it.
    let sliceStart = performance.now();
    let n = 0;
    for (const t of f.hub.cache.list("Task")) {
      b.add(t);
      if ((++n & 255) === 0 && performance.now() - sliceStart > 8) {
        await new Promise((r) => setImmediate(r));
        sliceStart = performance.now();
      }
    }
    const body = b.result();
    recent.set(minutes, { key, at: now, body });
    return body;
  });
}
