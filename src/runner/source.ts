// Materialising a repo task's source into its workspace: a git URL at a commit or ref,
// or a local directory copied. The summary is written to source-summary.json.
import { execFile } from "node:child_process";
import { chmod, cp, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { runProcess, type ProcessOutcome } from "./process.ts";

const execFileP = promisify(execFile);

export interface SourceStep {
  name: string;
  command: string[];
  exit_code: number;
  stdout_path: string;
  stderr_path: string;
  resource_usage: ProcessOutcome["usage"];
}

export interface SourceSummary {
  ok: boolean;
  type: "git" | "local";
  url?: string;
  path?: string;
  ref?: string | null;
  commit: string | null;
  requested_commit?: string | null;
  token_env?: string | null;
  ignored?: string[];
  steps: SourceStep[];
  failure?: string;
}

export interface MaterializeContext {
  attemptDir: string;
  workspace: string;
  env: NodeJS.ProcessEnv;
  timeoutSeconds: number;
  signal?: AbortSignal;
  /** Never copied into a workspace (the Runner's own work dir may sit inside a local source). */
  excludePaths?: string[];
}

const DEFAULT_LOCAL_IGNORES = [
  ".git",
  "__pycache__",
  ".mypy_cache",
  ".pytest_cache",
  ".ruff_cache",
  "loom-runs",
  ".loom",
];
const HEX_COMMIT = /^[0-9a-f]{7,64}$/i;
const TRANSIENT_GIT =
  /(http2 framing|connection reset|connection timed out|could not resolve host|remote end hung up unexpectedly|rpc failed|early eof|tls connection|ssl connection|network is unreachable)/i;

const str = (v: unknown) => (typeof v === "string" && v.trim() !== "" ? v.trim() : undefined);

/** Credentials in a URL never reach a log or a summary. */
export function redactUrl(text: string): string {
  return text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^/\s@]+@/gi, "$1***@");
}

/** The source object of a repo payload: `source`, else `source_descriptor`, else v1's top-level repo_url/ref. */
export function resolveSource(payload: Record<string, unknown>): Record<string, unknown> {
  const obj = (v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  const s = obj(payload.source) ?? obj(payload.source_descriptor);
  if (s && Object.keys(s).length) return s;
  if (str(payload.source)) return { path: payload.source };
  if (payload.repo_url || payload.ref) return { type: "git", url: payload.repo_url, ref: payload.ref };
  throw new Error("repo runner needs payload.source or payload.source_descriptor");
}

export async function materializeSource(
  source: Record<string, unknown>,
  ctx: MaterializeContext,
): Promise<SourceSummary> {
  await rm(ctx.workspace, { recursive: true, force: true });
  const url = str(source.url) ?? str(source.repo_url) ?? str(source.canonical_url);
  const localPath = str(source.path) ?? str(source.local_path);
  const type = str(source.type) ?? (url ? "git" : "local");
  if (type === "git" || type === "repo") {
    if (!url) throw new Error("git source needs url");
    return materializeGit(source, url, ctx);
  }
  if (type === "local" || type === "path") {
    if (!localPath) throw new Error("local source needs path");
    return materializeLocal(source, localPath, ctx);
  }
  throw new Error(`unsupported source type: ${type}`);
}

async function gitAskpass(
  source: Record<string, unknown>,
): Promise<{ env: NodeJS.ProcessEnv; cleanup: () => Promise<void> } | undefined> {
  const tokenEnv = str(source.token_env);
  const token = tokenEnv ? process.env[tokenEnv] : undefined;
  if (!token) return undefined;
  // The token stays in the environment of git alone; the script only echoes it on request.
  const dir = await mkdtemp(path.join(os.tmpdir(), "loom-askpass-"));
  const script = path.join(dir, "askpass.sh");
  await writeFile(
    script,
    `#!/bin/sh\ncase "$1" in\n  *Username*) printf '%s\\n' "$LOOM_GIT_USERNAME" ;;\n  *) printf '%s\\n' "$LOOM_GIT_TOKEN" ;;\nesac\n`,
    { mode: 0o700 },
  );
  await chmod(script, 0o700);
  return {
    env: { GIT_ASKPASS: script, LOOM_GIT_USERNAME: str(source.username) ?? "x-access-token", LOOM_GIT_TOKEN: token },
    cleanup: () => rm(dir, { recursive: true, force: true }),
  };
}

async function materializeGit(
  source: Record<string, unknown>,
  url: string,
  ctx: MaterializeContext,
): Promise<SourceSummary> {
  const commit = str(source.resolved_commit) ?? str(source.commit);
  const ref = str(source.ref);
  const target = commit ?? ref;
  const depth = typeof source.depth === "number" && source.depth > 0 ? Math.trunc(source.depth) : undefined;
  const steps: SourceStep[] = [];
  const summary: SourceSummary = {
    ok: false,
    type: "git",
    url: redactUrl(url),
    ref: ref ?? null,
    commit: null,
    requested_commit: commit ?? null,
    token_env: str(source.token_env) ?? null,
    steps,
  };
  const askpass = await gitAskpass(source);
  const env = { ...ctx.env, GIT_TERMINAL_PROMPT: "0", ...askpass?.env };
  const step = async (name: string, args: string[], cwd: string) => {
    const stdoutPath = `${name}.stdout.txt`;
    const stderrPath = `${name}.stderr.txt`;
    const o = await runProcess({
      command: ["git", ...args],
      cwd,
      env,
      timeoutSeconds: ctx.timeoutSeconds,
      stdoutPath: path.join(ctx.attemptDir, stdoutPath),
      stderrPath: path.join(ctx.attemptDir, stderrPath),
      signal: ctx.signal,
    });
    steps.push({
      name,
      command: ["git", ...args].map(redactUrl),
      exit_code: o.exitCode,
      stdout_path: stdoutPath,
      stderr_path: stderrPath,
      resource_usage: o.usage,
    });
    return o;
  };
  try {
    // A branch or tag name can be cloned directly (and shallowly); a commit needs a full clone and a checkout.
    const byBranch = ref && !commit && !HEX_COMMIT.test(ref);
    const cloneArgs = [
      "clone",
      ...(depth && !commit ? ["--depth", String(depth)] : []),
      ...(byBranch ? ["--branch", ref] : []),
      "--",
      url,
      ctx.workspace,
    ];
    let clone = await step("materialize-git-clone", cloneArgs, ctx.attemptDir);
    for (
      let attempt = 2;
      clone.exitCode !== 0 && attempt <= 3 && (await isTransient(ctx.attemptDir, steps.at(-1)!));
      attempt++
    ) {
      await rm(ctx.workspace, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, attempt * 1000));
      clone = await step(`materialize-git-clone-retry-${attempt}`, cloneArgs, ctx.attemptDir);
    }
    let checkoutNeeded = Boolean(target) && !byBranch;
    if (clone.exitCode !== 0 && byBranch) {
      // Not a branch or tag name after all (e.g. refs/pull/1/head): clone everything and check it out.
      await rm(ctx.workspace, { recursive: true, force: true });
      clone = await step("materialize-git-clone-fallback", ["clone", "--", url, ctx.workspace], ctx.attemptDir);
      checkoutNeeded = true;
    }
    if (clone.exitCode !== 0) return { ...summary, failure: "git_clone_failed" };
    if (checkoutNeeded && target) {
      const co = await step(
        "materialize-git-checkout",
        ["-c", "advice.detachedHead=false", "checkout", "--quiet", target],
        ctx.workspace,
      );
      if (co.exitCode !== 0) return { ...summary, failure: "git_checkout_failed" };
    }
    // Read in memory, not logged: a hash in a *stdout.txt would feed the issue classifier digits.
    summary.commit = await gitHead(ctx.workspace, env);
    if (commit && (!summary.commit || !summary.commit.toLowerCase().startsWith(commit.toLowerCase()))) {
      return { ...summary, failure: "git_commit_mismatch" };
    }
    return { ...summary, ok: summary.commit !== null };
  } finally {
    await askpass?.cleanup();
  }
}

async function isTransient(attemptDir: string, s: SourceStep): Promise<boolean> {
  const text = await readFile(path.join(attemptDir, s.stderr_path), "utf8").catch(() => "");
  return TRANSIENT_GIT.test(text);
}

async function gitHead(dir: string, env: NodeJS.ProcessEnv = process.env): Promise<string | null> {
  try {
    const { stdout } = await execFileP("git", ["rev-parse", "HEAD"], { cwd: dir, env, timeout: 30_000 });
    return stdout.trim() || null;
  } catch {
    return null;
  }
}

async function materializeLocal(
  source: Record<string, unknown>,
  rawPath: string,
  ctx: MaterializeContext,
): Promise<SourceSummary> {
  const src = path.resolve(rawPath.startsWith("~/") ? path.join(os.homedir(), rawPath.slice(2)) : rawPath);
  const st = await stat(src).catch(() => null);
  if (!st?.isDirectory()) throw new Error(`local source is not a directory: ${src}`);
  const extra = Array.isArray(source.ignore) ? source.ignore.map(String) : [];
  const ignored = [...new Set([...DEFAULT_LOCAL_IGNORES, ...extra])].sort();
  const excluded = (ctx.excludePaths ?? []).map((p) => path.resolve(p));
  await cp(src, ctx.workspace, {
    recursive: true,
    verbatimSymlinks: true, // copy links as links, never what they point at
    filter: (p) => {
      if (p === src) return true;
      if (ignored.includes(path.basename(p))) return false;
      const abs = path.resolve(p);
      return !excluded.some((x) => abs === x || abs.startsWith(x + path.sep));
    },
  });
  return { ok: true, type: "local", path: src, commit: await gitHead(src), ignored, steps: [] };
}
