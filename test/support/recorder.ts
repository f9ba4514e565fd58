// A transparent HTTP recorder for loopback tests: every request is forwarded unchanged to the
// real target and its real reply is passed back; the test only gets to see the traffic, and
// (through `before`) to act between a request's arrival and its forwarding, e.g. an operator
// cancelling a task just before a Runner's start reaches the Hub.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface RecordedCall {
  /** Arrival order, from 0. */
  seq: number;
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body ({} when empty or not JSON). */
  body: Record<string, any>;
  raw: Buffer;
  /** Filled in once the target has answered. */
  status?: number;
  reply?: any;
}

const HOP_BY_HOP = new Set(["host", "connection", "content-length", "transfer-encoding", "keep-alive"]);

export class Recorder {
  readonly calls: RecordedCall[] = [];
  /** Runs before a request is forwarded; the request waits for it. */
  before: (call: RecordedCall) => void | Promise<void> = () => {};
  url = "";
  private readonly server: Server;

  constructor(public target: string) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        const raw = Buffer.concat(chunks);
        let body: Record<string, any> = {};
        try {
          const v = raw.length ? JSON.parse(raw.toString("utf8")) : {};
          if (v && typeof v === "object") body = v;
        } catch {
          // not JSON (a result ZIP): kept in raw
        }
        const call: RecordedCall = {
          seq: this.calls.length,
          method: req.method ?? "GET",
          path: (req.url ?? "/").split("?")[0],
          headers: req.headers,
          body,
          raw,
        };
        this.calls.push(call);
        // A client that goes away (a cut long-poll) cuts the forwarded request too.
        const upstream = new AbortController();
        res.on("close", () => {
          if (!res.writableFinished) upstream.abort();
        });
        void (async () => {
          try {
            await this.before(call);
            const headers: Record<string, string> = {};
            for (const [k, v] of Object.entries(req.headers))
              if (!HOP_BY_HOP.has(k) && typeof v === "string") headers[k] = v;
            const r = await fetch(this.target + (req.url ?? "/"), {
              method: req.method,
              headers,
              body: req.method === "GET" || req.method === "HEAD" ? undefined : raw,
              signal: upstream.signal,
            });
            const out = Buffer.from(await r.arrayBuffer());
            call.status = r.status;
            try {
              call.reply = JSON.parse(out.toString("utf8"));
            } catch {
              call.reply = undefined;
            }
            const replyHeaders: Record<string, string> = {};
            r.headers.forEach((v, k) => {
              if (!HOP_BY_HOP.has(k)) replyHeaders[k] = v;
            });
            res.writeHead(r.status, { ...replyHeaders, "content-length": String(out.length) });
            res.end(out);
          } catch {
            // No reply from the target: the client sees no reply either.
            res.destroy();
          }
        })();
      });
    });
  }

  async start(port = 0): Promise<string> {
    await new Promise<void>((r) => this.server.listen(port, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  callsTo(path: string): RecordedCall[] {
    return this.calls.filter((c) => c.path === path);
  }

  paths(): string[] {
    return this.calls.map((c) => c.path);
  }

  /** Calls about one task: a JSON task_id, or the X-Task-Id of an upload. */
  forTask(taskId: string): RecordedCall[] {
    return this.calls.filter((c) => c.body.task_id === taskId || c.headers["x-task-id"] === taskId);
  }
}

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const { createServer: createNetServer } = await import("node:net");
  return new Promise<number>((resolve, reject) => {
    const s = createNetServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const p = (s.address() as AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}
