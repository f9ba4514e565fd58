// `loom kubeconfig`: a kubeconfig for the running Hub, so `kubectl` (and k9s) manage Loom.
// The token comes from the environment and the CA is embedded (certificate-authority-data),
// so the file works on its own, as every kubeconfig does.
import { Command } from "commander";
import { stringify } from "yaml";
import { CA_FILE_ENV } from "../tls/fetch.ts";
import { caOf } from "./client.ts";
import { err } from "./common.ts";

export function kubeconfig(server: string, token: string | undefined, caPem?: Buffer) {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "loom", cluster: { server, ...(caPem ? { "certificate-authority-data": caPem.toString("base64") } : {}) } }],
    users: [{ name: "loom", user: token ? { token } : {} }],
    contexts: [{ name: "loom", context: { cluster: "loom", user: "loom" } }],
    "current-context": "loom",
    preferences: {},
  };
}

export function kubeconfigCommand(): Command {
  return new Command("kubeconfig")
    .description("print a kubeconfig for the Hub (context \"loom\"); use it with KUBECONFIG=FILE kubectl get tasks")
    .option("--controller <url>", "Hub URL (env LOOM_CONTROLLER)", process.env.LOOM_CONTROLLER ?? "http://127.0.0.1:8765")
    .option("--auth-token-env <name>", "env var holding the Hub token", "LOOM_HUB_TOKEN")
    .option("--certificate-authority <file>", `PEM file of the CA that signed the Hub's certificate, embedded as certificate-authority-data (env ${CA_FILE_ENV})`)
    .action((o: { controller: string; authTokenEnv: string; certificateAuthority?: string }) => {
      const ca = caOf(o.certificateAuthority);
      const server = o.controller.replace(/\/+$/, "");
      if (server.startsWith("https:") && !ca) err(`warning: no CA given (--certificate-authority or ${CA_FILE_ENV}): kubectl will trust only the system CAs for ${server}\n`);
      process.stdout.write(stringify(kubeconfig(server, process.env[o.authTokenEnv] || undefined, ca?.pem)));
    });
}
