// `loom apply -f` and `loom delete`. Files are read and validated locally with the same loader
// and CRD schemas the Hub uses; a file with any error sends nothing. Each object is then read
// and created, or merge-patched (labels, annotations, spec) when it differs, as kubectl does.
import { Command } from "commander";
import { formatInputError } from "../resources/input-errors.ts";
import { loadPaths } from "../resources/load.ts";
import { isQueued } from "../resources/types.ts";
import type { StoredObject } from "../store/store.ts";
import { ApiError, CliError, type Client, RESOURCE_PREFIX, UsageError } from "./client.ts";
import { CAMPAIGN_LABEL } from "../resources/manifest.ts";
import { clientOf, err, out, withController } from "./common.ts";
import { kindByName, objectRef, resolveKind } from "./kinds.ts";

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
const same = (a: unknown, b: unknown) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
const canonical = (v: unknown): unknown =>
  Array.isArray(v)
    ? v.map(canonical)
    : isObject(v)
      ? Object.fromEntries(
          Object.keys(v)
            .sort()
            .map((k) => [k, canonical(v[k])]),
        )
      : v;

/** RFC 7386 merge patch turning `from` into `to`: changed keys, `null` for removed ones; undefined when equal. */
export function createMergePatch(from: unknown, to: unknown): unknown {
  if (!isObject(from) || !isObject(to)) return same(from, to) ? undefined : to;
  const patch: Json = {};
  for (const [k, v] of Object.entries(to)) {
    if (!(k in from)) patch[k] = v;
    else {
      const d = createMergePatch(from[k], v);
      if (d !== undefined) patch[k] = d;
    }
  }
  for (const k of Object.keys(from)) if (!(k in to)) patch[k] = null;
  return Object.keys(patch).length ? patch : undefined;
}

/** `spec.resource_capacity.cpu_millis: 4000 -> 8000` for each leaf a patch changes. */
export function describePatch(cur: unknown, patch: unknown, at = ""): string[] {
  if (!isObject(patch)) return [`${at}: ${show(cur)} -> ${show(patch)}`];
  return Object.entries(patch).flatMap(([k, v]) => {
    const here = at ? `${at}.${k}` : k;
    const old = isObject(cur) ? cur[k] : undefined;
    if (v === null) return [`${here}: ${show(old)} -> (removed)`];
    if (isObject(v) && isObject(old)) return describePatch(old, v, here);
    return [`${here}: ${show(old)} -> ${show(v)}`];
  });
}
const show = (v: unknown) => (v === undefined ? "(unset)" : JSON.stringify(v));

export type ApplyPlan = { patch?: Json; warning?: string };

/**
 * The merge patch that makes a stored object match its declaration. Declared labels and
 * annotations win and others stay (a controller's, an operator's); the spec is the
 * declaration's. The same two exceptions as the GitOps sync: an operator's cordon survives a
 * re-apply (as a Node's does), and a task that has left the queue keeps the spec it was leased with.
 */
export function planPatch(cur: StoredObject, desired: StoredObject): ApplyPlan {
  const meta: Json = {};
  for (const f of ["labels", "annotations"] as const) {
    const want = desired.metadata[f] ?? {};
    const have = cur.metadata[f] ?? {};
    const changed = Object.fromEntries(Object.entries(want).filter(([k, v]) => have[k] !== v));
    if (Object.keys(changed).length) meta[f] = changed;
  }
  let spec = (desired.spec ?? {}) as Json;
  const curSpec = (cur.spec ?? {}) as Json;
  let warning: string | undefined;
  if (cur.kind === "Worker" && !("unschedulable" in spec) && curSpec.unschedulable === true)
    spec = { ...spec, unschedulable: true };
  const state = (cur.status as { state?: string } | undefined)?.state;
  if (cur.kind === "Task" && state !== undefined && !isQueued(state) && !same(spec, curSpec)) {
    warning = `task is ${state}; its spec change is not applied`;
    spec = curSpec;
  }
  const specPatch = createMergePatch(curSpec, spec);
  if (!Object.keys(meta).length && specPatch === undefined) return { warning };
  // The resourceVersion read is a precondition: a write in between is a Conflict, not lost.
  const patch: Json = { metadata: { ...meta, resourceVersion: cur.metadata.resourceVersion } };
  if (specPatch !== undefined) patch.spec = specPatch;
  return { patch, warning };
}

/** What a file declares, without what the store owns. */
function declaration(o: StoredObject): StoredObject {
  const {
    uid: _u,
    resourceVersion: _r,
    generation: _g,
    creationTimestamp: _c,
    deletionTimestamp: _d,
    ...metadata
  } = o.metadata;
  return { apiVersion: o.apiVersion, kind: o.kind, metadata, spec: o.spec };
}

async function applyOne(client: Client, o: StoredObject, dryRun: boolean): Promise<string[]> {
  const k = kindByName(o.kind);
  if (!k) throw new UsageError(`cannot apply kind ${o.kind}`);
  const ref = objectRef(k, o.metadata.name);
  const path = `${k.path}/${encodeURIComponent(o.metadata.name)}`;
  const suffix = dryRun ? " (dry run)" : "";
  const cur = await client.get<StoredObject>(path).catch((e) => {
    if (e instanceof ApiError && e.status === 404) return undefined;
    throw e;
  });
  const desired = declaration(o);
  if (!cur) {
    if (!dryRun) await client.post(k.path, desired);
    return [`${ref} created${suffix}`];
  }
  const plan = planPatch(cur, desired);
  if (plan.warning) err(`warning: ${ref}: ${plan.warning}\n`);
  if (!plan.patch) return [`${ref} unchanged${suffix}`];
  if (dryRun) {
    const { resourceVersion: _rv, ...meta } = plan.patch.metadata as Json;
    const shown = { ...plan.patch, metadata: meta };
    return [`${ref} configured${suffix}`, ...describePatch(cur, shown).map((l) => `  ${l}`)];
  }
  await client.request("PATCH", path, { body: plan.patch, contentType: "application/merge-patch+json" });
  return [`${ref} configured`];
}

export function applyCommand(): Command {
  return withController(new Command("apply"))
    .description(
      "create or update workers, campaigns and tasks from inventory, manifest or resource files (validated locally first)",
    )
    .requiredOption(
      "-f, --filename <path...>",
      "files or directories (*.json, *.yaml, *.yml, *.jsonl); - reads standard input",
    )
    .option("--dry-run", "print what would be created or changed, and write nothing")
    .action(async (o: { filename: string[]; dryRun?: boolean }, cmd: Command) => {
      const res = loadPaths(o.filename);
      for (const n of res.notes) err(`note: ${formatInputError(n)}\n`);
      if (res.errors.length) {
        for (const e of res.errors) err(`${formatInputError(e)}\n`);
        throw new CliError(
          `${res.errors.length} error(s) in ${o.filename.join(", ")}; nothing was applied`,
          1,
          "Invalid",
        );
      }
      if (!res.resources.length) return err("nothing to apply\n");
      const client = clientOf(cmd);
      let failed = 0;
      for (const r of res.resources) {
        try {
          out((await applyOne(client, r, Boolean(o.dryRun))).map((l) => `${l}\n`).join(""));
        } catch (e) {
          if (!(e instanceof ApiError)) throw e;
          // One refused object does not stop the others (kubectl's habit); the exit code tells.
          failed++;
          err(
            new ApiError(
              e.status,
              e.reason ?? "Error",
              `${objectRef(r.kind, r.metadata.name)}: ${e.message}`,
              e.causes,
            ).render(),
          );
        }
      }
      if (failed) process.exitCode = 1;
    });
}

export function deleteCommand(): Command {
  return withController(new Command("delete"))
    .description("delete workers, tasks or campaigns by name")
    .argument("<type>", "worker, task or campaign (plural and short names too)")
    .argument("<name...>", "object names")
    .option(
      "--cascade <policy>",
      "what a campaign's tasks do, as kubectl's --cascade: background (deleted after it, the default), foreground (deleted before it) or orphan (kept, no longer owned by it)",
      "background",
    )
    .option(
      "--timeout <seconds>",
      "how long to wait for a campaign's tasks to be deleted or orphaned before answering",
      "60",
    )
    .action(async (type: string, names: string[], o: { cascade: string; timeout: string }, cmd: Command) => {
      const k = resolveKind(type);
      if (!k.writable) throw new UsageError(`${k.plural} cannot be deleted`);
      const policy = CASCADE[o.cascade];
      if (!policy) throw new UsageError(`--cascade must be background, foreground or orphan, got "${o.cascade}"`);
      const timeoutMs = Number(o.timeout) * 1000;
      if (!Number.isFinite(timeoutMs) || timeoutMs < 0)
        throw new UsageError(`--timeout must be a number of seconds, got "${o.timeout}"`);
      const client = clientOf(cmd);
      for (const n of names) {
        const path = `${k.path}/${encodeURIComponent(n)}`;
        if (k.kind !== "Campaign") {
          await client.request("DELETE", path);
          out(`${objectRef(k, n)} deleted\n`);
          continue;
        }
        const before = await ownedTasks(client, n);
        await client.request("DELETE", path, {
          body: { apiVersion: "v1", kind: "DeleteOptions", propagationPolicy: policy },
        });
        const left = await waitForDependents(client, path, n, timeoutMs);
        const gone = before.filter((t) => !left.has(t)).length;
        const what =
          policy === "Orphan" ? `${gone} task(s) kept, no longer owned by it` : `${gone} task(s) deleted with it`;
        out(
          `${objectRef(k, n)} deleted (${what}${left.size ? `; ${left.size} still to go after ${o.timeout}s, the Hub finishes them` : ""})\n`,
        );
      }
    });
}

const CASCADE: Record<string, "Background" | "Foreground" | "Orphan" | undefined> = {
  background: "Background",
  foreground: "Foreground",
  orphan: "Orphan",
};

type TaskRef = { metadata: { name: string; ownerReferences?: { kind: string; name: string }[] } };

/** The names of the tasks a campaign owns now. */
async function ownedTasks(client: Client, campaign: string): Promise<string[]> {
  const l = await client.get<{ items: TaskRef[] }>(`${RESOURCE_PREFIX}/tasks`, {
    labelSelector: `${CAMPAIGN_LABEL}=${campaign}`,
  });
  return l.items
    .filter((t) => t.metadata.ownerReferences?.some((r) => r.kind === "Campaign" && r.name === campaign))
    .map((t) => t.metadata.name);
}

/** Wait until the campaign is gone and owns no task; the tasks it still owns when the time is up. */
async function waitForDependents(
  client: Client,
  path: string,
  campaign: string,
  timeoutMs: number,
): Promise<Set<string>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const exists = await client.get(path).then(
      () => true,
      (e: unknown) => {
        if (e instanceof ApiError && e.status === 404) return false;
        throw e;
      },
    );
    const left = await ownedTasks(client, campaign);
    if ((!exists && !left.length) || Date.now() >= deadline) return new Set(left);
    await new Promise((r) => setTimeout(r, 100));
  }
}
