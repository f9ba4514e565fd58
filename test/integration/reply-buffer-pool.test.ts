// Large replies are encoded into buffers reused from one reply to the next
// (api/large-reply.ts). Over real HTTP on loopback: a buffer whose response is still being
// written is never handed to another reply, it returns to the pool once its response
// closes (finished or aborted), and every reply arrives byte for byte. A reply with a long
// array is written element by element unless its route has a response schema.
import http from "node:http";
import type { AddressInfo } from "node:net";
import Fastify, { type FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { largeReplyHook, longArrayHook, ReplyBufferPool } from "../../src/api/large-reply.ts";

// Larger than loopback's socket buffers, so a paused reader leaves the Hub's writes pending.
const BIG = 24 << 20;
const pool = new ReplyBufferPool(64 << 20, 4);
const finished = new Map<string, boolean>();
let app: FastifyInstance;
let port: number;

/** The reply for `ch`: `ch` repeated, with a character outside ASCII every 1,000. */
const body = (ch: string, size = BIG) =>
  JSON.stringify({ fill: (ch.repeat(999) + "é").repeat(Math.ceil(size / 1000)) });

beforeAll(async () => {
  app = Fastify();
  app.addHook("onSend", largeReplyHook(pool));
  app.get<{ Params: { ch: string } }>("/big/:ch", async (req, reply) => {
    finished.set(req.params.ch, false);
    reply.raw.once("finish", () => finished.set(req.params.ch, true));
    reply.type("application/json; charset=utf-8");
    return body(req.params.ch);
  });
  await app.listen({ port: 0, host: "127.0.0.1" });
  port = (app.server.address() as AddressInfo).port;
}, 30_000);

afterAll(async () => {
  await app?.close();
});

/** A GET whose reader stops after its first chunk, until `resume` is called. */
function pausedGet(path: string) {
  const chunks: Buffer[] = [];
  let res!: http.IncomingMessage;
  const first = new Promise<void>((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path, agent: false }, (r) => {
      res = r;
      r.once("data", (c: Buffer) => {
        chunks.push(c);
        r.pause();
        resolve();
      });
    });
    req.on("error", reject);
  });
  return {
    first,
    req: () => res,
    resume: () =>
      new Promise<Buffer>((resolve, reject) => {
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => resolve(Buffer.concat(chunks)));
        res.on("error", reject);
        res.resume();
      }),
  };
}

const waitFor = async (ok: () => boolean, what: string) => {
  for (let i = 0; i < 500 && !ok(); i++) await new Promise((r) => setTimeout(r, 10));
  if (!ok()) throw new Error(`timed out waiting for ${what}`);
};

describe("reply buffer pool", () => {
  it("a buffer in flight is not reused; it returns once its response closes", async () => {
    const a = pausedGet("/big/a");
    await a.first;
    // A's writes are still pending: the reader stopped and the reply exceeds the socket buffers.
    await new Promise((r) => setTimeout(r, 100));
    expect(finished.get("a")).toBe(false);
    expect(pool.idleCount).toBe(0);

    // B is answered meanwhile from a buffer of its own, which returns when B closes.
    const b = await fetch(`http://127.0.0.1:${port}/big/b`);
    const bBytes = Buffer.from(await b.arrayBuffer());
    expect(bBytes.toString("utf8")).toBe(body("b"));
    await waitFor(() => pool.idleCount === 1, "B's buffer back in the pool");
    expect(finished.get("a")).toBe(false);

    // C reuses B's buffer (the only idle one) while A is still in flight.
    const c = await fetch(`http://127.0.0.1:${port}/big/c`);
    expect(Buffer.from(await c.arrayBuffer()).toString("utf8")).toBe(body("c"));
    await waitFor(() => pool.idleCount === 1, "C's buffer back in the pool");

    // A, read to its end, holds its own bytes and nothing of B's or C's.
    const aBytes = await a.resume();
    expect(Number(a.req().headers["content-length"])).toBe(aBytes.length);
    expect(aBytes.toString("utf8")).toBe(body("a"));
    await waitFor(() => pool.idleCount === 2, "A's buffer back in the pool");
  }, 60_000);

  it("an aborted response gives its buffer back, and the next reply is whole", async () => {
    const before = pool.idleCount;
    const d = pausedGet("/big/d");
    await d.first;
    await new Promise((r) => setTimeout(r, 50));
    expect(finished.get("d")).toBe(false);
    expect(pool.idleCount).toBe(before - 1);
    d.req().destroy();
    await waitFor(() => pool.idleCount === before, "the aborted reply's buffer back in the pool");

    const e = await fetch(`http://127.0.0.1:${port}/big/e`);
    expect(Buffer.from(await e.arrayBuffer()).toString("utf8")).toBe(body("e"));
  }, 60_000);

  it("writes a long array without a response schema itself, and leaves a schema's serializer alone", async () => {
    const own = new ReplyBufferPool();
    const f = Fastify();
    f.addHook("preSerialization", longArrayHook(own));
    f.addHook("onSend", largeReplyHook(own));
    // A route with a response schema keeps its own serializer, long arrays or not.
    f.get(
      "/schema",
      {
        schema: {
          response: {
            200: {
              type: "object",
              properties: {
                items: { type: "array", items: { type: "object", properties: { a: { type: "integer" } } } },
              },
            },
          },
        },
      },
      async () => ({ items: Array.from({ length: 300 }, (_, a) => ({ a, hidden: "not in the schema" })) }),
    );
    f.get("/long", async () => ({ items: Array.from({ length: 300 }, (_, a) => ({ a, shown: "é" })) }));
    await f.listen({ port: 0, host: "127.0.0.1" });
    const at = `http://127.0.0.1:${(f.server.address() as AddressInfo).port}`;
    try {
      const long = await fetch(`${at}/long`);
      expect(long.headers.get("content-type")).toBe("application/json; charset=utf-8");
      const text = Buffer.from(await long.arrayBuffer()).toString("utf8");
      expect(text).toBe(JSON.stringify({ items: Array.from({ length: 300 }, (_, a) => ({ a, shown: "é" })) }));
      // Written into a buffer of the pool, which came back when the response closed.
      await waitFor(() => own.idleCount === 1, "the long reply's buffer in the pool");
      const schema = (await (await fetch(`${at}/schema`)).json()) as { items: unknown[] };
      expect(schema.items).toHaveLength(300);
      expect(schema.items[299]).toEqual({ a: 299 });
      expect(own.idleCount).toBe(1);
    } finally {
      await f.close();
    }
  });

  it("keeps at most its idle limit, and never a buffer above its size limit", () => {
    const small = new ReplyBufferPool(1 << 20, 2);
    const bufs = [small.take(100), small.take(200), small.take(300)];
    for (const b of bufs) small.give(b);
    expect(small.idleCount).toBe(2);
    // The largest idle buffers stay; a request that fits one gets it back, the smallest that fits.
    const got = small.take(150);
    expect(bufs.slice(1)).toContain(got);
    expect(got.length).toBeGreaterThanOrEqual(150);
    small.give(small.take(2 << 20));
    expect(small.idleCount).toBe(1);
  });
});
