// `loom kubeconfig`: a kubeconfig for the running Hub, so `kubectl` (and k9s) manage Loom.
// The token comes from the environment; the output holds it, as every kubeconfig does.
import { Command } from "commander";
import { stringify } from "yaml";

export function kubeconfig(server: string, token: string | undefined) {
  return {
    apiVersion: "v1",
    kind: "Config",
    clusters: [{ name: "loom", cluster: { server } }],
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
    .action((o: { controller: string; authTokenEnv: string }) => {
      process.stdout.write(stringify(kubeconfig(o.controller.replace(/\/+$/, ""), process.env[o.authTokenEnv] || undefined)));
    });
}
