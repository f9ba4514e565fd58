// Replies that grow with the fleet or the queue (task-admission and worker-capacity for
// 2,000 workers are 1.8 MB; a list of 200,000 Tasks is about 90 MB) reach the socket as bytes.
import type { FastifyInstance, FastifyReply, onSendHookHandler, preSerializationHookHandler } from "fastify";
import { JsonText } from "../protocol/json-text.ts";

/** A reply at least this long (in UTF-16 units) is encoded once, into a Buffer. */
export const LARGE_REPLY_CHARS = 64 * 1024;

/** An array at least this long is written element by element (see `writeJson`). */
export const ELEMENTWISE_ITEMS = 256;

/** After this many elements of a long array, the writer makes room for the rest at once. */
const SIZE_SAMPLE = 32;

/** Buffers above this size are used once and left to the collector, not kept for the next reply. */
const POOLED_MAX_BYTES = 16 << 20;
/** How many idle buffers the pool keeps. */
const POOLED_IDLE = 4;

/**
 * Buffers that large replies are encoded into, reused from one reply to the next. A fresh
 * megabyte-sized Buffer costs several times the encoding itself: `Buffer.from` of a 1.8 MB
 * task-admission answer took about 5 ms, writing the same bytes into a buffer already in
 * use 0.1 ms. A buffer returns to the pool only once its response has closed: then every
 * socket write of it has completed or been dropped with the connection, so nothing still
 * reads it.
 */
export class ReplyBufferPool {
  private readonly idle: Buffer[] = [];

  constructor(
    private readonly maxBytes = POOLED_MAX_BYTES,
    private readonly maxIdle = POOLED_IDLE,
  ) {}

  /** A buffer of at least `bytes`, from the pool when one is idle and large enough. */
  take(bytes: number): Buffer {
    let best = -1;
    for (let i = 0; i < this.idle.length; i++)
      if (this.idle[i].length >= bytes && (best < 0 || this.idle[i].length < this.idle[best].length)) best = i;
    if (best >= 0) return this.idle.splice(best, 1)[0];
    // Room to grow a little, so a reply slightly larger than the last still fits next time.
    return Buffer.allocUnsafeSlow(bytes <= this.maxBytes ? Math.min(this.maxBytes, Math.ceil(bytes * 1.25)) : bytes);
  }

  /** Hand a buffer back once nothing reads it; the smallest idle one makes room when full. */
  give(buf: Buffer): void {
    if (buf.length > this.maxBytes) return;
    this.idle.push(buf);
    if (this.idle.length > this.maxIdle) {
      this.idle.sort((a, b) => b.length - a.length);
      this.idle.length = this.maxIdle;
    }
  }

  /** Idle buffers held (the tests read it). */
  get idleCount(): number {
    return this.idle.length;
  }

  /**
   * `text` as UTF-8 bytes in a pooled buffer, given back when `reply`'s response closes.
   * Node writes a string that large to a socket at about twice the CPU of the same bytes
   * handed over in a Buffer.
   */
  encode(reply: FastifyReply, text: string): Buffer {
    const bytes = Buffer.byteLength(text);
    const buf = this.take(bytes);
    const n = buf.write(text, 0, bytes, "utf8");
    reply.raw.once("close", () => this.give(buf));
    return buf.subarray(0, n);
  }

  /** `value` as JSON bytes (see `writeJson`), the buffer given back when `reply`'s response closes. */
  encodeJson(reply: FastifyReply, value: unknown): Buffer {
    const w = new ByteWriter(this);
    writeJson(w, value, 0);
    const buf = w.buf;
    reply.raw.once("close", () => this.give(buf));
    return buf.subarray(0, w.length);
  }
}

/** Text appended as UTF-8 to a pooled buffer that grows by doubling, or at once to a size reserved. */
export class ByteWriter {
  buf: Buffer;
  length = 0;

  constructor(private readonly pool: ReplyBufferPool) {
    this.buf = pool.take(LARGE_REPLY_CHARS);
  }

  text(s: string): void {
    // A UTF-16 unit is at most three bytes of UTF-8.
    if (this.buf.length - this.length < s.length * 3) this.grow(s.length * 3);
    this.length += this.buf.write(s, this.length, "utf8");
  }

  /** Room for `total` bytes in all, made now: one copy instead of a doubling per step. */
  reserve(total: number): void {
    if (this.buf.length < total) this.grow(total - this.length);
  }

  private grow(more: number): void {
    const next = this.pool.take(Math.max(this.buf.length * 2, this.length + more));
    this.buf.copy(next, 0, 0, this.length);
    this.pool.give(this.buf);
    this.buf = next;
  }
}

const plain = (v: object) => {
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
};
const hasToJSON = (v: unknown): boolean =>
  typeof v === "object" && v !== null && typeof (v as { toJSON?: unknown }).toJSON === "function";

/**
 * A member's JSON as JSON.stringify writes it inside its holder, or undefined when it is left
 * out: a value with a toJSON method is handed its own key, and may give nothing. A JsonText
 * is already JSON: its text is copied as it is.
 */
function member(key: string, v: unknown): string | undefined {
  if (v instanceof JsonText) return v.json;
  if (!hasToJSON(v)) return JSON.stringify(v);
  const pair = JSON.stringify({ [key]: v });
  return pair.length > 2 ? pair.slice(JSON.stringify(key).length + 2, -1) : undefined;
}

/** Whether writeJson takes `v` apart at `depth` rather than handing it to JSON.stringify whole. */
const takenApart = (v: unknown, depth: number): v is object =>
  depth < 2 &&
  typeof v === "object" &&
  v !== null &&
  !hasToJSON(v) &&
  (Array.isArray(v) ? v.length >= ELEMENTWISE_ITEMS : plain(v));

/**
 * The bytes of `JSON.stringify(value)`, written piece by piece: a long array (at its top
 * or one level down, as in `{items: [...]}`) element by element, everything else through
 * `JSON.stringify`. `JSON.stringify` builds a large result out of many parts, and the first
 * thing that reads it copies them into one new string: for the 1.8 MB task-admission answer
 * that copy cost about 6 ms, more than encoding it. Pieces the size of one element stay
 * small and short-lived.
 */
export function writeJson(w: ByteWriter, value: unknown, depth: number): void {
  if (!takenApart(value, depth)) {
    w.text(JSON.stringify(value) ?? "null");
    return;
  }
  if (Array.isArray(value)) {
    const start = w.length;
    w.text("[");
    for (let i = 0; i < value.length; i++) {
      if (i) w.text(",");
      w.text(member(String(i), value[i]) ?? "null");
      // The first elements foretell the whole array's size (a fifth more, for the spread):
      // a 90 MB list then takes one buffer instead of a chain of doublings, each new.
      if (i === SIZE_SAMPLE) w.reserve(start + Math.ceil(((w.length - start) / (i + 1)) * value.length * 1.2));
    }
    w.text("]");
    return;
  }
  let first = true;
  w.text("{");
  for (const key of Object.keys(value)) {
    const v = (value as Record<string, unknown>)[key];
    const apart = takenApart(v, depth + 1);
    const json = apart ? undefined : member(key, v);
    if (!apart && json === undefined) continue;
    w.text(first ? `${JSON.stringify(key)}:` : `,${JSON.stringify(key)}:`);
    first = false;
    if (apart) writeJson(w, v, depth + 1);
    else w.text(json!);
  }
  w.text("}");
}

/** Whether `value` holds an array long enough for `writeJson` to write it element by element. */
export function holdsLongArray(value: unknown): boolean {
  if (typeof value !== "object" || value === null) return false;
  if (Array.isArray(value)) return value.length >= ELEMENTWISE_ITEMS;
  if (!plain(value)) return false;
  for (const key in value) {
    const v = (value as Record<string, unknown>)[key];
    if (Array.isArray(v) && v.length >= ELEMENTWISE_ITEMS) return true;
  }
  return false;
}

/**
 * An onSend hook: a large serialized reply becomes bytes in a buffer of `pool`. Smaller
 * replies stay as they are, so the copy is made only where it pays.
 */
export const largeReplyHook =
  (pool: ReplyBufferPool): onSendHookHandler =>
  (_req, reply, payload, done) =>
    done(
      null,
      typeof payload === "string" && payload.length >= LARGE_REPLY_CHARS ? pool.encode(reply, payload) : payload,
    );

/**
 * A preSerialization hook: a reply that holds a long array, on a route without a response
 * schema, is serialized by `writeJson` into a buffer of `pool` instead of into one string.
 */
export const longArrayHook =
  (pool: ReplyBufferPool): preSerializationHookHandler =>
  (req, reply, payload, done) => {
    // routeOptions is built afresh on every read: asked only of the few replies that qualify.
    if (holdsLongArray(payload) && !req.routeOptions.schema?.response)
      // fastify sends whatever its serializer returns; its type says string, bytes work as well.
      reply.serializer(((p: unknown) => pool.encodeJson(reply, p)) as unknown as (p: unknown) => string);
    done(null, payload);
  };

const pool = new ReplyBufferPool();
const onSend = largeReplyHook(pool);
const preSerialization = longArrayHook(pool);

/** Large replies of a scope leave as bytes, from one pool shared by every scope of the Hub. */
export function largeRepliesAsBytes(scope: FastifyInstance): void {
  scope.addHook("preSerialization", preSerialization);
  scope.addHook("onSend", onSend);
}
