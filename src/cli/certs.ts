// `loom certs create`: a key and a self-signed certificate for a Hub's addresses, before the
// Hub starts (`loom hub --tls-self-signed` does the same by itself under its data dir).
import { Command } from "commander";
import { namesFor, createSelfSigned } from "../tls/certs.ts";
import { intFlag, listFlag, out } from "./common.ts";

export function certsCommand(): Command {
  const certs = new Command("certs").description("TLS certificates for the Hub");
  certs
    .command("create")
    .description("write hub.crt (its own CA: give it to clients) and hub.key for the Hub's addresses")
    .option(
      "--host <names>",
      "addresses and DNS names the Hub is reached at, comma-separated (127.0.0.1 and localhost are always added)",
      listFlag("--host"),
      ["127.0.0.1"],
    )
    .option("--out <dir>", "directory to write hub.crt and hub.key", ".loom/tls")
    .option("--days <n>", "validity in days", intFlag("--days", 1), 365)
    .action((o: { host: string[]; out: string; days: number }) => {
      const names = [...new Set(o.host.flatMap(namesFor))];
      const { certFile, keyFile } = createSelfSigned(o.out, names, o.days);
      out(`certificate: ${certFile}\nkey: ${keyFile}\nnames: ${names.join(", ")}\n`);
      out(
        `serve: loom hub --tls-cert-file ${certFile} --tls-key-file ${keyFile}\ntrust: --certificate-authority ${certFile} (or LOOM_CA_FILE=${certFile})\n`,
      );
    });
  return certs;
}
