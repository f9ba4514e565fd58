import path from "node:path";
import { CommanderError } from "commander";
import { describe, expect, it } from "vitest";
import { FlagError, resolveConfig, runnerCommand } from "../../src/runner/command.ts";
import { renewIntervalSeconds } from "../../src/runner/lifecycle.ts";

const defaults = {
  capability: [] as string[],
  maxConcurrency: "1",
  concurrencyPolicy: "fixed",
  leaseSeconds: "600",
  connectionMode: "ssh-start",
  pollSeconds: "5",
  serveHost: "127.0.0.1",
  servePort: "9876",
  authTokenEnv: "LOOM_HUB_TOKEN",
  directApiTokenEnv: "LOOM_RUNNER_TOKEN",
  shutdownGraceSeconds: "30",
};

describe("resolveConfig", () => {
  it("accepts the v1 Runner's flags: poll, direct-api and --controller-token-env map onto Loom's", () => {
    const poll = resolveConfig({ ...defaults, connectionMode: "poll", controllerTokenEnv: "V1_TOKEN" }, {});
    expect(poll.mode).toBe("prestarted");
    expect(poll.pull.claimWaitSeconds).toBe(0);
    expect(poll.authTokenEnv).toBe("V1_TOKEN");
    expect(poll.pull.scrubEnv).toContain("V1_TOKEN");
    expect(resolveConfig({ ...defaults, connectionMode: "direct-api" }, {}).mode).toBe("direct-worker-api");
    const quiet = resolveConfig({ ...defaults, sourceCacheDir: "/c", sourceCacheMaxMb: "10", failFast: true }, {});
    expect(quiet.ignored).toHaveLength(2);
    expect(resolveConfig(defaults, {}).ignored).toEqual([]);
  });
  it("applies the documented defaults", () => {
    const c = resolveConfig({ ...defaults, workerId: "w1" }, {});
    expect(c.controller).toBe("http://127.0.0.1:8765");
    expect(c.mode).toBe("ssh-start");
    expect(c.pull).toMatchObject({
      capabilities: ["linux", "*"],
      maxConcurrency: 1,
      initialConcurrency: 1,
      leaseSeconds: 600,
      claimWaitSeconds: 0,
      pollSeconds: 5,
      once: false,
      maxTasks: 0,
    });
    expect(c.pull.workDir).toBe(path.resolve(".loom/runner/w1"));
    expect(c.pull.scrubEnv).toEqual(expect.arrayContaining(["LOOM_HUB_TOKEN", "LOOM_RUNNER_TOKEN"]));
  });
  it("takes the controller from LOOM_CONTROLLER, initial concurrency 1 as v1 did, and 25 s waits in long-poll mode", () => {
    const c = resolveConfig(
      { ...defaults, maxConcurrency: "4", connectionMode: "long-poll" },
      { LOOM_CONTROLLER: "http://hub:9000/" },
    );
    expect(c.controller).toBe("http://hub:9000");
    expect(c.pull).toMatchObject({ maxConcurrency: 4, initialConcurrency: 1, claimWaitSeconds: 25 });
    expect(
      resolveConfig({ ...defaults, connectionMode: "long-poll", claimWaitSeconds: "5" }, {}).pull.claimWaitSeconds,
    ).toBe(5);
  });
  it.each([
    [{ maxConcurrency: "0" }, "--max-concurrency"],
    [{ maxConcurrency: "two" }, "--max-concurrency"],
    [{ maxConcurrency: "2", initialConcurrency: "3" }, "--initial-concurrency"],
    [{ concurrencyPolicy: "greedy" }, "--concurrency-policy"],
    [{ connectionMode: "carrier-pigeon" }, "--connection-mode"],
    [{ leaseSeconds: "10" }, "--lease-seconds"],
    [{ claimWaitSeconds: "61" }, "--claim-wait-seconds"],
    [{ pollSeconds: "-1" }, "--poll-seconds"],
    [{ maxTasks: "1.5" }, "--max-tasks"],
    [{ servePort: "70000" }, "--serve-port"],
    [{ controller: "ftp://hub" }, "--controller"],
    [{ controller: "http://user:secret@hub" }, "--controller"],
    [{ resourceCapacityJson: "{nope" }, "--resource-capacity-json"],
    [{ resourceCapacityJson: '{"gpu_types":["a100"]}' }, "--resource-capacity-json"],
    [{ authTokenEnv: "not a name" }, "--auth-token-env"],
    [{ controllerTokenEnv: "not a name" }, "--controller-token-env"],
    [{ sourceCacheMaxMb: "-5" }, "--source-cache-max-mb"],
    [{ connectionMode: "direct-worker-api", serveHost: "0.0.0.0" }, "--serve-host"],
  ])("rejects %j naming %s", (bad, flag) => {
    let err: unknown;
    try {
      resolveConfig({ ...defaults, ...bad }, {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(FlagError);
    expect((err as FlagError).flag).toBe(flag);
    expect((err as Error).message).toContain(flag);
  });
});

describe("--serve-host", () => {
  it("may leave loopback when the Runner token is set", () => {
    const c = resolveConfig(
      { ...defaults, connectionMode: "direct-worker-api", serveHost: "0.0.0.0" },
      { LOOM_RUNNER_TOKEN: "t" },
    );
    expect(c.serveHost).toBe("0.0.0.0");
  });
});

describe("runnerCommand", () => {
  it("exits 2 with a message naming the bad flag", async () => {
    let stderr = "";
    const cmd = runnerCommand().configureOutput({ writeErr: (s) => (stderr += s), writeOut: () => {} });
    const err = await cmd.parseAsync(["--max-concurrency", "zero"], { from: "user" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommanderError);
    expect((err as CommanderError).exitCode).toBe(2);
    expect(stderr).toContain("--max-concurrency");
  });
});

describe("renew interval (§2)", () => {
  it("is max(10, min(120, lease/3)) seconds", () => {
    expect(renewIntervalSeconds(600)).toBe(120);
    expect(renewIntervalSeconds(90)).toBe(30);
    expect(renewIntervalSeconds(30)).toBe(10);
    expect(renewIntervalSeconds(3600)).toBe(120);
  });
});
