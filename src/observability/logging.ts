// How the Hub logs. Requests go to debug, so lifecycle, admission and GitOps lines stand out
// at info and warn. On a terminal the log is human-readable (pino-pretty); in a pipe it is
// JSON, one object a line, with ISO times rather than epoch milliseconds.
import { type FastifyInstance, type FastifyServerOptions, LogController } from "fastify";

export type LogLevel = "silent" | "error" | "warn" | "info" | "debug";

/** Secrets a request may carry; pino replaces them before anything is written. */
const REDACT = ["req.headers.authorization", 'req.headers["x-loom-token"]'];

export function loggerOptions(level: LogLevel, tty: boolean = Boolean(process.stdout.isTTY)): FastifyServerOptions["logger"] {
  if (level === "silent") return false;
  const base = { level, redact: REDACT };
  if (tty) return { ...base, transport: { target: "pino-pretty", options: { translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname,reqId", singleLine: true } } };
  return { ...base, timestamp: () => `,"time":"${new Date().toISOString()}"` };
}

/** Fastify's logger, with its two info lines per request turned off (logRequests writes one at debug). */
export function serverLogOptions(level: LogLevel): Pick<FastifyServerOptions, "logger" | "logController"> {
  return { logger: loggerOptions(level), logController: new LogController({ disableRequestLogging: true }) };
}

/** One debug line per finished request, instead of fastify's two at info. */
export function logRequests(f: FastifyInstance): void {
  f.addHook("onResponse", async (req, reply) => {
    req.log.debug({ method: req.method, url: req.url.split("?")[0], status: reply.statusCode, ms: Math.round(reply.elapsedTime) }, "request");
  });
}
