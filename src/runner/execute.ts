// Running one claimed task in <work>/<task>/attempt-NNN/ and packing the result ZIP
// (RUNNER_PROTOCOL §2 "Task execution on the Runner").
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { appendFile, copyFile, lstat, mkdir, readdir, realpath, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import type { ClaimedTask } from "../protocol/types.gen.ts";
import { writeZipFile, type ZipEntryInput } from "../results/zip.ts";
import { hostSnapshot, type HostResources } from "./host.ts";
import { aggregateUsage, runProcess, STOPPED_EXIT_CODE, utcNow, type ResourceUsage } from "./process.ts";
import { materializeSource, resolveSource, type SourceSummary } from "./source.ts";
import { isJsonObject } from "../resources/json.ts";

/** A task as `/api/tasks/claim` (or a direct push) hands it over; saved verbatim as task.json. */
export type { ClaimedTask };

export interface WorkerResult {
  task_id: string;
  attempt_no: number;
  worker_id: string;
  exit_code: number;
  verdict: "clean" | "run_error";
  runner: string;
  started_at: string;
  finished_at: string;
  /** v1's name for finished_at, kept for readers of v1 results. */
  completed_at: string;
  resource_usage: ResourceUsage;
  /** The claim's controller_concurrency, whole: the admission snapshot is at .resource_admission. */
  controller_concurrency: Record<string, unknown>;
  /** The same admission snapshot at top level (v1 always wrote {} here). */
  resource_admission: Record<string, unknown>;
  /** The host's resource snapshot at completion (v1 quirk: not the registered capacity). */
  resource_capacity: HostResources;
  hostname: string;
  platform: string;
  stdout_path: string;
  stderr_path: string;
  phase_result_path?: string;
  normalized?: unknown;
  timed_out?: boolean;
  /** Why the task was stopped from outside (lease lost, shutdown), if it was. */
  stopped?: string;
}

export interface ExecuteOptions {
  workDir: string;
  workerId: string;
  /** Aborting stops the task's processes; the reason lands in stderr and worker-result.stopped. */
  signal?: AbortSignal;
  /** Environment variables never passed to task processes (the Runner's tokens). */
  scrubEnv?: string[];
  killGraceMs?: number;
  /** Base environment for task processes (default: this process's). */
  baseEnv?: NodeJS.ProcessEnv;
}

export interface ExecutionOutcome {
  zipPath: string;
  zipBytes: number;
  attemptDir: string;
  result: WorkerResult;
}

export const DEFAULT_TIMEOUT_SECONDS = 300;
const RUNTIME_ENV_KEYS = [
  "LOOM_TASK_ID",
  "LOOM_ATTEMPT_NO",
  "LOOM_WORKER_ID",
  "LOOM_CAMPAIGN_ID",
  "LOOM_CASE_ID",
  "LOOM_RUN_ID",
  "LOOM_SETTING_ID",
  "LOOM_TASK_KIND",
  "LOOM_PHASE_NAME",
  "LOOM_PHASE_INDEX",
];
export const DEFAULT_SCRUBBED_ENV = ["LOOM_HUB_TOKEN", "LOOM_RUNNER_TOKEN"];
const pad = (n: number, w: number) => String(n).padStart(w, "0");

/** A task id as a directory name: ids are slugs already, but `..` or a `/` must never leave the work dir. */
export function taskDirName(taskId: string): string {
  const slug = taskId.replace(/[^A-Za-z0-9_.-]+/g, "-").replace(/^-+|-+$/g, "") || "unknown";
  if (slug === taskId && slug !== "." && slug !== "..") return slug;
  return `${slug.replace(/^\.+/, "_")}-${createHash("sha256").update(taskId).digest("hex").slice(0, 8)}`;
}

export function attemptPaths(workDir: string, task: ClaimedTask) {
  const attemptNo = Math.max(1, Math.trunc(Number(task.attempt_no)) || 1);
  const taskRoot = path.join(workDir, taskDirName(task.task_id));
  return {
    attemptNo,
    taskRoot,
    attemptDir: path.join(taskRoot, `attempt-${pad(attemptNo, 3)}`),
    zipPath: path.join(taskRoot, `attempt-${pad(attemptNo, 3)}.zip`),
  };
}

function envObject(v: unknown, field: string): Record<string, string> {
  if (v === undefined || v === null) return {};
  if (!isJsonObject(v)) throw new Error(`${field} must be an object`);
  return Object.fromEntries(
    Object.entries(v).map(([k, val]) => [k, typeof val === "string" ? val : JSON.stringify(val)]),
  );
}

/** base < payload.env < phase env < the Runner's LOOM_* values, which a task cannot override. */
function buildEnv(
  opts: ExecuteOptions,
  payload: Record<string, unknown>,
  runtime: Record<string, string>,
  spec?: Record<string, unknown>,
): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...(opts.baseEnv ?? process.env) };
  for (const k of [...DEFAULT_SCRUBBED_ENV, ...(opts.scrubEnv ?? []), ...RUNTIME_ENV_KEYS]) delete env[k];
  Object.assign(env, envObject(payload.env, "payload.env"));
  if (spec) Object.assign(env, envObject(spec.env, `phase ${String(spec.name)} env`));
  Object.assign(env, runtime);
  return env;
}

function runtimeEnv(task: ClaimedTask, attemptNo: number, workerId: string): Record<string, string> {
  const payload = isJsonObject(task.payload) ? task.payload : {};
  const normalized = isJsonObject(payload.normalized) ? payload.normalized : {};
  const s = (...vs: unknown[]) => String(vs.find((v) => v !== undefined && v !== null && v !== "") ?? "");
  return {
    LOOM_TASK_ID: task.task_id,
    LOOM_ATTEMPT_NO: String(attemptNo),
    LOOM_WORKER_ID: workerId,
    LOOM_CAMPAIGN_ID: s(normalized.campaign_id),
    LOOM_CASE_ID: s(task.case_id, normalized.case_id),
    LOOM_RUN_ID: s(task.run_id, normalized.run_id),
    LOOM_SETTING_ID: s(task.setting_id, normalized.setting_id),
    LOOM_TASK_KIND: s(task.task_kind),
  };
}

function shellQuote(s: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`;
}

/** A command plus its `args`: appended shell-quoted to a string command, or to a list. */
export function commandWithArgs(spec: Record<string, unknown>): string | string[] | undefined {
  const command = spec.command;
  const args = spec.args ?? [];
  if (!Array.isArray(args)) throw new Error(`args of ${String(spec.name)} must be a list`);
  const rendered = args.map(String);
  if (typeof command === "string")
    return command.trim() === "" ? undefined : [command, ...rendered.map(shellQuote)].join(" ");
  if (Array.isArray(command) && command.length) return [...command.map(String), ...rendered];
  if (command === undefined || command === null || (Array.isArray(command) && !command.length)) return undefined;
  throw new Error(`command of ${String(spec.name)} must be a string or a list`);
}

/** payload.phases (ordered), else payload.commands, else payload.command; each gets a name and an index. */
export function commandList(payload: Record<string, unknown>): Record<string, unknown>[] {
  const isPhases = payload.phases !== undefined && payload.phases !== null;
  let raw: unknown = isPhases
    ? payload.phases
    : (payload.commands ?? (payload.command !== undefined ? [payload.command] : []));
  if (typeof raw === "string") raw = [raw];
  if (!Array.isArray(raw)) throw new Error(`payload.${isPhases ? "phases" : "commands"} must be a list`);
  return raw.map((item, i) => {
    const spec: Record<string, unknown> = isJsonObject(item) ? { ...item } : { command: item };
    const idx = i + 1;
    spec.name = String(spec.name ?? `command-${pad(idx, 2)}`);
    spec.phase = String(spec.phase ?? spec.name);
    spec.phase_index = Number(spec.phase_index ?? idx);
    return spec;
  });
}

function insideRelative(rel: string, what: string): string {
  if (path.isAbsolute(rel) || rel.split(/[\\/]/).includes(".."))
    throw new Error(`${what} must be relative and stay inside the workspace: ${rel}`);
  return rel;
}

const fileSafe = (name: string) => name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 80) || "command";

export interface PhaseResult {
  name: string;
  command: string | string[];
  exit_code: number;
  stdout_path: string;
  stderr_path: string;
  resource_usage: ResourceUsage;
  cwd: string;
  phase: string;
  phase_index: number;
  timeout_seconds: number;
  timed_out: boolean;
  started_at: string;
  finished_at: string;
}

export interface ArtifactEntry {
  path: string;
  bytes: number;
  sha256: string;
}

// --- artifacts ----------------------------------------------------------------

const hasMagic = (p: string) => /[*?[]/.test(p);

function globToRegExp(pattern: string): RegExp {
  let re = "";
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === "*") {
      if (pattern[i + 1] === "*") {
        const slash = pattern[i + 2] === "/";
        re += slash ? "(?:.*/)?" : ".*";
        i += slash ? 2 : 1;
      } else re += "[^/]*";
    } else if (c === "?") re += "[^/]";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 1);
      if (end < 0) re += "\\[";
      else {
        const body = pattern
          .slice(i + 1, end)
          .replace(/^!/, "^")
          .replace(/\\/g, "\\\\");
        re += `[${body}]`;
        i = end;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, "\\$&");
  }
  return new RegExp(`^${re}$`);
}

async function walkFiles(dir: string, rel = ""): Promise<string[]> {
  const out: string[] = [];
  let entries;
  try {
    entries = await readdir(path.join(dir, rel), { withFileTypes: true });
  } catch {
    return out;
  }
  for (const e of entries) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (e.name !== ".git") out.push(...(await walkFiles(dir, r)));
    } else if (e.isFile() || e.isSymbolicLink()) out.push(r);
  }
  return out;
}

async function sha256File(p: string): Promise<string> {
  const h = createHash("sha256");
  await pipeline(createReadStream(p), h);
  return h.digest("hex");
}

/** Copies files matched by the patterns (relative to the workspace) into attempt/artifacts/. */
export async function collectArtifacts(
  workspace: string,
  attemptDir: string,
  patterns: string[],
): Promise<ArtifactEntry[]> {
  const root = await realpath(workspace);
  const matched: string[] = [];
  for (const raw of patterns) {
    const pattern = insideRelative(raw.replace(/^\.\//, ""), "artifact path");
    if (hasMagic(pattern)) {
      const segs = pattern.split("/");
      const firstMagic = segs.findIndex(hasMagic);
      const base = segs.slice(0, firstMagic).join("/");
      const re = globToRegExp(pattern);
      const files = await walkFiles(workspace, base);
      // A pattern can match a directory as well as files: take every file under a matched directory.
      const dirs = new Set<string>();
      for (const f of files) {
        const parts = f.split("/");
        for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
      }
      const dirHits = [...dirs].filter((d) => re.test(d));
      matched.push(...files.filter((f) => re.test(f) || dirHits.some((d) => f.startsWith(d + "/"))).sort());
    } else {
      const st = await stat(path.join(workspace, pattern)).catch(() => null);
      if (st?.isDirectory()) matched.push(...(await walkFiles(workspace, pattern)).sort());
      else if (st?.isFile()) matched.push(pattern);
    }
  }
  const out: ArtifactEntry[] = [];
  const seen = new Set<string>();
  for (const rel of matched) {
    const abs = path.join(workspace, rel);
    const real = await realpath(abs).catch(() => null);
    // A symlink must not smuggle a file from outside the workspace into the result.
    if (!real || !(real === root || real.startsWith(root + path.sep)) || seen.has(real)) continue;
    if (!(await lstat(real)).isFile()) continue;
    seen.add(real);
    const dest = path.join(attemptDir, "artifacts", rel);
    await mkdir(path.dirname(dest), { recursive: true });
    await copyFile(real, dest);
    const st = await stat(dest);
    out.push({ path: rel, bytes: st.size, sha256: await sha256File(dest) });
  }
  return out;
}

// --- runners ------------------------------------------------------------------

interface RunOutcome {
  exitCode: number;
  usage: ResourceUsage[];
  timedOut: boolean;
  stopped?: string;
}

const json = (v: unknown) => JSON.stringify(v, null, 2) + "\n";

async function runShell(ctx: RunContext): Promise<RunOutcome> {
  const command = commandWithArgs({ name: "shell", command: ctx.payload.command, args: ctx.payload.args });
  if (command === undefined) throw new Error("shell runner needs payload.command");
  const o = await runProcess({
    command,
    cwd: ctx.attemptDir,
    env: buildEnv(ctx.opts, ctx.payload, ctx.runtime),
    timeoutSeconds: ctx.timeoutSeconds,
    stdoutPath: path.join(ctx.attemptDir, "stdout.txt"),
    stderrPath: path.join(ctx.attemptDir, "stderr.txt"),
    signal: ctx.opts.signal,
    killGraceMs: ctx.opts.killGraceMs,
  });
  return { exitCode: o.exitCode, usage: [o.usage], timedOut: o.timedOut, stopped: o.aborted ?? undefined };
}

/** What a repo run says in its stdout.txt (lines) and stderr.txt (errors). */
type RunLog = { lines: string[]; errors: string[] };

/** The task's source, checked out or copied into `workspace`; its summary is written to source-summary.json. */
async function materialize(ctx: RunContext, workspace: string): Promise<SourceSummary> {
  const { attemptDir, payload, opts } = ctx;
  const source = resolveSource(payload);
  const materializeTimeout = Number(payload.materialize_timeout_seconds ?? payload.timeout_seconds ?? 600) || 600;
  let summary: SourceSummary;
  try {
    summary = await materializeSource(source, {
      attemptDir,
      workspace,
      env: buildEnv(opts, payload, ctx.runtime),
      timeoutSeconds: materializeTimeout,
      signal: opts.signal,
      excludePaths: [opts.workDir],
    });
  } catch (e) {
    summary = {
      ok: false,
      type: source.url || source.repo_url ? "git" : "local",
      commit: null,
      steps: [],
      failure: e instanceof Error ? e.message : String(e),
    };
  }
  await writeFile(path.join(attemptDir, "source-summary.json"), json(summary));
  return summary;
}

/** Run one phase (the i-th command) in the workspace, its output in NN-name.std{out,err}.txt. */
async function runPhase(
  ctx: RunContext,
  workspace: string,
  spec: Record<string, unknown>,
  command: NonNullable<ReturnType<typeof commandWithArgs>>,
  i: number,
): Promise<{ result: PhaseResult; aborted?: string | null }> {
  const { attemptDir, payload, opts } = ctx;
  const relCwd = insideRelative(String(spec.cwd ?? "."), `cwd of phase ${String(spec.name)}`);
  const timeout =
    Number(spec.timeout_seconds ?? payload.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS) || DEFAULT_TIMEOUT_SECONDS;
  const name = `${pad(i + 1, 2)}-${String(spec.name)}`;
  const stdoutPath = `${fileSafe(name)}.stdout.txt`;
  const stderrPath = `${fileSafe(name)}.stderr.txt`;
  const o = await runProcess({
    command,
    cwd: path.join(workspace, relCwd),
    env: {
      ...buildEnv(opts, payload, ctx.runtime, spec),
      LOOM_PHASE_NAME: String(spec.phase),
      LOOM_PHASE_INDEX: String(spec.phase_index),
    },
    timeoutSeconds: timeout,
    stdoutPath: path.join(attemptDir, stdoutPath),
    stderrPath: path.join(attemptDir, stderrPath),
    signal: opts.signal,
    killGraceMs: opts.killGraceMs,
  });
  const result: PhaseResult = {
    name,
    command,
    exit_code: o.exitCode,
    stdout_path: stdoutPath,
    stderr_path: stderrPath,
    resource_usage: o.usage,
    cwd: relCwd,
    phase: String(spec.phase),
    phase_index: Number(spec.phase_index),
    timeout_seconds: timeout,
    timed_out: o.timedOut,
    started_at: o.startedAt,
    finished_at: o.finishedAt,
  };
  return { result, aborted: o.aborted };
}

/** Run the phases in order until one fails (unless it may continue) or the run is stopped; phase-results.json lists them. */
async function runPhases(
  task: ClaimedTask,
  ctx: RunContext,
  workspace: string,
  specs: ReturnType<typeof commandList>,
  log: RunLog,
): Promise<RunOutcome> {
  const phases: PhaseResult[] = [];
  const out: RunOutcome = { exitCode: 0, usage: [], timedOut: false };
  for (const [i, spec] of specs.entries()) {
    const command = commandWithArgs(spec);
    if (command === undefined) continue;
    const { result: r, aborted } = await runPhase(ctx, workspace, spec, command, i);
    phases.push(r);
    out.usage.push(r.resource_usage);
    out.timedOut ||= r.timed_out;
    log.lines.push(
      `phase ${r.name}: exit ${r.exit_code}${r.timed_out ? " (timeout)" : ""} in ${r.resource_usage.duration_seconds}s`,
    );
    if (aborted) {
      out.stopped = aborted;
      out.exitCode = r.exit_code;
      break;
    }
    if (r.exit_code !== 0) {
      out.exitCode = r.exit_code;
      log.errors.push(`phase ${r.name} exited ${r.exit_code}; see ${r.stderr_path}`);
      const cont =
        spec.continue_on_error !== undefined ? Boolean(spec.continue_on_error) : Boolean(ctx.payload.continue_on_error);
      if (!cont) break;
    }
  }
  await writeFile(
    path.join(ctx.attemptDir, "phase-results.json"),
    json({ schema_version: 1, task_id: task.task_id, attempt_no: ctx.attemptNo, phases }),
  );
  return out;
}

/** A repo task: materialise its source, run its phases, collect its artifacts, and write what happened. */
async function runRepo(task: ClaimedTask, ctx: RunContext): Promise<RunOutcome> {
  const { attemptDir, payload } = ctx;
  const workspace = path.join(attemptDir, "workspace");
  const summary = await materialize(ctx, workspace);
  const usage = summary.steps.map((s) => s.resource_usage);
  const log: RunLog = {
    lines: [
      `source: ${summary.type} ${summary.url ?? summary.path ?? ""}${summary.ref ? ` ref ${summary.ref}` : ""} ${summary.ok ? "ready" : `failed (${summary.failure ?? "see steps"})`}`,
    ],
    errors: summary.ok ? [] : [`source materialisation failed: ${summary.failure ?? "see materialize-* logs"}`],
  };
  const specs = commandList(payload);
  const run = await runPhases(task, ctx, workspace, summary.ok ? specs : [], log);
  let exitCode = summary.ok ? run.exitCode : 2;
  usage.push(...run.usage);
  const patterns = [
    payload.artifact_paths ?? payload.artifacts ?? [],
    ...specs.map((s) => s.artifact_paths ?? []),
  ].flatMap((p) => (Array.isArray(p) ? p.map(String) : [String(p)]));
  let artifacts: ArtifactEntry[] = [];
  if (summary.ok) {
    try {
      artifacts = await collectArtifacts(workspace, attemptDir, patterns);
    } catch (e) {
      log.errors.push(`artifact collection failed: ${e instanceof Error ? e.message : String(e)}`);
      if (exitCode === 0) exitCode = 2;
    }
  }
  await writeFile(path.join(attemptDir, "artifact-manifest.json"), json({ schema_version: 1, artifacts }));
  log.lines.push(`artifacts: ${artifacts.length}`, `exit_code: ${exitCode}`);
  // A short text summary: v1 put JSON with commit and sha256 hashes here, whose digits the
  // Hub's issue classifier (it scans *stdout.txt for "401", "429"...) then misread.
  await writeFile(path.join(attemptDir, "stdout.txt"), log.lines.join("\n") + "\n");
  await writeFile(path.join(attemptDir, "stderr.txt"), log.errors.length ? log.errors.join("\n") + "\n" : "");
  return { exitCode, usage, timedOut: run.timedOut, stopped: run.stopped };
}

interface RunContext {
  opts: ExecuteOptions;
  payload: Record<string, unknown>;
  attemptDir: string;
  attemptNo: number;
  runtime: Record<string, string>;
  timeoutSeconds: number;
}

async function filesUnder(dir: string, rel = ""): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(path.join(dir, rel), { withFileTypes: true })) {
    const r = rel ? `${rel}/${e.name}` : e.name;
    if (e.isDirectory()) {
      if (r !== "workspace") out.push(...(await filesUnder(dir, r)));
    } else if (e.isFile()) out.push(r);
  }
  return out;
}

/** Run the attempt with its payload's runner; what it throws is exit code 2 with the error in stderr.txt. */
async function runAttempt(runner: string, task: ClaimedTask, ctx: RunContext): Promise<RunOutcome> {
  const { opts, attemptDir } = ctx;
  try {
    if (opts.signal?.aborted)
      return {
        exitCode: STOPPED_EXIT_CODE,
        usage: [],
        timedOut: false,
        stopped: String(opts.signal.reason ?? "aborted"),
      };
    if (runner === "noop") {
      await writeFile(path.join(attemptDir, "stdout.txt"), "noop ok\n");
      return { exitCode: 0, usage: [], timedOut: false };
    }
    if (runner === "shell") return await runShell(ctx);
    if (runner === "repo") return await runRepo(task, ctx);
    await writeFile(path.join(attemptDir, "stderr.txt"), `unsupported runner: ${runner}\n`);
    return { exitCode: 2, usage: [], timedOut: false };
  } catch (e) {
    await appendFile(
      path.join(attemptDir, "stderr.txt"),
      `${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}\n`,
    );
    return { exitCode: 2, usage: [], timedOut: false };
  }
}

/** Runs the task and writes <work>/<task>/attempt-NNN.zip. Never throws for a failing task: that is exit_code. */
export async function executeTask(task: ClaimedTask, opts: ExecuteOptions): Promise<ExecutionOutcome> {
  if (!task || typeof task.task_id !== "string" || task.task_id === "") throw new Error("task.task_id is required");
  const { attemptNo, taskRoot, attemptDir, zipPath } = attemptPaths(opts.workDir, task);
  // A retry must never inherit the logs, artifacts or workspace of an earlier run of the same attempt.
  await rm(attemptDir, { recursive: true, force: true });
  await mkdir(attemptDir, { recursive: true });
  await writeFile(path.join(attemptDir, "task.json"), json(task));
  await writeFile(path.join(attemptDir, "stdout.txt"), "");
  await writeFile(path.join(attemptDir, "stderr.txt"), "");

  const payload = isJsonObject(task.payload) ? task.payload : {};
  const runner = typeof payload.runner === "string" && payload.runner !== "" ? payload.runner : "noop";
  const ctx: RunContext = {
    opts,
    payload,
    attemptDir,
    attemptNo,
    runtime: runtimeEnv(task, attemptNo, opts.workerId),
    timeoutSeconds: Number(payload.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS) || DEFAULT_TIMEOUT_SECONDS,
  };
  const startedAt = utcNow();
  const t0 = performance.now();
  const outcome = await runAttempt(runner, task, ctx);
  const finishedAt = utcNow();
  const host = await hostSnapshot(opts.workDir);
  const cc = isJsonObject(task.controller_concurrency) ? task.controller_concurrency : {};
  const admission = isJsonObject(cc.resource_admission)
    ? cc.resource_admission
    : isJsonObject(task.resource_admission)
      ? task.resource_admission
      : {};
  const result: WorkerResult = {
    task_id: task.task_id,
    attempt_no: attemptNo,
    worker_id: opts.workerId,
    exit_code: outcome.exitCode,
    verdict: outcome.exitCode === 0 ? "clean" : "run_error",
    runner,
    started_at: startedAt,
    finished_at: finishedAt,
    completed_at: finishedAt,
    resource_usage: aggregateUsage(outcome.usage, (performance.now() - t0) / 1000),
    controller_concurrency: cc,
    resource_admission: admission,
    resource_capacity: host.resources,
    hostname: host.hostname,
    platform: host.platform,
    stdout_path: "stdout.txt",
    stderr_path: "stderr.txt",
  };
  if (runner === "repo") result.phase_result_path = "phase-results.json";
  if (isJsonObject(payload.normalized)) result.normalized = payload.normalized;
  if (outcome.timedOut) result.timed_out = true;
  if (outcome.stopped) result.stopped = outcome.stopped;
  await writeFile(path.join(attemptDir, "worker-result.json"), json(result));

  // worker-result.json goes first: the Hub scores the *first* entry ending in worker-result.json,
  // and an artifact could carry the same file name.
  const first = ["task.json", "worker-result.json", "stdout.txt", "stderr.txt"];
  const rest = (await filesUnder(attemptDir)).filter((f) => !first.includes(f)).sort();
  const entries: ZipEntryInput[] = [...first, ...rest].map((name) => ({ name, path: path.join(attemptDir, name) }));
  await mkdir(taskRoot, { recursive: true });
  const zipBytes = await writeZipFile(entries, zipPath);
  return { zipPath, zipBytes, attemptDir, result };
}
