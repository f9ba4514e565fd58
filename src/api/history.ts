// GET /api/data/history?minutes=60: the fleet's last hour for the web view's charts and
// timelines (observability/history.ts derives it from the stored tasks and Events).
import type { FastifyInstance } from "fastify";
import { fleetHistory } from "../observability/history.ts";
import type { EventObject } from "../reconciler/events.ts";
import { HubError } from "../scheduler/errors.ts";

export async function historyRoutes(f: FastifyInstance): Promise<void> {
  f.get("/api/data/history", async (req) => {
    const raw = (req.query as Record<string, string | undefined>).minutes ?? "60";
    const minutes = Number(raw);
    // Events, where the queue's reasons come from, live about an hour: a longer window would mostly guess.
    if (!/^\d+$/.test(raw) || minutes < 5 || minutes > 180) throw new HubError(400, "invalid_minutes", { field: "minutes", detail: `minutes must be a whole number from 5 to 180, got ${JSON.stringify(raw)}` });
    const { items } = await f.hub.store.list<EventObject>("Event");
    return fleetHistory(f.hub.cache.list("Task"), items, { now: Date.now(), minutes });
  });
}
