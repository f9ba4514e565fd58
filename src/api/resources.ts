// The resource API, /apis/loom.dev/v1alpha1: every CRD kind as a Kubernetes-style resource
// (list, watch, create, get, update, merge patch, JSON Patch, server-side apply, delete, and
// the status subresource), plus Events, read-only, for `describe`. Kinds and plurals come
// from the CRDs.
//
// Reads of CRD kinds come from the informer (map lookups); every write goes through the store,
// which validates it against the CRD schema, and the reply waits until the informer has seen
// the write, so a client always reads its own writes. Errors are Status objects (status.ts).
import type { FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from "fastify";
import type { ApiHub } from "./hub.ts";
import { API_VERSION, GROUP, loadCrds } from "../resources/crds.ts";
import { initialStatus, type Task } from "../resources/types.ts";
import { settleAdmission } from "../scheduler/lifecycle.ts";
import { isStoreError, notFound } from "../store/errors.ts";
import { jsonEqual } from "../resources/json.ts";
import type { StoredObject, TxnOp } from "../store/store.ts";
import { dryRunTxn } from "../store/dry-run.ts";
import { allocationOf } from "../admission/guard.ts";
import type { LeaseView } from "../admission/view.ts";
import { mergePatch } from "./merge-patch.ts";
import { byLastTimestamp, type EventObject } from "../reconciler/events.ts";
import { applyJsonPatch, JsonPatchError } from "./json-patch.ts";
import { applyConfiguration, managerParam, parseApplyBody } from "./server-side-apply.ts";
import { objectMatcher } from "./selectors.ts";
import {
  authRefusalAsStatus,
  badRequest,
  sendStatus,
  status,
  statusErrorHandler,
  StatusError,
  type Target,
} from "./status.ts";
import { largeRepliesAsBytes } from "./large-reply.ts";
import { DEFAULT_WATCH_CONFIG, WatchStream, type WatchConfig } from "./watch.ts";
import { bookmarkTable, includeObjectParam, toTable, wantsTable, type IncludeObject } from "./table.ts";
import { taskColumnsWithPosition, type Column } from "../resources/columns.ts";
import { FOREGROUND_FINALIZER, ORPHAN_FINALIZER } from "../reconciler/campaign.ts";

export const API_PREFIX = `/apis/${API_VERSION}`;

export type ResourceRoutesOptions = Partial<WatchConfig>;

type Resource = {
  plural: string;
  kind: string;
  listKind: string;
  apiVersion: string;
  /** CRD kinds: cached by the informer, writable, with a status subresource. Events: read-only, read from the store. */
  crd: boolean;
};

const EVENTS: Resource = { plural: "events", kind: "Event", listKind: "EventList", apiVersion: "v1", crd: false };

/** Status belongs to Loom: a created object starts with Loom's initial status, or none. */
const INITIAL_STATUS: Record<string, () => unknown> = { Task: initialStatus };

/** Attempts of a merge patch that did not name a resourceVersion, when a concurrent write wins. */
const PATCH_ATTEMPTS = 5;
/** Open watches served at once. */
const MAX_WATCHES = 512;
/** How long a write's reply waits for the informer to catch up. */
const SETTLE_TIMEOUT_MS = 10_000;

type Query = Record<string, string | string[] | undefined>;
type Body = Record<string, unknown>;

const isObject = (v: unknown): v is Body =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !Buffer.isBuffer(v);
const param = (q: Query, k: string): string | undefined => (Array.isArray(q[k]) ? q[k][0] : q[k]);

function boolParam(q: Query, k: string): boolean {
  const v = param(q, k);
  if (v === undefined || v === "" || v === "0" || v === "false") return false;
  if (v === "1" || v === "true") return true;
  throw badRequest(`${k} must be true, false, 1 or 0, got "${v}"`, k);
}

function revisionParam(q: Query): number | undefined {
  const v = param(q, "resourceVersion");
  if (v === undefined || v === "" || v === "0") return undefined;
  if (!/^\d+$/.test(v)) throw badRequest(`resourceVersion must be a revision number, got "${v}"`, "resourceVersion");
  return Number(v);
}

function secondsParam(q: Query, k: string): number {
  const v = param(q, k);
  if (v === undefined || v === "") return 0;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0) throw badRequest(`${k} must be a non-negative number of seconds, got "${v}"`, k);
  return n;
}

/** 422 Invalid naming one field of one object, as the store reports schema failures. */
function invalid(r: Resource, name: string, field: string, message: string): StatusError {
  return new StatusError("Invalid", 422, `${r.kind} "${name}" is invalid: ${field}: ${message}`, [
    { reason: "FieldValueInvalid", message, field },
  ]);
}

/** The body as an object of the path's kind: apiVersion and kind default from the path, and must agree with it. */
function objectFor(r: Resource, body: unknown, pathName?: string): StoredObject {
  if (!isObject(body)) throw badRequest("the request body must be a JSON object");
  const o: Body = { apiVersion: r.apiVersion, kind: r.kind, ...body };
  o.apiVersion ??= r.apiVersion;
  o.kind ??= r.kind;
  if (o.kind !== r.kind)
    throw badRequest(`kind ${JSON.stringify(o.kind)} does not match the path: ${r.plural} holds ${r.kind}`, "kind");
  if (o.apiVersion !== r.apiVersion)
    throw badRequest(
      `apiVersion ${JSON.stringify(o.apiVersion)} does not match the path: ${r.plural} are ${r.apiVersion}`,
      "apiVersion",
    );
  if (pathName !== undefined && (o.metadata === undefined || isObject(o.metadata))) {
    const meta = o.metadata ?? {};
    const name = meta.name ?? pathName;
    if (name !== pathName)
      throw badRequest(
        `the name of the object (${String(name)}) does not match the name in the path (${pathName})`,
        "metadata.name",
      );
    o.metadata = { ...meta, name };
  }
  return o as StoredObject;
}

/** A JSON Patch applied; a failed operation is an Invalid Status naming it (a failed test included, as in Kubernetes). */
function jsonPatched(cur: StoredObject, p: unknown): unknown {
  try {
    return applyJsonPatch(cur, p);
  } catch (e) {
    if (!(e instanceof JsonPatchError)) throw e;
    throw new StatusError("Invalid", 422, `the JSON patch does not apply: ${e.message}`, [
      {
        reason: e.testFailed ? "FieldValueInvalid" : "FieldValueNotFound",
        message: e.message,
        field: e.path.slice(1).replaceAll("/", "."),
      },
    ]);
  }
}

function withoutStatus(o: StoredObject): Body {
  const { status: _status, ...rest } = o;
  return rest;
}

/** The PATCH format a request names: JSON merge patch, JSON Patch or server-side apply. */
function patchType(req: FastifyRequest): "merge" | "json" | "apply" {
  const type = (req.headers["content-type"] ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/merge-patch+json" || type === "application/json") return "merge";
  if (type === "application/json-patch+json") return "json";
  if (type === "application/apply-patch+yaml") return "apply";
  throw new StatusError(
    "UnsupportedMediaType",
    415,
    `PATCH takes a JSON merge patch (application/merge-patch+json, kubectl patch --type=merge), a JSON Patch (application/json-patch+json, --type=json) or an apply configuration (application/apply-patch+yaml, kubectl apply --server-side); got ${type ? `"${type}"` : "no Content-Type"}`,
  );
}

/** What every resource route shares: the Hub, the watch settings and the open watches. */
type RouteContext = {
  hub: ApiHub;
  cfg: WatchConfig;
  watches: Set<WatchStream>;
  positions?: { at: number; byName: Map<string, number> };
};

/** How long the Task table's queue positions are reused: a watch renders a row per event, and each computation sorts the whole queue. */
const POSITIONS_TTL_MS = 1000;

/** The columns of a kind's Table; for tasks, with POSITION from the queue as it stands (recomputed at most once a second). */
function tableColumns(c: RouteContext, kind: string): Column[] | undefined {
  if (kind !== "Task") return undefined;
  const now = Date.now();
  if (!c.positions || now - c.positions.at > POSITIONS_TTL_MS) {
    c.positions = { at: now, byName: c.hub.scheduler.queuePositions() };
  }
  const byName = c.positions.byName;
  return taskColumnsWithPosition((t) => byName.get(t.metadata.name));
}
const table = (c: RouteContext, kind: string, objects: StoredObject[], rv: string, include: IncludeObject) =>
  toTable(kind, objects, rv, include, tableColumns(c, kind));

/** Read-your-writes: the reply waits until the informer reflects `rev`. */
async function settle(c: RouteContext, req: FastifyRequest, rev: number): Promise<void> {
  await c.hub.cache
    .waitForRevision(rev, SETTLE_TIMEOUT_MS)
    .catch((e: unknown) => req.log.warn({ err: e, rev }, "informer did not catch up with a write"));
}
const rvOf = (o: StoredObject) => Number(o.metadata.resourceVersion);

const snapshot = (c: RouteContext, r: Resource) => async (): Promise<{ items: StoredObject[]; revision: number }> =>
  r.crd
    ? { items: c.hub.cache.list(r.kind), revision: c.hub.cache.revision }
    : c.hub.store
        .list(r.kind)
        .then((l) => (r.kind === "Event" ? { ...l, items: (l.items as EventObject[]).sort(byLastTimestamp) } : l));

async function getObject(c: RouteContext, r: Resource, name: string): Promise<StoredObject> {
  const o = r.crd ? c.hub.cache.get(r.kind, name) : await c.hub.store.get(r.kind, name);
  if (!o) throw notFound(r.kind, name);
  return o;
}
/** GET of one object: itself, or a one-row Table when the client asks for one. */
async function getOne(c: RouteContext, r: Resource, req: FastifyRequest) {
  const o = await getObject(c, r, (req.params as { name: string }).name);
  return wantsTable(req.headers.accept)
    ? table(
        c,
        r.kind,
        [o],
        String(o.metadata.resourceVersion ?? ""),
        includeObjectParam(param(req.query as Query, "includeObject")),
      )
    : o;
}

async function listOrWatch(c: RouteContext, r: Resource, req: FastifyRequest, reply: FastifyReply) {
  const q = req.query as Query;
  const { matches, filtered } = objectMatcher(r.kind, {
    labelSelector: param(q, "labelSelector"),
    fieldSelector: param(q, "fieldSelector"),
  });
  // limit and continue are accepted and ignored: lists are served whole from memory.
  const asTable = wantsTable(req.headers.accept);
  const include = includeObjectParam(param(q, "includeObject"));
  if (!boolParam(q, "watch")) {
    const { items, revision } = await snapshot(c, r)();
    if (asTable) return table(c, r.kind, items.filter(matches), String(revision), include);
    return {
      apiVersion: r.apiVersion,
      kind: r.listKind,
      metadata: { resourceVersion: String(revision) },
      items: items.filter(matches),
    };
  }
  const from = revisionParam(q);
  const timeoutSeconds = secondsParam(q, "timeoutSeconds");
  if (from !== undefined) {
    const current = await c.hub.store.revision();
    // A revision from the future would silently skip events up to it.
    // Kubernetes answers 504 after a wait; Loom answers at once with 410 Expired, which every
    // client handles by listing again and watching from the list's resourceVersion.
    if (from > current)
      throw new StatusError(
        "Expired",
        410,
        `Too large resource version: ${from}, current resource version: ${current}; list again and watch from the list's resourceVersion`,
        [{ reason: "ResourceVersionTooLarge", message: "Too large resource version", field: "resourceVersion" }],
      );
  }
  // kubectl get -w asks for Tables: each event then carries a one-row Table, so the columns stay.
  const render = asTable
    ? (o: StoredObject) => table(c, r.kind, [o], String(o.metadata.resourceVersion ?? ""), include)
    : undefined;
  // kubectl get -w prints every event it receives and does not ask for BOOKMARKs: as in
  // Kubernetes, a Table watch gets them only with allowWatchBookmarks, as row-less Tables.
  const bookmarks = !asTable || boolParam(q, "allowWatchBookmarks");
  const renderBookmark = asTable ? bookmarkTable : undefined;
  // Each watch holds at most two buffers; a cap on their number bounds the total.
  if (c.watches.size >= MAX_WATCHES)
    throw new StatusError(
      "TooManyRequests",
      429,
      `${c.watches.size} watches are open, the most this Hub serves; close one or retry later`,
    );
  const stream = new WatchStream(
    {
      kind: r.kind,
      apiVersion: r.apiVersion,
      matches,
      matchesAll: !filtered,
      from,
      snapshot: snapshot(c, r),
      timeoutSeconds,
      render,
      bookmarks,
      renderBookmark,
    },
    c.cfg,
    c.watches,
  );
  await stream.start(c.hub.store);
  stream.open(reply);
  return reply;
}

/** A status write that grants or moves a lease must name a worker that exists (the store guard checks the rest). */
function assertLeaseTarget(
  c: RouteContext,
  r: Resource,
  name: string,
  next: StoredObject,
  cur: StoredObject | undefined,
) {
  if (r.kind !== "Task") return;
  const lease = (next.status as { lease?: { worker?: unknown } } | undefined)?.lease;
  const before = (cur?.status as { lease?: { worker?: unknown } } | undefined)?.lease;
  if (!lease || lease.worker === before?.worker) return;
  if (typeof lease.worker !== "string" || !c.hub.cache.get("Worker", lease.worker))
    throw invalid(r, name, "status.lease.worker", `names no worker: ${JSON.stringify(lease.worker)} does not exist`);
}

/**
 * A Task status written through the API leaves no admission condition its state contradicts
 * (a lease beside Unsatisfiable=True), the same rule every scheduler transition follows.
 */
function settledStatus(r: Resource, next: StoredObject): StoredObject {
  if (r.kind === "Task" && isObject(next.status)) settleAdmission(next.status, new Date().toISOString());
  return next;
}

/** dryRun=All (kubectl --dry-run=server, kubectl diff): decide the write, every check included, and store nothing. */
function isDryRun(req: FastifyRequest): boolean {
  // A DELETE may say it in its DeleteOptions body (kubectl delete --dry-run=server does), as a list.
  const inBody = req.method === "DELETE" && isObject(req.body) ? req.body.dryRun : undefined;
  const v =
    param(req.query as Query, "dryRun") ??
    (Array.isArray(inBody) ? (inBody.length ? inBody.join(",") : undefined) : (inBody as string | undefined));
  if (v === undefined) return false;
  if (v === "All") return true;
  throw badRequest(`dryRun must be "All" (decide the write and store nothing), got ${JSON.stringify(v)}`, "dryRun");
}

/**
 * One write of a request: committed, and the reply waits for the informer to see it; or, in
 * a dry run, decided against what is stored now (the lease guard counting the leases the
 * informer holds) and written nowhere.
 */
async function commit(c: RouteContext, req: FastifyRequest, op: TxnOp): Promise<StoredObject> {
  if (isDryRun(req)) return (await dryRunTxn({ store: c.hub.store, leasesOn: (w) => leasesOn(c, w) }, [op]))[0];
  const [written] = await c.hub.store.txn([op]);
  // A deletion's own revision is the latest one or older.
  await settle(c, req, op.op === "delete" ? await c.hub.store.revision() : rvOf(written));
  return written;
}

const leasesOn = (c: RouteContext, worker: string): LeaseView[] =>
  c.hub.cache
    .byIndex<Task & StoredObject>("Task", "leaseWorker", worker, { sorted: false })
    .flatMap((t) => allocationOf(t)?.lease ?? []);

/** A create stores the object with Loom's initial status, whatever status it was given. */
async function createObject(c: RouteContext, r: Resource, req: FastifyRequest, reply: FastifyReply, obj: StoredObject) {
  delete obj.status;
  const init = INITIAL_STATUS[r.kind];
  if (init) obj.status = init();
  return reply.code(201).send(await commit(c, req, { op: "create", object: obj }));
}

const create = (c: RouteContext, r: Resource, req: FastifyRequest, reply: FastifyReply) =>
  createObject(c, r, req, reply, objectFor(r, req.body));

async function replace(c: RouteContext, r: Resource, req: FastifyRequest, sub: "main" | "status") {
  const { name } = req.params as { name: string };
  const obj = objectFor(r, req.body, name);
  const rv = (obj.metadata as { resourceVersion?: unknown } | undefined)?.resourceVersion;
  if (rv !== undefined && rv !== null && typeof rv !== "string")
    throw invalid(r, name, "metadata.resourceVersion", "must be a string (resourceVersions are opaque strings)");
  if (sub === "status") assertLeaseTarget(c, r, name, settledStatus(r, obj), await c.hub.store.get(r.kind, name));
  else keepDeletion(obj, await c.hub.store.get(r.kind, name));
  // A given metadata.resourceVersion is a precondition (the store answers Conflict when stale).
  return commit(c, req, { op: sub === "status" ? "updateStatus" : "update", object: obj });
}

/**
 * A deletion once asked for stays asked for: a client can neither set nor clear
 * metadata.deletionTimestamp (as in Kubernetes), so an apply to a campaign whose tasks are
 * being orphaned or deleted cannot bring it back half done.
 */
function keepDeletion(next: StoredObject, cur: StoredObject | undefined): StoredObject {
  const ts = cur?.metadata.deletionTimestamp;
  if (ts) next.metadata.deletionTimestamp = ts;
  else delete next.metadata.deletionTimestamp;
  return next;
}

/** Server-side apply: create the object if absent, else merge the manager's configuration into it (server-side-apply.ts). */
async function apply(c: RouteContext, r: Resource, req: FastifyRequest, reply: FastifyReply) {
  const { name } = req.params as { name: string };
  const q = req.query as Query;
  const manager = managerParam(param(q, "fieldManager"));
  const force = boolParam(q, "force");
  const applied = objectFor(r, parseApplyBody(req.body), name);
  const rv = applied.metadata.resourceVersion as unknown;
  if (rv !== undefined && rv !== null && typeof rv !== "string")
    throw invalid(r, name, "metadata.resourceVersion", "must be a string (resourceVersions are opaque strings)");
  // A resourceVersion in the configuration is a precondition, as in a merge patch.
  const pinned = typeof rv === "string" && rv !== "" ? rv : undefined;
  const opts = { manager, force, apiVersion: r.apiVersion };
  for (let attempt = 1; ; attempt++) {
    const cur = await c.hub.store.get(r.kind, name);
    try {
      if (!cur) {
        if (pinned) throw notFound(r.kind, name);
        return await createObject(
          c,
          r,
          req,
          reply,
          objectFor(r, applyConfiguration(undefined, applied, { ...opts, now: new Date().toISOString() }), name),
        );
      }
      const next = keepDeletion(
        objectFor(r, applyConfiguration(cur, applied, { ...opts, now: new Date().toISOString() }), name),
        cur,
      );
      next.metadata.resourceVersion = pinned ?? cur.metadata.resourceVersion;
      if (jsonEqual(next, cur)) return cur;
      return await commit(c, req, { op: "update", object: next });
    } catch (e) {
      // A concurrent write (or create) between the read and this write: read again and re-apply.
      if (pinned || !(isStoreError(e, "Conflict") || isStoreError(e, "AlreadyExists")) || attempt >= PATCH_ATTEMPTS)
        throw e;
    }
  }
}

async function patch(c: RouteContext, r: Resource, req: FastifyRequest, reply: FastifyReply, sub: "main" | "status") {
  const type = patchType(req);
  if (type === "apply") {
    // Status is Loom's to write; a status write that is a merge or JSON patch stays possible for tools that must.
    if (sub === "status")
      throw new StatusError(
        "UnsupportedMediaType",
        415,
        "server-side apply is for an object's spec and metadata; status is written by Loom (patch it with --type=merge or --type=json if you must)",
      );
    return apply(c, r, req, reply);
  }
  const { name } = req.params as { name: string };
  if (type === "merge" && !isObject(req.body)) throw badRequest("a merge patch for a resource must be a JSON object");
  const p = req.body;
  if (type !== "json" && isObject(p) && p.metadata !== undefined && !isObject(p.metadata))
    throw invalid(r, name, "metadata", "must be an object");
  if (
    type !== "json" &&
    isObject(p) &&
    isObject(p.metadata) &&
    p.metadata.resourceVersion !== undefined &&
    p.metadata.resourceVersion !== null &&
    typeof p.metadata.resourceVersion !== "string"
  )
    throw invalid(r, name, "metadata.resourceVersion", "must be a string (resourceVersions are opaque strings)");
  // A JSON Patch pins the version with a test (or a replace) on /metadata/resourceVersion; a failed test refuses it.
  const pinned =
    type === "json"
      ? Array.isArray(p) && p.some((o) => isObject(o) && o.path === "/metadata/resourceVersion")
        ? "json-patch"
        : undefined
      : isObject(p) &&
          isObject(p.metadata) &&
          typeof p.metadata.resourceVersion === "string" &&
          p.metadata.resourceVersion !== ""
        ? p.metadata.resourceVersion
        : undefined;
  for (let attempt = 1; ; attempt++) {
    // Read from the store, not the informer: a stale read would only buy a Conflict and a retry.
    const cur = await c.hub.store.get(r.kind, name);
    if (!cur) throw notFound(r.kind, name);
    const next = objectFor(r, type === "json" ? jsonPatched(cur, p) : mergePatch(cur, p), name);
    if (!pinned) next.metadata.resourceVersion = cur.metadata.resourceVersion;
    if (sub === "status") assertLeaseTarget(c, r, name, settledStatus(r, next), cur);
    else keepDeletion(next, cur);
    // A patch that changes nothing writes nothing (no new revision, no event), as in Kubernetes.
    const same =
      sub === "status" ? jsonEqual(next.status, cur.status) : jsonEqual(withoutStatus(next), withoutStatus(cur));
    if (same && (!pinned || pinned === "json-patch" || pinned === cur.metadata.resourceVersion)) return cur;
    try {
      return await commit(c, req, { op: sub === "status" ? "updateStatus" : "update", object: next });
    } catch (e) {
      if (pinned || !isStoreError(e, "Conflict") || attempt >= PATCH_ATTEMPTS) throw e;
    }
  }
}

async function remove(c: RouteContext, r: Resource, req: FastifyRequest) {
  const { name } = req.params as { name: string };
  const body = isObject(req.body) ? req.body : {};
  const pre = isObject(body.preconditions) ? body.preconditions : {};
  if (pre.resourceVersion !== undefined && pre.resourceVersion !== null && typeof pre.resourceVersion !== "string")
    throw invalid(r, name, "preconditions.resourceVersion", "must be a string (resourceVersions are opaque strings)");
  const resourceVersion =
    typeof pre.resourceVersion === "string" && pre.resourceVersion !== "" ? pre.resourceVersion : undefined;
  const policy = propagationPolicy(req, body);
  // Only a Campaign owns objects. Background: it goes now and the campaign controller deletes
  // its tasks after it. Orphan and Foreground: it is marked for deletion with the policy's
  // finalizer, and the controller deletes it once its tasks are orphaned, or gone.
  if (r.kind !== "Campaign" || policy === "Background")
    return commit(c, req, { op: "delete", kind: r.kind, name, resourceVersion });
  const cur = await c.hub.store.get(r.kind, name);
  if (!cur) throw notFound(r.kind, name);
  if (resourceVersion && resourceVersion !== cur.metadata.resourceVersion)
    return commit(c, req, { op: "delete", kind: r.kind, name, resourceVersion }); // the Conflict it gets
  const finalizer = policy === "Orphan" ? ORPHAN_FINALIZER : FOREGROUND_FINALIZER;
  const finalizers = cur.metadata.finalizers ?? [];
  if (cur.metadata.deletionTimestamp && finalizers.includes(finalizer)) return cur;
  const metadata = {
    ...cur.metadata,
    deletionTimestamp: cur.metadata.deletionTimestamp ?? new Date().toISOString(),
    finalizers: [...finalizers.filter((f) => f !== ORPHAN_FINALIZER && f !== FOREGROUND_FINALIZER), finalizer],
  };
  return commit(c, req, { op: "update", object: { ...cur, metadata } });
}

/** DeleteOptions' propagationPolicy, from the body (kubectl) or the query; Background unless told. */
function propagationPolicy(req: FastifyRequest, body: Body): "Background" | "Orphan" | "Foreground" {
  const v =
    body.propagationPolicy ??
    param(req.query as Query, "propagationPolicy") ??
    (body.orphanDependents === true ? "Orphan" : undefined);
  if (v === undefined || v === null || v === "Background") return "Background";
  if (v === "Orphan" || v === "Foreground") return v;
  throw badRequest(
    `propagationPolicy must be Background, Orphan or Foreground, got ${JSON.stringify(v)}`,
    "propagationPolicy",
  );
}

export async function resourceRoutes(f: FastifyInstance, opts: ResourceRoutesOptions = {}): Promise<void> {
  const cfg: WatchConfig = { ...DEFAULT_WATCH_CONFIG };
  for (const k of Object.keys(cfg) as (keyof WatchConfig)[]) if (typeof opts[k] === "number") cfg[k] = opts[k];
  const hub = f.hub;
  const resources: Resource[] = [...loadCrds().values()].map((c) => ({
    plural: c.plural,
    kind: c.kind,
    listKind: c.listKind,
    apiVersion: API_VERSION,
    crd: true,
  }));
  // Fail at start-up, not on the first request, if a CRD kind is missing from the informer.
  for (const r of resources) hub.cache.list(r.kind);
  const byPlural = new Map([...resources, EVENTS].map((r) => [r.plural, r]));
  const watches = f.hub.watchStreams;
  const c: RouteContext = { hub, cfg, watches };

  const targetOf = (req: FastifyRequest): Target => {
    const r = byPlural.get(
      req.url
        .split("?")[0]
        .slice(API_PREFIX.length + 1)
        .split("/")[0],
    );
    // A create names its object in the body (kubectl prints `The Worker "NAME" is invalid`).
    const bodyName =
      req.method === "POST" &&
      isObject(req.body) &&
      isObject(req.body.metadata) &&
      typeof req.body.metadata.name === "string"
        ? req.body.metadata.name
        : undefined;
    const name = (req.params as { name?: string } | undefined)?.name ?? bodyName;
    return r ? { ...(r.crd ? { group: GROUP } : {}), kind: r.kind, ...(name ? { name } : {}) } : {};
  };

  await f.register(
    async (api) => {
      api.setErrorHandler(statusErrorHandler(targetOf));
      api.setNotFoundHandler((req, reply) =>
        sendStatus(
          reply,
          status(
            "NotFound",
            404,
            `the server could not find the requested resource (${req.method} ${req.url.split("?")[0]})`,
          ),
        ),
      );
      api.addHook("onSend", authRefusalAsStatus);
      largeRepliesAsBytes(api);
      // A bad dryRun value is refused before any write is attempted.
      api.addHook("preHandler", async (req) => {
        if (req.method !== "GET") isDryRun(req);
      });
      // End open watches first, or closing the server would wait for them for ever.
      api.addHook("preClose", (done) => {
        for (const w of [...watches]) w.shutdown();
        done();
      });

      const notAllowed = (url: string, allowed: HTTPMethods[]) => {
        const methods = (["GET", "POST", "PUT", "PATCH", "DELETE"] as HTTPMethods[]).filter(
          (m) => !allowed.includes(m),
        );
        api.route({
          method: methods,
          url,
          handler: (req, reply) =>
            sendStatus(
              reply.header("allow", allowed.join(", ")),
              status(
                "MethodNotAllowed",
                405,
                `${req.method} is not supported on ${url}; use ${allowed.join(", ")}`,
                targetOf(req),
              ),
            ),
        });
      };

      for (const r of resources) {
        const coll = `/${r.plural}`;
        const item = `${coll}/:name`;
        api.get(coll, (req, reply) => listOrWatch(c, r, req, reply));
        api.post(coll, (req, reply) => create(c, r, req, reply));
        notAllowed(coll, ["GET", "POST"]);
        api.get(item, (req) => getOne(c, r, req));
        api.put(item, (req) => replace(c, r, req, "main"));
        api.patch(item, (req, reply) => patch(c, r, req, reply, "main"));
        api.delete(item, (req) => remove(c, r, req));
        notAllowed(item, ["GET", "PUT", "PATCH", "DELETE"]);
        api.get(`${item}/status`, (req) => getObject(c, r, (req.params as { name: string }).name));
        api.put(`${item}/status`, (req) => replace(c, r, req, "status"));
        api.patch(`${item}/status`, (req, reply) => patch(c, r, req, reply, "status"));
        notAllowed(`${item}/status`, ["GET", "PUT", "PATCH"]);
      }
      api.get(`/${EVENTS.plural}`, (req, reply) => listOrWatch(c, EVENTS, req, reply));
      notAllowed(`/${EVENTS.plural}`, ["GET"]);
      api.get(`/${EVENTS.plural}/:name`, (req) => getOne(c, EVENTS, req));
      notAllowed(`/${EVENTS.plural}/:name`, ["GET"]);
    },
    { prefix: API_PREFIX },
  );
  // The core v1 path kubectl describe searches for an object's Events.
  await f.register(
    async (core) => {
      core.setErrorHandler(statusErrorHandler(targetOf));
      core.addHook("onSend", authRefusalAsStatus);
      largeRepliesAsBytes(core);
      // Loom has no namespaces: a namespaced path (kubectl events asks for its context's
      // namespace, "default" unless told) serves the same cluster-wide Events.
      for (const prefix of ["", "/namespaces/:namespace"]) {
        core.get(`${prefix}/events`, (req, reply) => listOrWatch(c, EVENTS, req, reply));
        core.get(`${prefix}/events/:name`, (req) => getOne(c, EVENTS, req));
      }
    },
    { prefix: "/api/v1" },
  );
}
