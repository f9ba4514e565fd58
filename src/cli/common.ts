// What every Hub-talking verb shares: the connection flag, `-o`, flag parsers that name
// the flag they reject, and stdout for data only.
import { type Command, InvalidArgumentError, Option } from "commander";
import { Client, CONTROLLER_ENV, DEFAULT_CONTROLLER, resolveConnection } from "./client.ts";
import { type OutputFormat, formatObject } from "./printers.ts";
import { EXIT_WITH_PARENT_ENV, onParentExit, parentToOutlive } from "../runner/process.ts";

export const CA_HELP =
  "PEM file of the CA that signed the Hub's certificate (env LOOM_CA_FILE), e.g. the one `loom hub --tls-self-signed` prints";
export const CONTROLLER_HELP = `Hub URL (env ${CONTROLLER_ENV}, default ${DEFAULT_CONTROLLER}); the token comes from env LOOM_HUB_TOKEN`;

/** `--controller` (and v1's `--controller-token-env`) on a verb; the program-level flag (before the verb) works too. */
export function withController(cmd: Command): Command {
  return cmd
    .option("--controller <url>", CONTROLLER_HELP)
    .option("--controller-token-env <name>", "environment variable holding the Hub token (default LOOM_HUB_TOKEN)")
    .option("--certificate-authority <file>", CA_HELP);
}

/** The nearest `--controller` given, from the verb up to the program; the token from `--controller-token-env` when given. */
export function clientOf(cmd: Command): Client {
  const nearest = (key: string): string | undefined => {
    for (let c: Command | null = cmd; c; c = c.parent) if (c.opts()[key] !== undefined) return c.opts()[key] as string;
    return undefined;
  };
  const conn = resolveConnection(nearest("controller"), process.env, nearest("certificateAuthority"));
  const tokenEnv = nearest("controllerTokenEnv");
  return new Client(tokenEnv === undefined ? conn : { ...conn, token: process.env[tokenEnv] || undefined });
}

/**
 * The verbs v1 also had print its JSON when stdout is not a terminal (a script reading a
 * pipe or a file), and a table on a terminal; `-o` always wins.
 */
export const forScripts = <F extends string>(output: F | undefined): F | "json" | undefined =>
  output ?? (process.stdout.isTTY ? undefined : "json");

/** v1's JSON: two-space indented, one trailing newline. */
export const printJson = (body: unknown): void => out(formatObject(body, "json"));

export function outputOption(formats: readonly (OutputFormat | "table")[] = ["wide", "json", "yaml", "name"]): Option {
  return new Option("-o, --output <format>", `output format: ${formats.join(", ")}`).choices(formats);
}

/** A whole-number flag; the error names the flag (commander prints it and exits 2). */
export const intFlag =
  (flag: string, min = 0) =>
  (v: string): number => {
    if (!/^\s*-?\d+\s*$/.test(v))
      throw new InvalidArgumentError(`${flag} must be a whole number >= ${min}, got ${JSON.stringify(v)}`);
    const n = Number(v);
    if (n < min) throw new InvalidArgumentError(`${flag} must be >= ${min}, got ${n}`);
    return n;
  };

/** A repeatable flag: each use adds one value. */
export const collect = (v: string, prev: string[] = []): string[] => [...prev, v];

/** Repeated `KEY=VALUE` flags as one map; the error names the flag. */
export const keyValueFlag =
  (flag: string) =>
  (v: string, prev: Record<string, string> = {}): Record<string, string> => {
    const at = v.indexOf("=");
    if (at < 0) throw new InvalidArgumentError(`${flag} expects KEY=VALUE, got ${JSON.stringify(v)}`);
    const key = v.slice(0, at).trim();
    if (!key) throw new InvalidArgumentError(`${flag} has an empty KEY in ${JSON.stringify(v)}`);
    return { ...prev, [key]: v.slice(at + 1) };
  };

/** `a,b` -> ["a", "b"], empty entries dropped. */
export const listFlag =
  (flag: string) =>
  (v: string): string[] => {
    const items = v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean);
    if (!items.length) throw new InvalidArgumentError(`${flag} needs at least one name (a,b)`);
    return items;
  };

export const out = (s: string): void => void process.stdout.write(s);
export const err = (s: string): void => void process.stderr.write(s);

/**
 * Resolves on the first SIGINT or SIGTERM. Call it before anything is printed: a signal sent
 * as soon as a parent reads the first line must reach this handler, not the default action
 * that kills the process.
 */
export function stopSignal(o: { withParent?: boolean } = {}): Promise<void> {
  return new Promise<void>((resolve) => {
    process.once("SIGINT", () => resolve());
    process.once("SIGTERM", () => resolve());
    if (o.withParent) onParentExit(() => resolve(), parentToOutlive());
  });
}

/**
 * Run by an npm script (npm start, npm run hub), or told to: the process also stops when its
 * parent is gone, because npm, stopped by a signal, exits without passing it on.
 */
export const exitsWithParent = () => Boolean(process.env.npm_lifecycle_event || process.env[EXIT_WITH_PARENT_ENV]);
