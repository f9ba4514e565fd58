// A Hub child on a scale data dir with its workers made live and kept live: the start of the
// admission scenario.
import { startHub, stopHub, type HubProc } from "./hub.ts";
import { heartbeatAll, keepHeartbeating, scaleDataDir } from "./scale.ts";
import type { RunOptions } from "./scenario.ts";

export const scaleSizes = (quick: boolean) =>
  quick ? { tasks: 2_000, workers: 20 } : { tasks: 200_000, workers: 2_000 };

/** How often every worker heartbeats again while a scale scenario runs (keepHeartbeating). */
export const HEARTBEAT_EVERY_MS = 30_000;

export async function liveScaleHub(
  o: RunOptions,
  tasks: number,
  workers: number,
): Promise<{ hub: HubProc; close: () => Promise<void> }> {
  const dir = await scaleDataDir(tasks, workers);
  const hub = await startHub(dir, o.hubArgs, 600_000);
  try {
    await heartbeatAll(hub.url, workers);
  } catch (e) {
    await stopHub(hub, { keepData: true });
    throw e;
  }
  const beats = keepHeartbeating(hub.url, workers, HEARTBEAT_EVERY_MS);
  return {
    hub,
    close: async () => {
      await beats.stop();
      await stopHub(hub, { keepData: true });
    },
  };
}
