import { describe, expect, it } from "vitest";
import {
  classifyIssueText,
  inspectResultZip,
  issuesFromError,
  issuesFromZip,
  readZip,
  verdictFromZip,
  writeZip,
  ZipError,
} from "../../src/results/zip.ts";

const entries = (o: Record<string, unknown>) =>
  new Map(Object.entries(o).map(([k, v]) => [k, Buffer.from(typeof v === "string" ? v : JSON.stringify(v))]));

describe("writeZip / readZip", () => {
  it("round-trips names and bytes", async () => {
    const bin = Buffer.from([0, 1, 2, 255, 254]);
    const zip = await writeZip([
      { name: "task.json", data: '{"task_id":"t"}' },
      { name: "artifacts/deep/bin.dat", data: bin },
      { name: "stdout.txt", data: "héllo\n" },
    ]);
    const m = await readZip(zip);
    expect([...m.keys()]).toEqual(["task.json", "artifacts/deep/bin.dat", "stdout.txt"]);
    expect(m.get("artifacts/deep/bin.dat")).toEqual(bin);
    expect(m.get("stdout.txt")!.toString("utf8")).toBe("héllo\n");
  });

  it("refuses to write unsafe names", async () => {
    await expect(writeZip([{ name: "../x", data: "" }])).rejects.toThrow(/unsafe ZIP entry name/);
    await expect(writeZip([{ name: "/etc/x", data: "" }])).rejects.toThrow(/absolute/);
  });

  it("rejects a corrupt ZIP with a clear error", async () => {
    await expect(readZip(Buffer.from("this is not a zip"))).rejects.toThrow(ZipError);
    await expect(readZip(Buffer.from("this is not a zip"))).rejects.toThrow(/corrupt ZIP/);
    const good = await writeZip([{ name: "a.txt", data: "x".repeat(1000) }]);
    await expect(readZip(good.subarray(0, good.length - 30))).rejects.toThrow(/corrupt/);
  });

  it("rejects entry names with .. and absolute paths", async () => {
    // yazl will not write such names, so patch a same-length name in the archive bytes.
    const zip = await writeZip([{ name: "xx/evil.txt", data: "x" }]);
    const dotdot = Buffer.from(zip.toString("latin1").split("xx/evil.txt").join("../evil.txt"), "latin1");
    await expect(readZip(dotdot)).rejects.toThrow(/\.\.\/evil\.txt/);
    const abs = Buffer.from(zip.toString("latin1").split("xx/evil.txt").join("/x/evil.txt"), "latin1");
    await expect(readZip(abs)).rejects.toThrow(/absolute/);
  });

  it("rejects entries larger than the limit", async () => {
    const zip = await writeZip([{ name: "big.bin", data: Buffer.alloc(10_000) }]);
    await expect(readZip(zip, { maxEntryBytes: 1000 })).rejects.toThrow(/big\.bin.*over the limit of 1000/);
    expect((await readZip(zip)).get("big.bin")!.length).toBe(10_000);
  });
});

describe("verdictFromZip (§3 upload verdict)", () => {
  it("uses the first *worker-result.json verdict", () => {
    expect(verdictFromZip(entries({ "worker-result.json": { verdict: "dirty", exit_code: 0 } }))).toBe("dirty");
    expect(
      verdictFromZip(
        entries({ "a/worker-result.json": { verdict: "needs_review" }, "b/worker-result.json": { verdict: "clean" } }),
      ),
    ).toBe("needs_review");
  });
  it("falls back to exit_code: 0 is clean, non-zero is run_error", () => {
    expect(verdictFromZip(entries({ "worker-result.json": { exit_code: 0 } }))).toBe("clean");
    expect(verdictFromZip(entries({ "worker-result.json": {} }))).toBe("clean");
    expect(verdictFromZip(entries({ "worker-result.json": { exit_code: 124 } }))).toBe("run_error");
  });
  it("worker-result wins over score summaries", () => {
    expect(
      verdictFromZip(entries({ "score-summary.json": { fail_count: 3 }, "worker-result.json": { exit_code: 0 } })),
    ).toBe("clean");
  });
  it("uses score-summary.json counts without a worker-result", () => {
    expect(verdictFromZip(entries({ "score-summary.json": { run_error_count: 1, fail_count: 2 } }))).toBe("run_error");
    expect(verdictFromZip(entries({ "score-summary.json": { needs_review_count: 1, fail_count: 2 } }))).toBe(
      "needs_review",
    );
    expect(verdictFromZip(entries({ "score-summary.json": { fail_count: 2 } }))).toBe("dirty");
    expect(verdictFromZip(entries({ "score-summary.json": { pass_count: 2 } }))).toBe("clean");
  });
  it("uses case-scheduler-summary.json attempt counts, ahead of score-summary", () => {
    const sched = (attempts: unknown[]) => ({
      "case-scheduler-summary.json": { attempts },
      "score-summary.json": { run_error_count: 9 },
    });
    expect(verdictFromZip(entries(sched([{ pass_count: 1 }, { fail_count: 1 }])))).toBe("dirty");
    expect(verdictFromZip(entries(sched([{ pass_count: 3 }])))).toBe("clean");
    expect(verdictFromZip(entries(sched([{ needs_review_count: 1, fail_count: 1 }])))).toBe("needs_review");
    expect(verdictFromZip(entries(sched([])))).toBe("run_error");
  });
  it("is clean with none of the files", () => {
    expect(verdictFromZip(entries({ "stdout.txt": "whatever" }))).toBe("clean");
  });
  it("is run_error for a corrupt ZIP or unreadable JSON", async () => {
    expect(verdictFromZip(null)).toBe("run_error");
    expect(verdictFromZip(entries({ "worker-result.json": "{not json" }))).toBe("run_error");
    const r = await inspectResultZip(Buffer.from("garbage"));
    expect(r.verdict).toBe("run_error");
    expect(r.error).toMatch(/corrupt ZIP/);
    expect(r.issues).toEqual(["result_import_error"]);
  });
});

describe("issues (§3 categories)", () => {
  const cases: [string, string][] = [
    ["Killed: out of memory", "terminal_resource_insufficient"],
    ["OSError: [Errno 28] No space left on device", "terminal_resource_insufficient"],
    ["container OOMKilled", "terminal_resource_insufficient"],
    ["Error: insufficient credit balance", "token_balance_insufficient"],
    ["402 Payment Required", "token_balance_insufficient"],
    ["HTTP 429 Too Many Requests", "rate_limited"],
    ["rate limit reached", "rate_limited"],
    ["status 401", "auth_failed"],
    ["403 Forbidden", "auth_failed"],
    ["invalid API key", "auth_failed"],
    ["curl: (6) Could not resolve host", "network_unavailable"],
    ["TLS handshake failed", "network_unavailable"],
    ["connection timed out", "network_unavailable"],
  ];
  it.each(cases)("%s -> %s", (text, category) => {
    expect(classifyIssueText(text)).toContain(category);
  });
  it("does not read 'loom' or 'room' as out-of-memory", () => {
    expect(classifyIssueText("cd /srv/loom/runner; no room left for doubt")).toEqual([]);
  });

  it("reads *stdout.txt and *stderr.txt only when the verdict is not clean", () => {
    const z = entries({
      "stdout.txt": "ok",
      "01-build.stderr.txt": "HTTP 429 from api",
      "notes.md": "permission denied",
    });
    expect(issuesFromZip(z, "clean")).toEqual([]);
    expect(issuesFromZip(z, "run_error")).toEqual(["rate_limited"]);
  });
  it("reads only the first 12 000 characters of each file", () => {
    const z = entries({ "stderr.txt": "x".repeat(12_000) + "429", "stdout.txt": "y".repeat(11_990) + "403" });
    expect(issuesFromZip(z, "run_error")).toEqual(["auth_failed"]);
  });
  it("classifies a fail error, defaulting to run_error", () => {
    expect(issuesFromError({ type: "HubError", detail: "network is unreachable" })).toEqual(["network_unavailable"]);
    expect(issuesFromError({ type: "ValueError", detail: "bad payload" })).toEqual(["run_error"]);
    expect(issuesFromError(undefined)).toEqual(["run_error"]);
  });
  it("inspectResultZip scores and classifies an uploaded ZIP", async () => {
    const zip = await writeZip([
      { name: "worker-result.json", data: JSON.stringify({ exit_code: 1 }) },
      { name: "stderr.txt", data: "Too Many Requests" },
    ]);
    const r = await inspectResultZip(zip);
    expect(r).toMatchObject({
      verdict: "run_error",
      issues: ["rate_limited"],
      files: ["worker-result.json", "stderr.txt"],
    });
  });
});
