// `loom get TYPE [NAME]`: tables from the resource API, `-o` for the API's own answer, and
// `-w` to keep printing rows as objects change (client-go's list-then-watch: resume from the
// last resourceVersion after a dropped connection, list again on 410 Gone).
import { Command } from "commander";
import { taskColumnsWithPosition, type Column } from "../resources/columns.ts";
import { ApiError, type Client, UsageError } from "./client.ts";
import { list, selectors, watchLoop, type GetOptions, type List, type Obj } from "./list-watch.ts";
import { clientOf, err, out, withController } from "./common.ts";
import { columnCells, outputArg, renderTemplate, type Template } from "./templates.ts";
import { type KindInfo, objectRef, resolveKind } from "./kinds.ts";
import {
  columnWidths,
  formatObject,
  formatRows,
  type OutputFormat,
  tableCells,
  visibleColumns,
  when,
} from "./printers.ts";

export { list, selectors, watchLoop } from "./list-watch.ts";

/** Prints objects in one output format; a table prints its headers once and keeps its column widths. */
class ObjectPrinter {
  private widths: number[] = [];
  private printedHeaders = false;
  private docs = 0;
  constructor(
    private readonly k: KindInfo,
    private readonly format: OutputFormat | Template | undefined,
    private readonly headers: boolean,
  ) {}

  /** A whole answer: a List or one object, printed as the API returned it for -o json|yaml (and given to a jsonpath template). */
  answer(body: Obj | List, items: Obj[]): void {
    if (this.format === "json" || this.format === "yaml") return out(formatObject(body, this.format));
    if (typeof this.format === "object" && this.format.kind === "jsonpath")
      return out(renderTemplate(this.format.parts, body));
    this.rows(items);
  }

  /** Objects one by one (watch events, a relist). */
  objects(items: Obj[]): void {
    if (this.format === "json") for (const o of items) out(formatObject(o, "json"));
    else if (this.format === "yaml")
      for (const o of items) out(`${this.docs++ ? "---\n" : ""}${formatObject(o, "yaml")}`);
    else if (typeof this.format === "object" && this.format.kind === "jsonpath")
      for (const o of items) out(renderTemplate(this.format.parts, o));
    else this.rows(items);
  }

  private rows(items: Obj[]): void {
    if (!items.length) return;
    if (this.format === "name") return out(items.map((o) => `${objectRef(this.k, o.metadata?.name ?? "")}\n`).join(""));
    const cols = visibleColumns(columnsOf(this.k), this.format === "wide");
    const withHeaders = this.headers && !this.printedHeaders;
    const custom =
      typeof this.format === "object" && this.format.kind === "custom-columns" ? this.format.columns : undefined;
    const cells = custom
      ? [...(withHeaders ? [custom.map((c) => c.header)] : []), ...items.map((o) => columnCells(custom, o))]
      : tableCells(cols, items, new Date(), !withHeaders);
    if (!cells.length) return;
    this.printedHeaders ||= withHeaders;
    const lines = formatRows(cells, this.widths);
    this.widths = columnWidths(cells).map((w, i) => Math.max(w, this.widths[i] ?? 0));
    out(lines.map((l) => `${l}\n`).join(""));
  }
}

/**
 * A queued task's queue_position is derived from the whole queue, never stored on the task,
 * so it is a column of `loom get tasks -o wide` only: the values are fetched in one call and
 * attached under a symbol, which never reaches a JSON or YAML printout.
 */
const QUEUE_POSITION = Symbol("queue_position");
/** The kind's columns, with POSITION after REQUESTS for tasks. */
function columnsOf(k: KindInfo): Column[] {
  return k.kind === "Task"
    ? taskColumnsWithPosition((o) => (o as { [QUEUE_POSITION]?: number })[QUEUE_POSITION])
    : k.columns;
}

/** The POSITION column's values: one call for every queued task; without it the column shows <none>. */
async function attachPositions(client: Client, items: Obj[]): Promise<void> {
  type Positions = { positions: Record<string, number> };
  const r = await client.get<Positions>("/api/data/queue-positions").catch((e): Positions => {
    if (e instanceof ApiError) return { positions: {} };
    throw e;
  });
  for (const o of items) {
    const p = r.positions[o.metadata?.name ?? ""];
    if (p !== undefined) (o as { [QUEUE_POSITION]?: number })[QUEUE_POSITION] = p;
  }
}

export function getCommand(): Command {
  return withController(new Command("get"))
    .description("list workers, tasks, campaigns or events, or get one by name")
    .argument(
      "<type>",
      "workers, tasks, campaigns, events or results (also singular, or lw, lt, lc, ev), or hubs (the Hub replicas)",
    )
    .argument("[name]", "one object by name (for results: a task's results)")
    .option(
      "-o, --output <format>",
      "output format: wide, json, yaml, name, jsonpath=TEMPLATE or custom-columns=HEADER:EXPR,...",
      outputArg(["wide", "json", "yaml", "name"]),
    )
    .option("-l, --selector <selector>", "label selector, e.g. loom.dev/campaign=c1,tier!=gpu")
    .option("--field-selector <selector>", "field selector, e.g. status.lease.worker=evaluation-01")
    .option("--state <state>", "tasks in this state (the field selector status.state=STATE)")
    .option("-w, --watch", "after the list, print a row for every change (Ctrl-C ends)")
    .option("--no-headers", "leave out the header row")
    .action(async (type: string, name: string | undefined, o: GetOptions, cmd: Command) => {
      // Results are not resources: their list comes from the Runner API's store of ZIPs.
      if (type === "results" || type === "result") {
        const { getResultsTable, resultsOf } = await import("./results.ts");
        const rows = await resultsOf(clientOf(cmd), name);
        if (o.output === "json" || o.output === "yaml") return out(formatObject({ results: rows }, o.output));
        return rows.length ? out(getResultsTable(rows)) : err("No resources found.\n");
      }
      if (type === "hubs" || type === "hub") return getHubs(clientOf(cmd), name, o);
      const k = resolveKind(type);
      const client = clientOf(cmd);
      const printer = new ObjectPrinter(k, o.output, o.headers);
      if (o.watch) {
        const q = selectors(k, o, name);
        const ac = new AbortController();
        const stop = () => ac.abort();
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
        try {
          const first = await list(client, k, q);
          printer.objects(first.items);
          await watchLoop(client, k, q, first, {
            show: (objs) => printer.objects(objs),
            log: (l) => err(`${l}\n`),
            signal: ac.signal,
          });
        } catch (e) {
          if (!ac.signal.aborted) throw e;
        } finally {
          process.off("SIGINT", stop);
          process.off("SIGTERM", stop);
        }
        return;
      }
      if (name !== undefined) {
        if (o.selector || o.fieldSelector || o.state)
          throw new UsageError("a name cannot be combined with -l, --field-selector or --state");
        const obj = await client.get<Obj>(`${k.path}/${encodeURIComponent(name)}`);
        return printer.answer(obj, [obj]);
      }
      const l = await list(client, k, selectors(k, o));
      if (k.kind === "Task" && o.output === "wide") await attachPositions(client, l.items);
      if (!l.items.length && o.output !== "json" && o.output !== "yaml") return err("No resources found.\n");
      printer.answer(l, l.items);
    });
}

type HubRow = { id: string; url: string; started_at: string; leader: boolean };

/** The Hub replicas alive now, the leader marked (one row on a SQLite store). */
async function getHubs(client: Client, name: string | undefined, o: GetOptions): Promise<void> {
  const { items } = await client.get<{ items: HubRow[] }>("/api/hubs");
  const rows = name === undefined ? items : items.filter((h) => h.id === name);
  if (name !== undefined && !rows.length) throw new ApiError(404, "NotFound", `hub "${name}" not found`);
  if (o.output === "json" || o.output === "yaml") return out(formatObject({ items: rows }, o.output));
  if (o.output === "name") return out(rows.map((h) => `hub/${h.id}\n`).join(""));
  const now = new Date();
  const cells = rows.map((h) => [h.id, h.leader ? "leader" : "follower", h.url, when(h.started_at, now)]);
  out(
    formatRows(o.headers ? [["NAME", "ROLE", "URL", "STARTED"], ...cells] : cells)
      .map((l) => `${l}\n`)
      .join(""),
  );
}
