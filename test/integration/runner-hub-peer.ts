// hub-peer: a small HTTP peer that answers the Runner's §1a calls with the documented
// shapes and records every call, standing in for the Hub in Runner tests. It is not a Hub:
// no admission, no state machine beyond what the Runner's side needs to be observed.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { readZip, verdictFromZip } from "../../src/results/zip.ts";

export interface PeerCall {
  path: string;
  authorization?: string;
  body: Record<string, unknown>;
  /** Raw body for uploads. */
  raw?: Buffer;
  headers: IncomingMessage["headers"];
  at: number;
}

type Reply = { status: number; body: unknown };

export interface HubPeerOptions {
  token?: string;
  desiredConcurrency?: number;
  maxConcurrency?: number;
  /** Per-path override: return a reply to answer with it instead of the default. */
  override?: (path: string, body: Record<string, unknown>, call: PeerCall) => Reply | undefined;
}

export class HubPeer {
  readonly calls: PeerCall[] = [];
  readonly queue: Record<string, unknown>[] = [];
  readonly uploads = new Map<string, { zip: Map<string, Buffer>; verdict: string }>();
  private server: Server;
  url = "";

  constructor(readonly opts: HubPeerOptions = {}) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void this.handle(req, Buffer.concat(chunks)).then(({ status, body }) => {
          const text = JSON.stringify(body);
          res.writeHead(status, { "Content-Type": "application/json; charset=utf-8", "Cache-Control": "no-store", "Content-Length": Buffer.byteLength(text) });
          res.end(text);
        });
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

  paths(): string[] {
    return this.calls.map((c) => c.path);
  }

  callsTo(path: string): PeerCall[] {
    return this.calls.filter((c) => c.path === path);
  }

  private async handle(req: IncomingMessage, raw: Buffer): Promise<Reply> {
    const path = (req.url ?? "/").split("?")[0]!;
    const isZip = path === "/api/results/upload";
    let body: Record<string, unknown> = {};
    if (!isZip && raw.length) body = JSON.parse(raw.toString("utf8"));
    const call: PeerCall = { path, authorization: req.headers.authorization, body, raw: isZip ? raw : undefined, headers: req.headers, at: Date.now() };
    this.calls.push(call);
    if (this.opts.token && req.headers.authorization !== `Bearer ${this.opts.token}`) return { status: 401, body: { error: "unauthorized" } };
    const o = this.opts.override?.(path, body, call);
    if (o) return o;
    const conc = { desired_concurrency: this.opts.desiredConcurrency ?? 1, max_concurrency: this.opts.maxConcurrency ?? 4, initial_concurrency: 1, concurrency_policy: "fixed" };
    const now = new Date().toISOString().replace("Z", "+00:00");
    switch (path) {
      case "/api/workers/register":
        return { status: 200, body: { ok: true, worker_id: body.worker_id, ...conc, initial_concurrency: body.initial_concurrency, resource_capacity: body.resource_capacity } };
      case "/api/workers/heartbeat":
        return { status: 200, body: { ok: true, worker_id: body.worker_id, time: now, ...conc } };
      case "/api/tasks/claim": {
        const limit = Number(body.limit ?? 1);
        let tasks = this.queue.splice(0, limit);
        const wait = Number(body.wait_seconds ?? 0);
        if (!tasks.length && wait > 0) {
          const until = Date.now() + wait * 1000;
          while (!tasks.length && Date.now() < until) {
            await new Promise((r) => setTimeout(r, 100));
            tasks = this.queue.splice(0, limit);
          }
        }
        const leased = tasks.map((t) => ({
          attempt_no: 1,
          task_kind: "run",
          payload: { runner: "noop" },
          ...t,
          assigned_worker_id: body.worker_id,
          lease_until: now,
          controller_concurrency: { desired_concurrency: conc.desired_concurrency, max_concurrency: conc.max_concurrency, resource_admission: { ok: true, reason: null }, claim_batch_id: "b1", claim_batch_size: tasks.length },
        }));
        return { status: 200, body: { tasks: leased, ...conc, active_count: 0 } };
      }
      case "/api/tasks/start":
        return { status: 200, body: { ok: true, task_id: body.task_id, old_state: "leased", new_state: "running" } };
      case "/api/tasks/renew":
        return { status: 200, body: { ok: true, task_id: body.task_id, lease_until: now } };
      case "/api/results/upload": {
        const taskId = String(req.headers["x-task-id"] ?? "");
        if (!taskId) return { status: 400, body: { error: "X-Task-Id required" } };
        const zip = await readZip(raw);
        const verdict = verdictFromZip(zip);
        this.uploads.set(taskId, { zip, verdict });
        return { status: 201, body: { ok: true, result_id: `result-${this.uploads.size}`, attempt_no: 1, verdict, path: "/tmp/x.zip", auto_retry: null } };
      }
      case "/api/tasks/complete":
        return { status: 200, body: { ok: true, task_id: body.task_id, state: "clean" } };
      case "/api/tasks/fail":
        return { status: 200, body: { ok: true, task_id: body.task_id, old_state: "running", new_state: "run_error", auto_retry: null } };
      default:
        return { status: 404, body: { error: "not_found", path } };
    }
  }
}

/** Polls until `cond` holds (or fails the test after `ms`). */
export async function until(cond: () => boolean, ms = 10_000, what = "condition"): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
