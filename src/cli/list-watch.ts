// Listing and watching one kind through the resource API, as kubectl does: selectors,
// the list, and the watch that resumes from the last resourceVersion after a dropped
// connection and lists again on 410 Gone. `loom get -w` and `loom logs -f` both use it.
import { loadCrds } from "../resources/crds.ts";
import { ApiError, type Client, type Query, UnreachableError, UsageError } from "./client.ts";
import type { KindInfo } from "./kinds.ts";
import type { OutputFormat } from "./printers.ts";
import type { Template } from "./templates.ts";

export type Obj = { kind?: string; metadata?: { name?: string; resourceVersion?: string } } & Record<string, unknown>;
export type List = { kind?: string; metadata?: { resourceVersion?: string }; items: Obj[] };
type WatchEvent = { type: "ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR"; object: Obj };

export type GetOptions = {
  output?: OutputFormat | Template;
  selector?: string;
  fieldSelector?: string;
  state?: string;
  watch?: boolean;
  headers: boolean;
};

/** Reconnect delays after a dropped watch: quick at first, then at most every few seconds. */
const RECONNECT_MS = [250, 500, 1000, 2000, 4000];

function taskStates(): string[] {
  const schema = loadCrds().get("Task")?.schema as
    { properties?: { status?: { properties?: { state?: { enum?: string[] } } } } } | undefined;
  return schema?.properties?.status?.properties?.state?.enum ?? [];
}

/** The label and field selectors of a request, `--state` becoming `status.state=STATE`. */
export function selectors(
  k: KindInfo,
  o: Pick<GetOptions, "selector" | "fieldSelector" | "state">,
  name?: string,
): Query {
  const fields: string[] = [];
  if (o.fieldSelector) fields.push(o.fieldSelector);
  if (o.state !== undefined) {
    if (k.kind !== "Task") throw new UsageError(`--state: only tasks have a state, not ${k.plural}`);
    const states = taskStates();
    if (states.length && !states.includes(o.state))
      throw new UsageError(`--state: unknown state ${JSON.stringify(o.state)}; one of: ${states.join(", ")}`);
    fields.push(`status.state=${o.state}`);
  }
  if (name !== undefined) fields.push(`metadata.name=${name}`);
  return { labelSelector: o.selector, fieldSelector: fields.join(",") || undefined };
}

export async function list(client: Client, k: KindInfo, q: Query): Promise<List> {
  return client.get<List>(k.path, q);
}

export type WatchOptions = {
  /** Called with the objects to print: a relist's items, or one changed object. */
  show(objects: Obj[]): void;
  /** Diagnostics (a dropped connection, a relist). */
  log(line: string): void;
  signal: AbortSignal;
  /** Delays before reconnecting; the last repeats. */
  reconnectMs?: number[];
};

/**
 * Watch from the list's resourceVersion until `signal` aborts: resume from the last
 * resourceVersion seen (BOOKMARKs included) when the stream ends or drops, list again when
 * the Hub answers 410 (too old), and never end on its own while the Hub may come back.
 */
export async function watchLoop(client: Client, k: KindInfo, q: Query, first: List, o: WatchOptions): Promise<void> {
  const { signal } = o;
  const delays = o.reconnectMs ?? RECONNECT_MS;
  let rv = first.metadata?.resourceVersion;
  let failures = 0;
  const relist = async () => {
    const l = await list(client, k, q);
    o.show(l.items);
    rv = l.metadata?.resourceVersion;
  };
  while (!signal.aborted) {
    let why: string | undefined;
    try {
      for await (const raw of client.lines(
        k.path,
        { ...q, watch: 1, allowWatchBookmarks: "true", resourceVersion: rv },
        signal,
      )) {
        const ev = raw as WatchEvent;
        failures = 0;
        if (ev.type === "ERROR") {
          const s = ev.object as { code?: number; reason?: string; message?: string };
          if (s.code === 410) {
            why = "resourceVersion too old (410)";
            rv = undefined;
            break;
          }
          throw new ApiError(s.code ?? 500, s.reason ?? "WatchError", s.message ?? "the watch failed");
        }
        if (ev.object?.metadata?.resourceVersion) rv = ev.object.metadata.resourceVersion;
        if (ev.type !== "BOOKMARK") o.show([ev.object]);
      }
      why ??= "the Hub closed the watch";
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof ApiError && e.status === 410) {
        why = "resourceVersion too old (410)";
        rv = undefined;
      } else if (e instanceof UnreachableError) {
        why = e.message;
      } else if (e instanceof TypeError) {
        // fetch reports a connection cut mid-body as a TypeError ("terminated")
        why = `connection lost: ${e.message}`;
      } else throw e;
    }
    if (signal.aborted) return;
    const delay = delays[Math.min(failures++, delays.length - 1)];
    o.log(`watch: ${why}; ${rv === undefined ? "listing again" : `resuming from resourceVersion ${rv}`}`);
    await new Promise((r) => setTimeout(r, delay));
    if (signal.aborted) return;
    if (rv === undefined) {
      try {
        await relist();
      } catch (e) {
        if (!(e instanceof UnreachableError)) throw e;
      }
    }
  }
}
