// Result ZIPs: the Runner writes them, the Hub reads them and scores them.
// Scoring follows RUNNER_PROTOCOL §3 (verdict rule, issue categories) so a result
// from a v1 Runner and one from `loom runner` are judged the same way.
import { createWriteStream } from "node:fs";
import { crc32 } from "node:zlib";
import { pipeline } from "node:stream/promises";
import yazl from "yazl";
import yauzl from "yauzl";

/** One ZIP entry: bytes in memory, or a file on disk (streamed, so big artifacts stay off the heap). */
export type ZipEntryInput = { name: string; data: Buffer | string } | { name: string; path: string };

export class ZipError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ZipError";
  }
}

function fillZip(entries: ZipEntryInput[]): yazl.ZipFile {
  const zip = new yazl.ZipFile();
  for (const e of entries) {
    assertSafeName(e.name);
    if ("path" in e) zip.addFile(e.path, e.name);
    else zip.addBuffer(typeof e.data === "string" ? Buffer.from(e.data, "utf8") : e.data, e.name);
  }
  zip.end();
  return zip;
}

export async function writeZip(entries: ZipEntryInput[]): Promise<Buffer> {
  const zip = fillZip(entries);
  const chunks: Buffer[] = [];
  for await (const c of zip.outputStream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Writes the ZIP straight to `dest`; returns its size in bytes. */
export async function writeZipFile(entries: ZipEntryInput[], dest: string): Promise<number> {
  const zip = fillZip(entries);
  const out = createWriteStream(dest);
  await pipeline(zip.outputStream, out);
  return out.bytesWritten;
}

export const MAX_ENTRY_BYTES = 256 * 1024 * 1024;

export interface ReadZipOptions {
  /** Largest uncompressed entry accepted (default 256 MiB). */
  maxEntryBytes?: number;
  /** Largest sum of the entries read (default 1 GiB): a result is held in memory whole. */
  maxTotalBytes?: number;
  /** Most entries accepted (default 100 000). */
  maxEntries?: number;
  /** Read only the entries this accepts (the rest are still checked for unsafe names). */
  select?: (name: string) => boolean;
}

function unsafeNameReason(name: string): string | null {
  if (name === "") return "empty name";
  if (name.startsWith("/") || name.startsWith("\\") || /^[A-Za-z]:/.test(name)) return "absolute path";
  if (name.split(/[\\/]/).includes("..")) return "path with ..";
  if (name.includes("\0")) return "NUL in name";
  return null;
}

function assertSafeName(name: string): void {
  const why = unsafeNameReason(name);
  if (why) throw new ZipError(`unsafe ZIP entry name ${JSON.stringify(name)}: ${why}`);
}

/**
 * Reads every file entry into memory. Rejects entries over the size limit, unsafe names
 * (absolute or `..`) and corrupt archives with a ZipError; directory entries are skipped.
 * Duplicate names: the last one wins, as in Python's zipfile, which v1 used.
 */
export async function readZip(buf: Buffer, opts: ReadZipOptions = {}): Promise<Map<string, Buffer>> {
  const maxEntryBytes = opts.maxEntryBytes ?? MAX_ENTRY_BYTES;
  const maxTotalBytes = opts.maxTotalBytes ?? 1024 * 1024 * 1024;
  const maxEntries = opts.maxEntries ?? 100_000;
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(buf, {
      lazyEntries: true,
      decodeStrings: true,
      validateEntrySizes: true,
      strictFileNames: false,
    });
  } catch (e) {
    throw new ZipError(`corrupt ZIP: ${errText(e)}`);
  }
  if (zip.entryCount > maxEntries) {
    zip.close();
    throw new ZipError(`ZIP has ${zip.entryCount} entries, more than the limit of ${maxEntries}`);
  }
  const out = new Map<string, Buffer>();
  let total = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      const name = entry.fileName;
      assertSafeName(name);
      if (name.endsWith("/")) continue;
      if (opts.select && !opts.select(name)) continue;
      if (entry.uncompressedSize > maxEntryBytes) {
        throw new ZipError(
          `ZIP entry ${JSON.stringify(name)} is ${entry.uncompressedSize} bytes uncompressed, over the limit of ${maxEntryBytes}`,
        );
      }
      total += entry.uncompressedSize;
      if (total > maxTotalBytes) throw new ZipError(`ZIP content exceeds the limit of ${maxTotalBytes} bytes`);
      const stream = await zip.openReadStreamPromise(entry);
      const chunks: Buffer[] = [];
      for await (const c of stream) chunks.push(c as Buffer);
      out.set(name, Buffer.concat(chunks));
    }
  } catch (e) {
    if (e instanceof ZipError) throw e;
    // yauzl reports its own name checks ("invalid relative path", "absolute path") and
    // structural damage here; either way the archive is not usable.
    throw new ZipError(`corrupt or unsafe ZIP: ${errText(e)}`);
  } finally {
    zip.close();
  }
  return out;
}

function errText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

// ---------------------------------------------------------------------------
// Scoring (§3)

/** Issue categories drive automatic retry and fixed-policy backoff; one table, first-listed first. */
export const ISSUE_PATTERNS: readonly { category: IssueCategory; pattern: RegExp }[] = [
  {
    category: "terminal_resource_insufficient",
    // v1 matched a bare "oom", which also hits "loom", "room" and "zoom"; a word boundary
    // (plus "OOMKilled"-style joins) keeps the intent without flagging every Loom path.
    pattern:
      /(out of memory|\boom\b|oom.?kill|cannot allocate memory|no space left|disk quota|resource temporarily unavailable|too many open files)/i,
  },
  {
    category: "token_balance_insufficient",
    pattern: /(insufficient.*(credit|balance|quota)|billing|payment required|credits? exhausted)/i,
  },
  { category: "rate_limited", pattern: /(rate.?limit|too many requests|429|quota exceeded|limit exceeded)/i },
  { category: "auth_failed", pattern: /(unauthorized|forbidden|invalid api key|permission denied|401|403)/i },
  {
    category: "network_unavailable",
    pattern: /(connection timed out|temporary failure|network is unreachable|could not resolve|tls|ssl)/i,
  },
];

export type IssueCategory =
  | "terminal_resource_insufficient"
  | "token_balance_insufficient"
  | "rate_limited"
  | "auth_failed"
  | "network_unavailable";

/** How much of each stdout/stderr file the classifier reads (v1: 12 000 characters). */
export const DIAGNOSTIC_CHARS = 12_000;

export function classifyIssueText(text: string): IssueCategory[] {
  return ISSUE_PATTERNS.filter((p) => p.pattern.test(text)).map((p) => p.category);
}

function decodeText(b: Buffer, maxChars = Infinity): string {
  // Enough bytes for maxChars characters of UTF-8; the cut may split a character, which decodes as U+FFFD.
  const slice = Number.isFinite(maxChars) ? b.subarray(0, maxChars * 4) : b;
  let s = slice.toString("utf8");
  if (s.charCodeAt(0) === 0xfeff) s = s.slice(1);
  return Number.isFinite(maxChars) ? s.slice(0, maxChars) : s;
}

function readJson(b: Buffer): Record<string, unknown> {
  const v: unknown = JSON.parse(decodeText(b));
  if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not a JSON object");
  return v as Record<string, unknown>;
}

const byName = (entries: Map<string, Buffer>, suffix: string) => [...entries.keys()].filter((n) => n.endsWith(suffix));

/** Python-style int(): integers and integral strings; anything else throws, and the verdict becomes run_error. */
function toInt(v: unknown): number {
  if (v === null || v === undefined || v === false || v === "" || v === 0) return 0;
  if (v === true) return 1;
  if (typeof v === "number" && Number.isFinite(v)) return Math.trunc(v);
  if (typeof v === "string" && /^\s*[-+]?\d+\s*$/.test(v)) return Number.parseInt(v, 10);
  throw new Error(`not an integer: ${JSON.stringify(v)}`);
}

/**
 * The upload verdict (§3): the first `*worker-result.json` decides (its `verdict`, else
 * exit_code 0 → clean, non-zero → run_error); without it the counts in
 * `case-scheduler-summary.json` or else `score-summary.json` decide; with none of them the
 * verdict is clean. `null` (an unreadable ZIP) and unreadable JSON give run_error.
 * The verdict string of a worker-result is passed through as v1 does.
 */
export function verdictFromZip(entries: Map<string, Buffer> | null | undefined): string {
  if (!entries) return "run_error";
  try {
    const wr = byName(entries, "worker-result.json")[0];
    if (wr !== undefined) {
      const data = readJson(entries.get(wr)!);
      if (data.verdict) return String(data.verdict);
      return toInt(data.exit_code) === 0 ? "clean" : "run_error";
    }
    const sched = byName(entries, "case-scheduler-summary.json").sort()[0];
    if (sched !== undefined) {
      const data = readJson(entries.get(sched)!);
      const c = { pass: 0, fail: 0, needs_review: 0, run_error: 0 };
      const attempts = Array.isArray(data.attempts) ? (data.attempts as Record<string, unknown>[]) : [];
      for (const a of attempts) {
        c.pass += toInt(a?.pass_count);
        c.fail += toInt(a?.fail_count);
        c.needs_review += toInt(a?.needs_review_count);
        c.run_error += toInt(a?.run_error_count);
      }
      if (c.run_error) return "run_error";
      if (c.needs_review) return "needs_review";
      if (c.fail) return "dirty";
      if (c.pass) return "clean";
      return "run_error"; // a scheduler summary that counted nothing means nothing ran (v1 keeps its run_error default)
    }
    const score = byName(entries, "score-summary.json").sort()[0];
    if (score !== undefined) {
      const data = readJson(entries.get(score)!);
      if (toInt(data.run_error_count)) return "run_error";
      if (toInt(data.needs_review_count)) return "needs_review";
      if (toInt(data.fail_count)) return "dirty";
      return "clean";
    }
    return "clean";
  } catch {
    return "run_error";
  }
}

/** Issues from the diagnostics in a result: only for a verdict that is not clean. Sorted, unique. */
export function issuesFromZip(entries: Map<string, Buffer>, verdict: string): IssueCategory[] {
  if (verdict === "clean") return [];
  const names = [...entries.keys()].filter((n) => n.endsWith("stdout.txt") || n.endsWith("stderr.txt")).sort();
  const text = names.map((n) => "\n" + decodeText(entries.get(n)!, DIAGNOSTIC_CHARS)).join("");
  return [...new Set(classifyIssueText(text))].sort();
}

/** Issues from a `/api/tasks/fail` error object; `run_error` when nothing matches. */
export function issuesFromError(errorJson: unknown): string[] {
  const found = classifyIssueText(JSON.stringify(errorJson ?? null) ?? "");
  return found.length ? [...new Set(found)].sort() : ["run_error"];
}

export interface ResultInspection {
  verdict: string;
  issues: string[];
  /** Entry names in archive order (at most 200, as v1 keeps). */
  files: string[];
  /** Set when the ZIP could not be read. */
  error?: string;
  entries: Map<string, Buffer> | null;
}

/** Bounds on reading an uploaded result: it is inflated as a stream, never held whole. */
export type InspectLimits = {
  /** Most bytes all entries may inflate to together. */
  maxTotalBytes: number;
  /** Most bytes all entries may inflate to per byte of the archive (a ZIP bomb's ratio is in the thousands). */
  maxRatio: number;
  maxEntries: number;
};
export const DEFAULT_INSPECT_LIMITS: InspectLimits = {
  maxTotalBytes: 1024 * 1024 * 1024,
  maxRatio: 200,
  maxEntries: 100_000,
};

/** Entries the scoring reads, and how much of each it keeps. */
const KEEP: { suffix: string; bytes: number }[] = [
  { suffix: "worker-result.json", bytes: 1024 * 1024 },
  { suffix: "case-scheduler-summary.json", bytes: 1024 * 1024 },
  { suffix: "score-summary.json", bytes: 1024 * 1024 },
  { suffix: "stdout.txt", bytes: DIAGNOSTIC_CHARS * 4 },
  { suffix: "stderr.txt", bytes: DIAGNOSTIC_CHARS * 4 },
];

/**
 * Inflate every entry as a stream: the CRC of each is checked, the total is capped both
 * absolutely and relative to the archive's size, and only what scoring reads is kept (JSON
 * summaries, the head of stdout/stderr). Memory stays small whatever the archive claims.
 */
async function inspectEntries(
  zip: yauzl.ZipFile,
  archiveBytes: number,
  lim: InspectLimits,
): Promise<{ kept: Map<string, Buffer>; names: string[] }> {
  const cap = Math.min(lim.maxTotalBytes, Math.max(1024 * 1024, archiveBytes * lim.maxRatio));
  if (zip.entryCount > lim.maxEntries)
    throw new ZipError(`ZIP has ${zip.entryCount} entries, more than the limit of ${lim.maxEntries}`);
  const kept = new Map<string, Buffer>();
  const names: string[] = [];
  let total = 0;
  for await (const entry of zip.eachEntry()) {
    const name = entry.fileName;
    assertSafeName(name);
    if (name.endsWith("/")) continue;
    if (names.length < 200) names.push(name);
    if (total + entry.uncompressedSize > cap)
      throw new ZipError(
        `ZIP inflates to more than ${cap} bytes (limit: ${lim.maxRatio}x the upload, at most ${lim.maxTotalBytes})`,
      );
    const keep = KEEP.find((k) => name.endsWith(k.suffix))?.bytes ?? 0;
    const chunks: Buffer[] = [];
    let held = 0;
    let crc = 0;
    const stream = await zip.openReadStreamPromise(entry);
    for await (const c of stream as AsyncIterable<Buffer>) {
      total += c.length;
      if (total > cap) {
        stream.destroy();
        throw new ZipError(
          `ZIP inflates to more than ${cap} bytes (limit: ${lim.maxRatio}x the upload, at most ${lim.maxTotalBytes})`,
        );
      }
      crc = crc32(c, crc);
      if (held < keep) {
        chunks.push(c.subarray(0, keep - held));
        held += Math.min(c.length, keep - held);
      }
    }
    if (crc >>> 0 !== entry.crc32 >>> 0)
      throw new ZipError(`ZIP entry ${JSON.stringify(name)} fails its CRC check: the archive is damaged`);
    if (keep) kept.set(name, Buffer.concat(chunks));
  }
  return { kept, names };
}

function scored(r: { kept: Map<string, Buffer>; names: string[] }): ResultInspection {
  const verdict = verdictFromZip(r.kept);
  return { verdict, issues: issuesFromZip(r.kept, verdict), files: r.names, entries: r.kept };
}

function unreadable(e: unknown): ResultInspection {
  const error = e instanceof ZipError ? e.message : `corrupt ZIP: ${errText(e)}`;
  const issues = classifyIssueText(error);
  return {
    verdict: "run_error",
    issues: issues.length ? [...new Set(issues)].sort() : ["result_import_error"],
    files: [],
    error,
    entries: null,
  };
}

const OPEN = { lazyEntries: true, decodeStrings: true, validateEntrySizes: true, strictFileNames: false } as const;

async function inspectWith(
  open: () => Promise<yauzl.ZipFile>,
  bytes: number,
  lim: InspectLimits,
): Promise<ResultInspection> {
  let zip: yauzl.ZipFile | undefined;
  try {
    zip = await open();
    return scored(await inspectEntries(zip, bytes, lim));
  } catch (e) {
    return unreadable(e);
  } finally {
    zip?.close();
  }
}

/** Scores a result held in memory; a corrupt, damaged or oversized ZIP scores run_error, not an exception. */
export function inspectResultZip(buf: Buffer, lim: InspectLimits = DEFAULT_INSPECT_LIMITS): Promise<ResultInspection> {
  return inspectWith(() => yauzl.fromBufferPromise(buf, OPEN), buf.length, lim);
}

/** Scores a result file on disk the same way, reading it as a stream. */
export function inspectResultFile(
  path: string,
  bytes: number,
  lim: InspectLimits = DEFAULT_INSPECT_LIMITS,
): Promise<ResultInspection> {
  return inspectWith(() => yauzl.openPromise(path, OPEN), bytes, lim);
}
