// The README's "token-protected Hub with kubectl" block, run as written (with `loom` on PATH,
// a free port and a fresh directory): the real kubectl and the CLI both reach the Hub over
// TLS with the embedded CA and the token; without the CA or the token they are refused.
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";

const KUBECTL = "/usr/bin/kubectl";
const HAVE_KUBECTL = existsSync(KUBECTL) && existsSync("/usr/bin/openssl");
const ROOT = join(import.meta.dirname, "..", "..");
const freePort = () =>
  new Promise<number>((res) => {
    const s = createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => res(p));
    });
  });

type Run = { code: number; stdout: string; stderr: string };
const run = (file: string, args: string[], opts: { cwd: string; env: NodeJS.ProcessEnv }) =>
  new Promise<Run>((resolve) =>
    execFile(file, args, { ...opts, timeout: 90_000 }, (e, stdout, stderr) =>
      resolve({ code: e ? (typeof e.code === "number" ? e.code : 1) : 0, stdout, stderr }),
    ),
  );

/** The shell block between the README's tls-walkthrough markers. */
export async function walkthrough(): Promise<string> {
  const readme = await readFile(join(ROOT, "README.md"), "utf8");
  const m = /<!-- tls-walkthrough -->\s*```sh\n([\s\S]*?)```\s*<!-- \/tls-walkthrough -->/.exec(readme);
  if (!m) throw new Error("README.md has no tls-walkthrough block");
  return m[1];
}

let dir = "";
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const suite = HAVE_KUBECTL ? describe : describe.skip;
const title = HAVE_KUBECTL
  ? "the README's TLS walkthrough"
  : `the README's TLS walkthrough (SKIPPED: ${KUBECTL} or openssl is not installed)`;

suite(title, () => {
  it("runs as written: kubectl and loom list the workers over TLS with the token", async () => {
    dir = await mkdtemp(join(tmpdir(), "loom-tls-walkthrough-"));
    const bin = join(dir, "bin");
    await mkdir(bin);
    await writeFile(
      join(bin, "loom"),
      `#!/bin/sh\nexec "${process.execPath}" "${join(ROOT, "bin", "loom.mjs")}" "$@"\n`,
    );
    await chmod(join(bin, "loom"), 0o755);
    await symlink(join(ROOT, "examples"), join(dir, "examples"));
    const port = String(await freePort());
    const block = (await walkthrough()).replaceAll("8765", port);
    // The Hub started in the background stops with the script.
    const script = `set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT\n${block}\n`;
    const env: NodeJS.ProcessEnv = { PATH: `${bin}:/usr/bin:/bin`, HOME: dir };
    const r = await run("/bin/bash", ["-c", script], { cwd: dir, env });
    expect(r.code, r.stderr).toBe(0);
    // kubectl get --raw /readyz prints the body as it is: "ok" with no newline, as Kubernetes answers.
    expect(r.stdout, r.stderr).toMatch(/^okNAME /m);
    expect(r.stdout.match(/NAME\s+READY/g)).toHaveLength(2); // kubectl's table and loom's
    expect(r.stdout.match(/^evaluation-01\s/gm)).toHaveLength(2);

    // The token's file is its owner's alone, and outside the checkout.
    const kcFile = join(dir, ".kube", "loom.kubeconfig");
    expect((await stat(kcFile)).mode & 0o777).toBe(0o600);
    expect((await stat(join(dir, ".kube"))).mode & 0o777).toBe(0o700);
    const kc = parseYaml(await readFile(kcFile, "utf8")) as Record<string, any>;
    const cluster = kc.clusters[0].cluster;
    expect(cluster.server).toBe(`https://127.0.0.1:${port}`);
    expect(Buffer.from(cluster["certificate-authority-data"], "base64").toString()).toBe(
      await readFile(join(dir, ".loom/tls/hub.crt"), "utf8"),
    );
    expect(kc.users[0].user.token).toMatch(/^[0-9a-f]{64}$/);
  }, 180_000);

  it("without the CA the CLI names the problem, and a wrong CA file is a usage error", async () => {
    const port = String(await freePort());
    const cwd = dir || (dir = await mkdtemp(join(tmpdir(), "loom-tls-walkthrough-")));
    const env = { PATH: "/usr/bin:/bin", HOME: cwd, LOOM_HUB_TOKEN: "walkthrough-token-0123456789abcdef" };
    const loom = (args: string[], extra: NodeJS.ProcessEnv = {}) =>
      run(process.execPath, [join(ROOT, "bin", "loom.mjs"), ...args], { cwd, env: { ...env, ...extra } });
    const script = `set -e\ntrap 'kill $(jobs -p) 2>/dev/null; wait' EXIT
"${process.execPath}" "${join(ROOT, "bin", "loom.mjs")}" hub --port ${port} --data-dir hub2 --tls-self-signed 2>hub2.log &
for i in $(seq 1 60); do [ -f hub2/tls/hub.crt ] && "${process.execPath}" -e "require('https').get({host:'127.0.0.1',port:${port},path:'/livez',ca:require('fs').readFileSync('hub2/tls/hub.crt')},r=>process.exit(r.statusCode===200?0:1)).on('error',()=>process.exit(1))" && break; sleep 0.5; done
"${process.execPath}" "${join(ROOT, "bin", "loom.mjs")}" get workers --controller https://127.0.0.1:${port} 2>no-ca.err || echo "no-ca exit $?"
"${process.execPath}" "${join(ROOT, "bin", "loom.mjs")}" get workers --controller https://127.0.0.1:${port} --certificate-authority hub2/tls/hub.crt && echo "with-ca ok"
`;
    const r = await run("/bin/bash", ["-c", script], { cwd, env });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("no-ca exit 1");
    expect(await readFile(join(cwd, "no-ca.err"), "utf8")).toMatch(
      /cannot reach the Hub at https:\/\/127\.0\.0\.1:\d+: (DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN)/,
    );
    expect(r.stdout).toContain("with-ca ok");
    expect(await readFile(join(cwd, "hub2.log"), "utf8")).toContain("self-signed certificate: ");

    const missing = await loom(["get", "workers", "--certificate-authority", "nope.pem"]);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain("--certificate-authority: nope.pem: ENOENT");
    // A kubeconfig holding the token, redirected into a file, is written with a warning naming --output.
    const redirected = await run(
      "/bin/bash",
      ["-c", `"${process.execPath}" "${join(ROOT, "bin", "loom.mjs")}" kubeconfig > r.kubeconfig`],
      { cwd, env },
    );
    expect(redirected.code, redirected.stderr).toBe(0);
    expect(redirected.stderr).toContain("use --output FILE, which writes it with mode 0600");
    expect(await readFile(join(cwd, "r.kubeconfig"), "utf8")).toContain("token: walkthrough-token-0123456789abcdef");
    const fromEnv = await loom(["kubeconfig"], { LOOM_CA_FILE: "hub2.log" });
    expect(fromEnv.code).toBe(2);
    expect(fromEnv.stderr).toContain("LOOM_CA_FILE: hub2.log: no PEM certificate in it");
  }, 180_000);
});
