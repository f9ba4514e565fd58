import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // Fails the run when a process a test started outlives the suite.
    globalSetup: ["test/support/no-orphans.ts"],
  },
});
