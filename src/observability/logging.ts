// How the Hub logs. Requests go to debug, so lifecycle, admission and GitOps lines stand out
// at info and warn. On a terminal each entry is one short line (time, level, message, cut to
// the terminal's width); in a pipe, or with --log-format json, it is JSON, one object a line,
// with ISO times rather than epoch milliseconds.
import { type FastifyInstance, type FastifyServerOptions, LogController } from "fastify";

export type LogLevel = "silent" | "error" | "warn" | "info" | "debug";
/** auto: short lines on a terminal, JSON otherwise. */
export type LogFormat = "auto" | "pretty" | "json";
export const LOG_FORMATS: readonly LogFormat[] = ["auto", "pretty", "json"];

/** Secrets a request may carry; pino replaces them before anything is written. */
const REDACT = ["req.headers.authorization", 'req.headers["x-loom-token"]'];

const LEVELS: Record<number, [string, string]> = {
  10: ["TRACE", "90"],
  20: ["DEBUG", "90"],
  30: ["INFO", "32"],
  40: ["WARN", "33"],
  50: ["ERROR", "31"],
  60: ["FATAL", "31"],
};

/**
 * One line per entry: `12:03:04.567 WARN task x: NotAdmitted: ...`. The fields that the
 * message already names (the object's kind, name and reason) are not repeated; a line wider
 * than the terminal is cut with an ellipsis, except an error's, which keeps its stack.
 */
export function formatLine(entry: Record<string, unknown>, o: { columns?: number; color?: boolean } = {}): string {
  const [name, color] = LEVELS[Number(entry.level)] ?? ["LOG", "0"];
  const t = new Date(typeof entry.time === "number" || typeof entry.time === "string" ? entry.time : Date.now());
  const time = `${String(t.getHours()).padStart(2, "0")}:${String(t.getMinutes()).padStart(2, "0")}:${String(t.getSeconds()).padStart(2, "0")}.${String(t.getMilliseconds()).padStart(3, "0")}`;
  const err = entry.err as { message?: string; stack?: string } | undefined;
  const msg =
    String(entry.msg ?? "") +
    (err?.message && !String(entry.msg ?? "").includes(err.message) ? `: ${err.message}` : "");
  const plain = `${time} ${name.padEnd(5)} ${msg.replace(/\s*\n\s*/g, " ")}`;
  const width = o.columns && o.columns > 20 ? o.columns : 0;
  const cut = width && plain.length > width && !err ? `${plain.slice(0, width - 1)}…` : plain;
  const line = o.color
    ? `\x1b[${color}m${cut.slice(0, time.length + 1 + name.length)}\x1b[0m${cut.slice(time.length + 1 + name.length)}`
    : cut;
  return `${line}\n${err?.stack && Number(entry.level) >= 50 ? `${err.stack}\n` : ""}`;
}

/** A pino destination that writes `formatLine` lines, synchronously, to a terminal. */
export function shortLineStream(out: NodeJS.WriteStream = process.stdout) {
  return {
    write(chunk: string): void {
      for (const raw of chunk.split("\n")) {
        if (!raw) continue;
        let entry: Record<string, unknown>;
        try {
          entry = JSON.parse(raw) as Record<string, unknown>;
        } catch {
          out.write(`${raw}\n`);
          continue;
        }
        out.write(formatLine(entry, { columns: out.columns, color: Boolean(out.isTTY) && !process.env.NO_COLOR }));
      }
    },
  };
}

export function loggerOptions(
  level: LogLevel,
  format: LogFormat = "auto",
  tty: boolean = Boolean(process.stdout.isTTY),
): FastifyServerOptions["logger"] {
  if (level === "silent") return false;
  const base = { level, redact: REDACT };
  if (format === "pretty" || (format === "auto" && tty)) return { ...base, stream: shortLineStream() };
  return { ...base, timestamp: () => `,"time":"${new Date().toISOString()}"` };
}

/** Fastify's logger, with its two info lines per request turned off (logRequests writes one at debug). */
export function serverLogOptions(
  level: LogLevel,
  format: LogFormat = "auto",
): Pick<FastifyServerOptions, "logger" | "logController"> {
  return { logger: loggerOptions(level, format), logController: new LogController({ disableRequestLogging: true }) };
}

/**
 * One debug line per finished request, instead of fastify's two at info. The level is set
 * at start-up, so below debug no hook is added: a request then pays nothing for it.
 */
export function logRequests(f: FastifyInstance, level: LogLevel): void {
  if (level !== "debug") return;
  f.addHook("onResponse", (req, reply, done) => {
    req.log.debug(
      { method: req.method, url: req.url.split("?")[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) },
      "request",
    );
    done();
  });
}
