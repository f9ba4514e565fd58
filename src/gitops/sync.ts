// GitOps file sync: the watched files and folders are the desired state of the Workers,
// Campaigns and Tasks they declare. Each file is a unit: it is parsed and validated whole,
// then applied in one transaction (apply.ts); a file that does not parse or validate
// changes nothing and is reported (log line, Warning Event on the file). Deleting a file
// prunes what it declared. Drift is repaired: a file-owned object changed or deleted in the
// store (kubectl edit/delete) brings its file round again, as does a periodic resync, and a
// restore is recorded as an Event on the object.
import { createHash } from "node:crypto";
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { basename, extname, join, relative, resolve, sep } from "node:path";
import { watch, type FSWatcher } from "chokidar";
import { INPUT_EXTENSIONS, loadFile } from "../resources/load.ts";
import { type InputError, formatInputError } from "../resources/input-errors.ts";
import { isActive } from "../resources/types.ts";
import type { LoomEvent } from "../resources/meta.ts";
import { isStoreError } from "../store/errors.ts";
import type { Store, StoredObject, WatchEvent, WatchHandle } from "../store/store.ts";
import { Controller, type ReconcileObserver } from "../reconciler/controller.ts";
import {
  type ApplyOptions,
  type PlanCounts,
  type PlanStep,
  GITOPS_KINDS,
  applyPlan,
  countPlan,
  keyOf,
  planApply,
  readCurrent,
  sourceOf,
} from "./apply.ts";

export type GitopsLog = (level: "info" | "warn" | "error", msg: string, extra?: object) => void;

export type GitopsSyncOptions = {
  store: Store;
  /** Files and directories (walked recursively for *.json, *.yaml, *.yml, *.jsonl). */
  paths: string[];
  recordEvent: (e: LoomEvent) => void;
  log: GitopsLog;
  /** Quiet time after the last change before a batch of changed files is applied. */
  debounceMs?: number;
  /** How often every file is applied again, repairing drift the store watch did not report (0: never). */
  resyncMs?: number;
  /** Where each drift repair is reported (the Hub's metrics). */
  observe?: ReconcileObserver;
};

export type FileReport = {
  file: string;
  /** applied: written; unchanged: nothing to write; rejected: invalid or a name conflict, nothing written; removed: the file is gone and its objects were pruned; failed: the store write failed. */
  outcome: "applied" | "unchanged" | "rejected" | "removed" | "failed";
  counts?: PlanCounts;
  errors: InputError[];
  /** Prune candidates left in place, and why. */
  kept: { kind: string; name: string; reason: string }[];
};

export type SyncReport = { files: FileReport[] };

export const DEFAULT_DEBOUNCE_MS = 150;
/** A stream of changes still gets applied at least this often. */
const MAX_WAIT_FACTOR = 5;
/** Editor swap and backup files that carry an input extension's name. */
const TEMP_NAME = /(^[#~])|(~$)|(^\.)|(\.(swp|swx|swo|tmp|bak|crswap)$)/i;

type Parsed = { file: string; resources?: StoredObject[]; errors: InputError[]; gone: boolean; hash?: string };

const fileObject = (path: string): StoredObject => ({ apiVersion: "v1", kind: "File", metadata: { name: path } });

export class GitopsSync {
  private readonly store: Store;
  private readonly paths: string[];
  private readonly debounceMs: number;
  private readonly recordEvent: (e: LoomEvent) => void;
  private readonly log: GitopsLog;
  private watcher: FSWatcher | undefined;
  private taskWatch: WatchHandle | undefined;
  /** Batches run one at a time, in order. */
  private chain: Promise<unknown> = Promise.resolve();
  private readonly pending = new Set<string>();
  /** The paths the watcher follows: those that existed when it was opened. */
  private watchedPaths: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private firstPendingAt = 0;
  private closed = false;
  /** Per file: the objects (Kind/name) it declared when it last applied. Rebuilt from the store's source annotations on start. */
  private readonly applied = new Map<string, Set<string>>();
  /** Per file: what it declares now, as far as it counts (its last valid parse, else what it applied). Decides between files. */
  private readonly declares = new Map<string, Set<string>>();
  /** Files rejected only because another file holds one of their names; retried when other files change. */
  private readonly blocked = new Set<string>();
  /** Files whose last outcome was a rejection, so their recovery is reported. */
  private readonly rejected = new Set<string>();
  /** The errors a file was last rejected with. */
  private readonly lastRejection = new Map<string, string>();
  /** Pruned Workers still holding leases: worker -> its file and the tasks leased on it. */
  private readonly waiting = new Map<string, { source: string; tasks: Set<string> }>();
  /** Per file: a hash of the content it last applied; a write from unchanged content is a drift repair. */
  private readonly appliedHash = new Map<string, string>();
  /** Per file-owned object: the generation last seen, so status-only writes do not wake the files. */
  private readonly generations = new Map<string, number>();
  private objectWatch: WatchHandle | undefined;
  /**
   * Drift repair is a controller like the Hub's others: a key is a file, its reconcile
   * re-applies the file if its content is what it last applied, and the resync re-queues
   * every file. The file watcher's own batches stay apart (see schedule()).
   */
  private readonly repairs: Controller;

  constructor(opts: GitopsSyncOptions) {
    this.store = opts.store;
    this.paths = [...new Set(opts.paths.map((p) => resolve(p)))];
    this.debounceMs = opts.debounceMs ?? DEFAULT_DEBOUNCE_MS;
    this.recordEvent = opts.recordEvent;
    this.log = opts.log;
    this.repairs = new Controller(
      {
        name: "gitops-repair",
        keys: () => [...this.applied.keys()].sort(),
        reconcile: (file) => this.enqueue(() => this.repair(file)),
      },
      {
        log: (level, msg, extra) => this.log(level, `gitops: ${msg}`, extra),
        observe: opts.observe,
        resyncMs: opts.resyncMs ?? 60_000,
      },
    );
  }

  /** Rebuild what each file applied from the store, sync every file once, then watch. Resolves when the first sync is done. */
  async start(): Promise<void> {
    const fromRevision = await this.store.revision();
    await this.rebuildFromStore();
    for (const p of this.paths)
      if (!existsSync(p))
        this.log("warn", `gitops: ${p} does not exist; it is watched once it exists and a full sync runs (SIGHUP)`, {
          path: p,
        });
    // Watch before the first sync, so no change made during it is missed (it is applied after).
    await this.openWatcher();
    await this.syncNow();
    // Pruned workers go once their last lease ends: follow task changes from before the first sync.
    const onTask = (ev: WatchEvent) => this.onTask(ev);
    try {
      this.taskWatch = await this.store.watch("Task", fromRevision, onTask);
    } catch (e) {
      if (!isStoreError(e, "Gone")) throw e;
      this.taskWatch = await this.store.watch("Task", await this.store.revision(), onTask);
    }
    // Generations as applied, so only a later change to one counts as drift.
    const from = await this.store.revision();
    for (const kind of GITOPS_KINDS)
      for (const o of (await this.store.list(kind)).items)
        this.generations.set(keyOf(o.kind, o.metadata.name), o.metadata.generation ?? 0);
    this.objectWatch = await this.store.watch(undefined, from, (ev) => this.onObject(ev));
    // Its first resync only finds the files just synced unchanged, and writes nothing.
    if (!this.closed) this.repairs.start();
  }

  /**
   * Re-apply a file whose content is what it last applied. A file being edited (its content
   * differs) is left to the file watcher, so a half-written file is never read here.
   */
  private async repair(file: string): Promise<void> {
    const p = this.parse(file);
    if (p.gone || p.errors.length || p.hash === undefined || p.hash !== this.appliedHash.get(file)) return;
    this.noteDeclarations(p);
    await this.syncFile(p, { quietRepeat: true });
  }

  /** A file-owned object deleted, or its spec or labels changed (a new generation), outside the file: bring the file round. */
  private onObject(ev: WatchEvent): void {
    // Decided from the event's kind, so events of other kinds are never decoded here.
    if (!(GITOPS_KINDS as readonly string[]).includes(ev.kind)) return;
    const src = sourceOf(ev.object);
    if (src === undefined || !this.applied.has(src)) return;
    const key = keyOf(ev.object.kind, ev.object.metadata.name);
    const gen = ev.object.metadata.generation ?? 0;
    const before = this.generations.get(key);
    if (ev.type === "DELETED") this.generations.delete(key);
    else this.generations.set(key, gen);
    // After the debounce, so a burst of edits to one file's objects brings it round once.
    if (ev.type === "DELETED" || (before !== undefined && before !== gen)) this.repairs.enqueue(src, this.debounceMs);
  }

  /** Sync every file now (the first sync, SIGHUP, tests). Runs after any batch in progress. */
  async syncNow(): Promise<SyncReport> {
    // chokidar does not follow a path that did not exist when watching began: watch again.
    if (!this.closed && this.watcher && this.paths.some((p) => !this.watchedPaths.includes(p) && existsSync(p)))
      await this.openWatcher();
    return this.enqueue(() => this.runBatch(this.allFiles()));
  }

  private async openWatcher(): Promise<void> {
    await this.watcher?.close();
    this.watcher = undefined;
    this.watchedPaths = this.paths.filter((p) => existsSync(p));
    const watcher = watch(this.watchedPaths, {
      ignoreInitial: true,
      ignored: (p, stats) => this.ignored(p, stats?.isFile() ?? false),
      // Half-written files are not read: a file is picked up once its size has settled.
      awaitWriteFinish: { stabilityThreshold: 50, pollInterval: 10 },
    });
    this.watcher = watcher;
    const onFile = (p: string) => this.schedule(resolve(p));
    watcher.on("add", onFile).on("change", onFile).on("unlink", onFile);
    // A removed directory takes its files with it.
    watcher.on("unlinkDir", (d: string) => {
      const dir = resolve(d);
      for (const f of this.applied.keys()) if (f.startsWith(dir + sep)) this.schedule(f);
    });
    watcher.on("error", (e: unknown) => this.log("error", `gitops: watch error: ${(e as Error).message ?? e}`));
    if (this.watchedPaths.length) await new Promise<void>((ready) => watcher.once("ready", ready));
    if (this.closed) await watcher.close(); // closed while it was opening
  }

  /** Files whose last version was rejected (their previous state stays applied). */
  rejectedFiles(): string[] {
    return [...this.rejected].sort();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.repairs.stop();
    this.taskWatch?.stop();
    this.objectWatch?.stop();
    await this.watcher?.close();
    await this.chain.catch(() => {});
  }

  // ---- files -------------------------------------------------------------------------------

  /** Whether a path under a watched directory is an input file (roots themselves are never ignored). */
  private accepts(file: string): boolean {
    for (const root of this.paths) {
      if (file === root) return true;
      if (!file.startsWith(root + sep)) continue;
      const parts = relative(root, file).split(sep);
      if (parts.some((s) => s.startsWith("."))) return false;
      const name = basename(file);
      return !TEMP_NAME.test(name) && (INPUT_EXTENSIONS as readonly string[]).includes(extname(name).toLowerCase());
    }
    return false;
  }

  private ignored(p: string, isFile: boolean): boolean {
    const abs = resolve(p);
    for (const root of this.paths) {
      if (abs === root) return false;
      if (!abs.startsWith(root + sep)) continue;
      if (
        relative(root, abs)
          .split(sep)
          .some((s) => s.startsWith("."))
      )
        return true; // .git and the like
      return isFile && !this.accepts(abs);
    }
    return false;
  }

  /** Every input file under the paths now, plus files that applied something and are gone (to prune them). */
  private allFiles(): string[] {
    const out = new Set<string>();
    const visit = (p: string) => {
      let st;
      try {
        st = statSync(p);
      } catch {
        return;
      }
      if (st.isDirectory()) {
        for (const name of readdirSync(p)) {
          const child = join(p, name);
          if (!name.startsWith(".")) visit(child);
        }
      } else if (this.accepts(p)) out.add(p);
    };
    for (const p of this.paths) visit(p);
    for (const f of this.applied.keys()) if (this.accepts(f)) out.add(f);
    return [...out].sort();
  }

  private async rebuildFromStore(): Promise<void> {
    this.applied.clear();
    for (const kind of GITOPS_KINDS) {
      for (const o of (await this.store.list(kind)).items) {
        const src = sourceOf(o);
        if (src === undefined) continue;
        if (!this.applied.has(src)) this.applied.set(src, new Set());
        this.applied.get(src)!.add(keyOf(o.kind, o.metadata.name));
      }
    }
    for (const src of this.applied.keys())
      if (!this.accepts(src))
        this.log("info", `gitops: objects declared by ${src} are outside the watched paths; left alone`, { file: src });
  }

  private parse(file: string): Parsed {
    let isFile = false;
    try {
      isFile = statSync(file).isFile();
    } catch {
      // gone
    }
    if (!isFile) return { file, errors: [], gone: true };
    const r = loadFile(file);
    // v1 fields Loom keeps without acting on them are shown, as `loom validate` shows them.
    if (r.notes.length)
      this.log("info", `gitops: ${file}: kept, not acted on: ${r.notes.map((n) => n.field).join(", ")}`, {
        file,
        kept_fields: r.notes.map((n) => n.field),
      });
    let hash: string | undefined;
    try {
      hash = createHash("sha256").update(readFileSync(file)).digest("hex");
    } catch {
      // unreadable now: no claim that the content is unchanged
    }
    return { file, resources: r.resources, errors: r.errors, gone: false, hash };
  }

  // ---- scheduling ----------------------------------------------------------------------------

  private schedule(file: string): void {
    if (this.closed || !this.accepts(file)) return;
    if (this.pending.size === 0) this.firstPendingAt = Date.now();
    this.pending.add(file);
    clearTimeout(this.timer);
    // Trailing debounce, bounded so a steady stream of writes still gets applied.
    const wait = Math.max(
      0,
      Math.min(this.debounceMs, this.firstPendingAt + this.debounceMs * MAX_WAIT_FACTOR - Date.now()),
    );
    this.timer = setTimeout(() => this.flush(), wait);
  }

  private flush(): void {
    this.timer = undefined;
    if (this.closed || this.pending.size === 0) return;
    const files = [...this.pending].sort();
    this.pending.clear();
    void this.enqueue(() => this.runBatch(files)).catch((e) =>
      this.log("error", `gitops: sync failed: ${(e as Error).message}`, { files }),
    );
  }

  private enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.chain.then(fn, fn);
    this.chain = run.catch(() => {});
    return run;
  }

  private onTask(ev: WatchEvent): void {
    if (this.waiting.size === 0) return;
    const name = ev.object.metadata.name;
    const status = (ev.object as { status?: { state?: string; lease?: { worker?: string } } }).status;
    for (const [worker, entry] of this.waiting) {
      if (!entry.tasks.has(name)) continue;
      const stillLeased = ev.type !== "DELETED" && isActive(status?.state) && status?.lease?.worker === worker;
      if (!stillLeased) this.schedule(entry.source);
    }
  }

  // ---- applying ------------------------------------------------------------------------------

  /** Parse every file first, so ownership between files is decided on what they declare now; then apply each. */
  private async runBatch(files: string[]): Promise<SyncReport> {
    const parsed = files.map((f) => this.parse(f));
    for (const p of parsed) this.noteDeclarations(p);
    // Gone files first: what moved to another file is handed over, not pruned and recreated.
    const order = [...parsed.filter((p) => p.gone), ...parsed.filter((p) => !p.gone)];
    const reports: FileReport[] = [];
    let changed = false;
    for (const p of order) {
      const r = await this.syncFile(p);
      reports.push(r);
      changed ||= r.outcome === "applied" || r.outcome === "removed";
    }
    // A file blocked by another file's name may go through now that the other changed.
    for (let round = 0; changed && this.blocked.size > 0 && round < 3; round++) {
      changed = false;
      for (const f of [...this.blocked].sort()) {
        const p = this.parse(f);
        this.noteDeclarations(p);
        const r = await this.syncFile(p, { quietRepeat: true });
        const at = reports.findIndex((x) => x.file === f);
        if (at >= 0) reports[at] = r;
        else reports.push(r);
        changed ||= r.outcome === "applied";
      }
    }
    return { files: reports };
  }

  private noteDeclarations(p: Parsed): void {
    if (p.gone) this.declares.delete(p.file);
    else if (p.errors.length === 0)
      this.declares.set(p.file, new Set(p.resources!.map((o) => keyOf(o.kind, o.metadata.name))));
    // An invalid file keeps what it applied: its old objects stand until it is fixed.
    else this.declares.set(p.file, new Set(this.applied.get(p.file) ?? []));
  }

  /** Whether `owner` (a stored object's source annotation) still declares the object. */
  private stillDeclares(owner: string, key: string): boolean {
    if (!this.accepts(owner)) return true; // not ours to judge
    if (!existsSync(owner)) return false;
    return this.declares.get(owner)?.has(key) ?? true;
  }

  private declaredElsewhere(self: string, key: string): string | undefined {
    for (const [f, keys] of [...this.declares].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      if (f !== self && keys.has(key) && existsSync(f)) return f;
    return undefined;
  }

  /** `quietRepeat`: a rejection identical to the file's last one is not reported again (internal retries). */
  private async syncFile(p: Parsed, how: { quietRepeat?: boolean } = {}): Promise<FileReport> {
    const { file } = p;
    const reject = (errors: InputError[], conflict: boolean) =>
      this.reject(file, errors, conflict, how.quietRepeat ?? false);
    if (p.errors.length) return reject(p.errors, false);
    const desired = p.gone ? [] : p.resources!;
    const opts: ApplyOptions = {
      source: file,
      prune: true,
      stillDeclares: (owner, kind, name) => this.stillDeclares(owner, keyOf(kind, name)),
      declaredElsewhere: (kind, name) => this.declaredElsewhere(file, keyOf(kind, name)),
    };
    const includeTasks = [...(this.applied.get(file) ?? [])].some((k) => k.startsWith("Task/"));
    let result;
    try {
      const current = await readCurrent(this.store, desired, { ...opts, includeTasks });
      result = await applyPlan(this.store, planApply(current, desired, opts), { includeTasks });
    } catch (e) {
      if (isStoreError(e, "Invalid")) {
        const causes = e.causes.length
          ? e.causes
          : [{ field: "", message: e.message, reason: "FieldValueInvalid" as const }];
        return reject(
          causes.map((c) => ({ ...c, source: file, message: c.field ? c.message : e.message })),
          false,
        );
      }
      this.log("error", `gitops: ${file}: apply failed, will retry on the next change: ${(e as Error).message}`, {
        file,
      });
      return { file, outcome: "failed", errors: [], kept: [] };
    }
    const { plan } = result;
    if (plan.errors.length) return reject(plan.errors, true);

    const counts = countPlan(plan);
    const kept = plan.steps
      .filter((s): s is Extract<PlanStep, { op: "keep" }> => s.op === "keep")
      .map(({ kind, name, reason }) => ({ kind, name, reason }));
    // A gone file stays known while something it declared is left in place (a leased worker), so a later sync finishes the prune.
    const keys = p.gone ? kept.map((k) => keyOf(k.kind, k.name)) : desired.map((o) => keyOf(o.kind, o.metadata.name));
    if (keys.length || !p.gone) this.applied.set(file, new Set(keys));
    else this.applied.delete(file);
    this.trackWaiting(file, plan.steps);
    const wrote = result.written.length > 0;
    // The file is as it was when it last applied, yet the store differed: something changed it behind the file's back.
    const restored = !p.gone && p.hash !== undefined && this.appliedHash.get(file) === p.hash;
    if (p.hash !== undefined) this.appliedHash.set(file, p.hash);
    else this.appliedHash.delete(file);
    for (const o of result.written) this.generations.set(keyOf(o.kind, o.metadata.name), o.metadata.generation ?? 0);
    if (restored)
      for (const o of result.written)
        this.recordEvent({
          object: o,
          type: "Warning",
          reason: "DriftRestored",
          message: `restored as ${file} declares it: it had been changed or deleted outside the file`,
        });
    const recovered = this.rejected.delete(file);
    this.lastRejection.delete(file);
    this.blocked.delete(file);

    const summary = `${counts.created} created, ${counts.updated} updated, ${counts.deleted} deleted, ${counts.cordoned} cordoned, ${counts.unchanged} unchanged`;
    if (wrote || recovered) {
      const reason = p.gone ? "FileDeleted" : "FileApplied";
      const message = `${p.gone ? "file removed; pruned what it declared" : "applied"}: ${summary}${kept.length ? `; ${kept.length} left in place` : ""}`;
      this.recordEvent({ object: fileObject(file), type: "Normal", reason, message });
      this.log("info", `gitops: ${file}: ${message}`, { file, ...counts, kept });
    }
    for (const s of plan.steps)
      if (s.op === "cordon")
        this.recordEvent({
          object: s.object,
          type: "Normal",
          reason: "Pruned",
          message: `no longer declared by ${file}: cordoned; deleted once its ${s.activeTasks.length} active lease(s) end`,
        });
    return { file, outcome: p.gone ? "removed" : wrote ? "applied" : "unchanged", counts, errors: [], kept };
  }

  /** Remember pruned Workers that still hold leases, so the end of their last lease brings this file round again. */
  private trackWaiting(file: string, steps: PlanStep[]): void {
    for (const [w, e] of this.waiting) if (e.source === file) this.waiting.delete(w);
    for (const s of steps)
      if (s.kind === "Worker" && (s.op === "cordon" || s.op === "keep") && s.activeTasks?.length)
        this.waiting.set(s.name, { source: file, tasks: new Set(s.activeTasks) });
  }

  private reject(file: string, errors: InputError[], conflict: boolean, quietRepeat: boolean): FileReport {
    if (conflict) this.blocked.add(file);
    else this.blocked.delete(file);
    this.rejected.add(file);
    const lines = errors.map(formatInputError);
    const said = lines.join("\n");
    if (quietRepeat && this.lastRejection.get(file) === said) return { file, outcome: "rejected", errors, kept: [] };
    this.lastRejection.set(file, said);
    this.log("warn", `gitops: ${file} rejected, nothing changed: ${lines.join("; ")}`, { file, errors: lines });
    const shown = lines.slice(0, 10).join("; ") + (lines.length > 10 ? `; and ${lines.length - 10} more` : "");
    this.recordEvent({
      object: fileObject(file),
      type: "Warning",
      reason: "FileRejected",
      message: `${errors.length} error(s), nothing changed: ${shown}`,
    });
    return { file, outcome: "rejected", errors, kept: [] };
  }
}
