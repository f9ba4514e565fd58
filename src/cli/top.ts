// `loom top workers`: reserved against capacity per dimension as bars, with active/limit.
// Colors only on a terminal (and never with NO_COLOR), so piped output stays plain text.
import { Command } from "commander";
import { RESOURCE_PREFIX } from "./client.ts";
import { clientOf, out, withController } from "./common.ts";
import type { CapacityEntry, WorkerCapacityReply } from "../protocol/types.gen.ts";
import { resolveKind } from "./kinds.ts";
import { DIMENSIONS, formatTable, NONE, ratio, type Column } from "./printers.ts";
import type { Worker } from "../resources/types.ts";

export const BAR_WIDTH = 10;

const paint = (code: number, s: string, color: boolean) => (color && s ? `\x1b[${code}m${s}\x1b[0m` : s);

/** `[#####.....]  50% 2000m/4000m`; a dimension with no capacity shows `-` for its share. */
export function bar(reserved: number | undefined, capacity: number | undefined, unit: string, color: boolean): string {
  const r = reserved ?? 0;
  if (capacity === undefined) return NONE;
  if (capacity <= 0) return `[${".".repeat(BAR_WIDTH)}]    - ${ratio(r, capacity, unit)}`;
  const share = r / capacity;
  const filled = Math.min(BAR_WIDTH, Math.round(share * BAR_WIDTH));
  const pct = `${Math.round(share * 100)}%`.padStart(4);
  // green below 70%, yellow below 90%, red from there: how close admission is to refusing
  const code = share >= 0.9 ? 31 : share >= 0.7 ? 33 : 32;
  return `[${paint(code, "#".repeat(filled), color)}${".".repeat(BAR_WIDTH - filled)}] ${pct} ${ratio(r, capacity, unit)}`;
}

export function topColumns(color: boolean): Column<CapacityEntry>[] {
  return [
    { name: "WORKER", priority: 0, cell: (w) => w.worker_id },
    { name: "STATUS", priority: 0, cell: (w) => w.status ?? NONE },
    { name: "ACTIVE/LIMIT", priority: 0, cell: (w) => ratio(w.active_count, w.effective_limit) },
    ...DIMENSIONS.map((d): Column<CapacityEntry> => ({
      name: d.label,
      priority: 0,
      cell: (w) => bar(w.reserved?.[d.field], w.capacity?.[d.field], d.unit, color),
    })),
  ];
}

export function topCommand(): Command {
  return withController(new Command("top"))
    .description("show reserved resources against capacity per worker (top workers)")
    .argument("<type>", "workers")
    .action(async (type: string, _o: unknown, cmd: Command) => {
      resolveKind(type, ["Worker"]);
      const client = clientOf(cmd);
      const [cap, list] = await Promise.all([
        client.get<WorkerCapacityReply>("/api/data/worker-capacity"),
        client.get<{ items: Worker[] }>(`${RESOURCE_PREFIX}/workers`),
      ]);
      // The capacity API leaves cordoned workers out; their (last written) status still says what they hold.
      const live = new Map(cap.workers.map((w) => [w.worker_id, w]));
      const rows: CapacityEntry[] = list.items.map(
        (w) =>
          live.get(w.metadata.name) ?? {
            worker_id: w.metadata.name,
            status: w.spec?.unschedulable ? "cordoned" : NONE,
            capacity: w.status?.capacity,
            reserved: w.status?.reserved,
            active_count: w.status?.active_count,
            effective_limit: w.status?.effective_limit,
          },
      );
      for (const w of cap.workers) if (!rows.some((r) => r.worker_id === w.worker_id)) rows.push(w);
      if (!rows.length) return void process.stderr.write("No workers.\n");
      const color = Boolean(process.stdout.isTTY) && !process.env.NO_COLOR;
      out(formatTable(topColumns(color), rows, new Date()));
    });
}
