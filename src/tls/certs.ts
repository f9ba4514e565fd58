// Self-signed certificates for a Hub: a key and a certificate naming the addresses it
// serves, which is its own CA (kubectl's certificate-authority-data, the CLI's
// --certificate-authority). Made with the openssl binary: node:crypto signs but cannot
// build an X.509 certificate.
import { execFileSync } from "node:child_process";
import { X509Certificate } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { isIP } from "node:net";
import { hostname, networkInterfaces } from "node:os";
import { join } from "node:path";

export type CertFiles = { certFile: string; keyFile: string };

/** The names a certificate for `host` should carry: the host, and every local address when it binds all of them. */
export function namesFor(host: string): string[] {
  const names = new Set([host.replace(/^\[|\]$/g, ""), "127.0.0.1", "localhost"]);
  if (host === "0.0.0.0" || host === "::" || host === "[::]") {
    names.add(hostname());
    for (const list of Object.values(networkInterfaces()))
      for (const a of list ?? []) if (!a.internal) names.add(a.address);
  }
  names.delete("0.0.0.0");
  names.delete("::");
  return [...names];
}

/** True when the certificate is valid for another day and names every one of `names`. */
export function covers(certPem: string | Buffer, names: string[], now = Date.now()): boolean {
  const c = new X509Certificate(certPem);
  if (Date.parse(c.validTo) < now + 86_400_000) return false;
  return names.every((n) => (isIP(n) ? c.checkIP(n) : c.checkHost(n)) !== undefined);
}

function openssl(): string {
  for (const p of ["/usr/bin/openssl", "/usr/local/bin/openssl", "/opt/homebrew/bin/openssl"])
    if (existsSync(p)) return p;
  try {
    execFileSync("openssl", ["version"], { stdio: "ignore" });
    return "openssl";
  } catch {
    throw new Error(
      "making a self-signed certificate needs the openssl command; install it, or pass --tls-cert-file and --tls-key-file",
    );
  }
}

/** Write `hub.crt` and `hub.key` under dir for `names` (an EC P-256 key; the certificate is its own CA). */
export function createSelfSigned(dir: string, names: string[], days = 365): CertFiles {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const certFile = join(dir, "hub.crt");
  const keyFile = join(dir, "hub.key");
  const san = names.map((n) => (isIP(n) ? `IP:${n}` : `DNS:${n}`)).join(",");
  execFileSync(
    openssl(),
    [
      "req",
      "-x509",
      "-newkey",
      "ec",
      "-pkeyopt",
      "ec_paramgen_curve:prime256v1",
      "-nodes",
      "-sha256",
      "-keyout",
      keyFile,
      "-out",
      certFile,
      "-days",
      String(days),
      "-subj",
      "/CN=loom-hub",
      "-addext",
      `subjectAltName=${san}`,
      "-addext",
      "basicConstraints=critical,CA:TRUE",
      "-addext",
      "keyUsage=critical,digitalSignature,keyCertSign",
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  chmodSync(keyFile, 0o600);
  return { certFile, keyFile };
}

/** The Hub's self-signed pair under dir, made (or made again) when it is missing, expiring or does not name the host. */
export function ensureSelfSigned(dir: string, host: string): CertFiles & { created: boolean } {
  const certFile = join(dir, "hub.crt");
  const keyFile = join(dir, "hub.key");
  const names = namesFor(host);
  if (existsSync(certFile) && existsSync(keyFile) && covers(readFileSync(certFile), names))
    return { certFile, keyFile, created: false };
  return { ...createSelfSigned(dir, names), created: true };
}
