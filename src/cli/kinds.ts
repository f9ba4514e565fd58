// Resource type names as kubectl accepts them: plural, singular, kind or a short name, all
// from the CRDs (plus the core Event), so a new CRD name works without touching the CLI.
import { loadCrds } from "../resources/crds.ts";
import { RESOURCE_PREFIX, UsageError } from "./client.ts";
import { campaignColumns, eventColumns, queueColumns, taskColumns, workerColumns } from "./columns.ts";
import type { Column } from "./printers.ts";

export type KindInfo = {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
  /** The collection path of the resource API. */
  path: string;
  columns: Column[];
  /** CRD kinds can be written; Events are read-only. */
  writable: boolean;
};

const COLUMNS: Record<string, () => Column[]> = {
  Worker: workerColumns,
  Task: taskColumns,
  Campaign: campaignColumns,
  Queue: queueColumns,
};

export function kinds(): KindInfo[] {
  const out: KindInfo[] = [...loadCrds().values()].map((c) => ({
    kind: c.kind,
    plural: c.plural,
    singular: c.singular,
    shortNames: c.shortNames,
    path: `${RESOURCE_PREFIX}/${c.plural}`,
    columns: COLUMNS[c.kind]?.() ?? [],
    writable: true,
  }));
  out.push({
    kind: "Event",
    plural: "events",
    singular: "event",
    shortNames: ["ev", "lev"],
    path: `${RESOURCE_PREFIX}/events`,
    columns: eventColumns,
    writable: false,
  });
  return out;
}

export function kindByName(kind: string): KindInfo | undefined {
  return kinds().find((k) => k.kind === kind);
}

/** `workers`, `worker`, `Worker`, `lw` -> Worker; anything else is a usage error listing the choices. */
export function resolveKind(arg: string, allowed?: string[]): KindInfo {
  const a = arg.toLowerCase();
  const all = kinds().filter((k) => !allowed || allowed.includes(k.kind));
  const k = all.find(
    (x) => x.plural === a || x.singular === a || x.kind.toLowerCase() === a || x.shortNames.includes(a),
  );
  if (!k) {
    const choices = all.map((x) => `${x.plural} (${[x.singular, ...x.shortNames].join(", ")})`).join(", ");
    throw new UsageError(`unknown resource type ${JSON.stringify(arg)}; use one of: ${choices}`);
  }
  return k;
}

/** `worker/evaluation-01`, as kubectl names objects in its messages and `-o name`. */
export const objectRef = (k: { singular: string } | string, name: string) =>
  `${typeof k === "string" ? k.toLowerCase() : k.singular}/${name}`;
