// The data-directory lock inside one process: SQLite tracks its record locks per inode, so a
// second Hub in the same process is refused as one in another process is.
import { existsSync, mkdtempSync, rmSync, unlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { DataDirLockedError, lockDataDir } from "../../src/store/dir-lock.ts";

const dir = mkdtempSync(join(tmpdir(), "loom-dirlock-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("lockDataDir", () => {
  it("refuses a second holder in the same process, naming this pid, until the first releases", () => {
    const release = lockDataDir(dir);
    expect(() => lockDataDir(dir)).toThrow(new RegExp(`in use by another loom hub \\(pid ${process.pid}\\)`));
    release();
    expect(existsSync(join(dir, "hub.lock"))).toBe(false);
    const again = lockDataDir(dir);
    again();
    again(); // a second release is harmless
  });

  it("still refuses when the pid file is gone, saying the pid is unknown", () => {
    const release = lockDataDir(dir);
    unlinkSync(join(dir, "hub.lock"));
    let err: unknown;
    try {
      lockDataDir(dir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(DataDirLockedError);
    expect((err as Error).message).toContain("(pid unknown)");
    release();
  });
});
