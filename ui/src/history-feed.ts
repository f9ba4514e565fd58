// The fleet's last hour from /api/data/history, fetched when a view that draws it asks: again
// once the watched tasks have changed (a few seconds apart at most), and every half minute so
// the window moves on a quiet fleet.
import { json } from "./auth.ts";
import type { FleetHistory } from "../../src/observability/history.ts";

export type { FleetHistory };

const MIN_GAP_MS = 3_000;
const MAX_AGE_MS = 30_000;

export class HistoryFeed {
  data: FleetHistory | undefined;
  error = "";
  private loadedAt = 0;
  private tasksVersion = -1;
  private loading: Promise<void> | undefined;

  constructor(private readonly onLoad: () => void) {}

  /** Fetch when the data is older than the tasks it was derived from, or than MAX_AGE_MS. */
  want(tasksVersion: number, now = Date.now()): void {
    if (this.loading) return;
    const stale =
      now - this.loadedAt > MAX_AGE_MS || (tasksVersion !== this.tasksVersion && now - this.loadedAt > MIN_GAP_MS);
    if (!stale) return;
    this.tasksVersion = tasksVersion;
    this.loadedAt = now;
    this.loading = json<FleetHistory>("/api/data/history?minutes=60")
      .then(
        (d) => {
          this.data = d;
          this.error = "";
        },
        (e: Error) => {
          this.error = e.message;
        },
      )
      .finally(() => {
        this.loading = undefined;
        this.onLoad();
      });
  }
}
