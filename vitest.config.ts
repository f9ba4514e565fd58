import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Most files spend their time waiting on child processes and loopback I/O, so two run at
    // once even on two cores, where vitest's default is one (this suite: 381 s against 587 s).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // Fails the run when a process a test started outlives the suite.
    globalSetup: ["test/support/no-orphans.ts"],
  },
});
