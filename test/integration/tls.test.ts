// TLS end to end in-process: a Hub with --tls-self-signed, the Runner's and the CLI's clients
// trusting its CA (and failing without it), and the certificate kept or remade as needed.
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Client, resolveConnection } from "../../src/cli/client.ts";
import { resolveConfig } from "../../src/runner/command.ts";
import { HubClient } from "../../src/runner/client.ts";
import { covers, ensureSelfSigned } from "../../src/tls/certs.ts";
import { registerBody, startHub, type TestHub } from "../support/hub.ts";

const TOKEN = "tls-token-0123456789abcdef";
let h: TestHub | undefined;
afterAll(async () => {
  await h?.close();
});

describe("a Hub with --tls-self-signed", () => {
  it("serves HTTPS that the Runner and CLI clients trust only with its CA", async () => {
    h = await startHub({ tlsSelfSigned: true, env: { LOOM_HUB_TOKEN: TOKEN } });
    expect(h.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const caFile = join(h.dir, "tls", "hub.crt");
    const ca = readFileSync(caFile);
    expect(covers(ca, ["127.0.0.1", "localhost"])).toBe(true);

    const reg = await new HubClient({ baseUrl: h.url, token: TOKEN, ca }).register(registerBody("tls-runner") as never);
    expect(reg.worker_id).toBe("tls-runner");
    await expect(
      new HubClient({ baseUrl: h.url, token: TOKEN }).register(registerBody("x") as never),
    ).rejects.toMatchObject({ status: 0, body: { error: "network_error" } });

    const cli = new Client(resolveConnection(h.url, { LOOM_HUB_TOKEN: TOKEN, LOOM_CA_FILE: caFile }));
    const list = await cli.get<{ items: { metadata: { name: string } }[] }>("/apis/loom.dev/v1alpha1/workers");
    expect(list.items.map((w) => w.metadata.name)).toEqual(["tls-runner"]);
    await expect(
      new Client(resolveConnection(h.url, { LOOM_HUB_TOKEN: TOKEN })).get("/apis/loom.dev/v1alpha1/workers"),
    ).rejects.toThrow(/SELF_SIGNED_CERT/);

    // The Runner's flags: --certificate-authority, else LOOM_CA_FILE; a bad file names its source.
    const base = {
      capability: [],
      maxConcurrency: "1",
      concurrencyPolicy: "fixed",
      leaseSeconds: "60",
      connectionMode: "long-poll",
      authTokenEnv: "LOOM_HUB_TOKEN",
      directApiTokenEnv: "LOOM_RUNNER_TOKEN",
      serveHost: "127.0.0.1",
      servePort: "8766",
      scrubEnv: [],
      shutdownGraceSeconds: "30",
      workerId: "w",
      controller: h.url,
    } as never;
    expect(resolveConfig(base, { LOOM_CA_FILE: caFile }).ca?.equals(ca)).toBe(true);
    expect(() => resolveConfig({ ...(base as object), certificateAuthority: "/nope.pem" } as never, {})).toThrow(
      "--certificate-authority: /nope.pem: ENOENT",
    );
  });

  it("keeps a certificate that still fits and remakes one that does not name the host", async () => {
    const dir = await mkdtemp(join(tmpdir(), "loom-certs-"));
    try {
      const first = ensureSelfSigned(dir, "127.0.0.1");
      expect(first.created).toBe(true);
      const pem = readFileSync(first.certFile, "utf8");
      expect(ensureSelfSigned(dir, "127.0.0.1").created).toBe(false);
      expect(readFileSync(first.certFile, "utf8")).toBe(pem);
      const other = ensureSelfSigned(dir, "127.0.0.2");
      expect(other.created).toBe(true);
      expect(covers(readFileSync(other.certFile), ["127.0.0.2"])).toBe(true);
      expect(covers(pem, ["127.0.0.2"])).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
