// `loom kubeconfig`: a kubeconfig for the running Hub, so `kubectl` (and k9s) manage Loom.
// The token comes from the environment and the CA is embedded (certificate-authority-data),
// so the file works on its own, as every kubeconfig does.
import { Command } from "commander";
import { stringify } from "yaml";
import { CA_FILE_ENV } from "../tls/fetch.ts";
import { fstatSync } from "node:fs";
import { chmod, mkdir, rename, rm, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { caOf, CliError } from "./client.ts";
import { err } from "./common.ts";

export function kubeconfig(server: string, token: string | undefined, caPem?: Buffer) {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "loom",
        cluster: { server, ...(caPem ? { "certificate-authority-data": caPem.toString("base64") } : {}) },
      },
    ],
    users: [{ name: "loom", user: token ? { token } : {} }],
    contexts: [{ name: "loom", context: { cluster: "loom", user: "loom" } }],
    "current-context": "loom",
    preferences: {},
  };
}

export function kubeconfigCommand(): Command {
  return new Command("kubeconfig")
    .description('print a kubeconfig for the Hub (context "loom"); use it with KUBECONFIG=FILE kubectl get tasks')
    .option(
      "--controller <url>",
      "Hub URL (env LOOM_CONTROLLER)",
      process.env.LOOM_CONTROLLER ?? "http://127.0.0.1:8765",
    )
    .option("--auth-token-env <name>", "env var holding the Hub token", "LOOM_HUB_TOKEN")
    .option(
      "--certificate-authority <file>",
      `PEM file of the CA that signed the Hub's certificate, embedded as certificate-authority-data (env ${CA_FILE_ENV})`,
    )
    .option(
      "-o, --output <file>",
      "write it to FILE (mode 0600, its folder created 0700), e.g. ~/.kube/loom.kubeconfig, instead of printing it",
    )
    .action(async (o: { controller: string; authTokenEnv: string; certificateAuthority?: string; output?: string }) => {
      const ca = caOf(o.certificateAuthority);
      const server = o.controller.replace(/\/+$/, "");
      if (server.startsWith("https:") && !ca)
        err(
          `warning: no CA given (--certificate-authority or ${CA_FILE_ENV}): kubectl will trust only the system CAs for ${server}\n`,
        );
      const token = process.env[o.authTokenEnv] || undefined;
      const text = stringify(kubeconfig(server, token, ca?.pem));
      if (o.output) {
        await writePrivate(o.output, text);
        err(`kubeconfig written to ${o.output} (mode 0600); use it with KUBECONFIG=${o.output} kubectl get tasks\n`);
        return;
      }
      // `> file` makes a file as the umask says, usually readable by everyone, and in the checkout.
      if (token && fstatSync(1).isFile())
        err(
          "warning: this kubeconfig holds the Hub token, and a file made by `>` is readable by others: use --output FILE, which writes it with mode 0600\n",
        );
      process.stdout.write(text);
    });
}

/** Write a file only its owner can read, whatever the umask and whatever was there: a temp file of mode 0600, renamed over it. */
async function writePrivate(file: string, text: string): Promise<void> {
  await mkdir(dirname(resolve(file)), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  try {
    await writeFile(tmp, text, { mode: 0o600, flag: "wx" });
    await chmod(tmp, 0o600); // the umask cannot widen it, but a stricter one narrows it: make it exactly 0600
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw new CliError(`--output: ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`, 1);
  }
}
