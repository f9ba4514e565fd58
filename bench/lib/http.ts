// A small keep-alive JSON client over node:http: one Agent per simulated client, so each
// one holds its own connection, as a Runner does.
import http from "node:http";

export type Reply<T = any> = { status: number; body: T };

export class JsonClient {
  readonly agent: http.Agent;
  private readonly host: string;
  private readonly port: number;

  constructor(base: string, sockets = 1) {
    const u = new URL(base);
    this.host = u.hostname;
    this.port = Number(u.port);
    this.agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  }

  request<T = any>(method: string, path: string, body?: unknown): Promise<Reply<T>> {
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    return new Promise((resolve, reject) => {
      const req = http.request(
        {
          host: this.host,
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers: data ? { "content-type": "application/json", "content-length": data.length } : {},
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (c: Buffer) => chunks.push(c));
          res.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8");
            try {
              resolve({ status: res.statusCode ?? 0, body: text ? JSON.parse(text) : undefined });
            } catch {
              reject(new Error(`${method} ${path}: ${res.statusCode} non-JSON reply: ${text.slice(0, 300)}`));
            }
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(data);
    });
  }

  /** POST and insist on a 2xx answer. */
  async post<T = any>(path: string, body: unknown): Promise<T> {
    const r = await this.request<T>("POST", path, body);
    if (r.status < 200 || r.status > 299)
      throw new Error(`POST ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
    return r.body;
  }

  async get<T = any>(path: string): Promise<T> {
    const r = await this.request<T>("GET", path);
    if (r.status < 200 || r.status > 299)
      throw new Error(`GET ${path}: ${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
    return r.body;
  }

  close(): void {
    this.agent.destroy();
  }
}
