// writeJson serializes a large reply piece by piece into a pooled buffer: its bytes must be
// exactly the UTF-8 of JSON.stringify for any value a handler can return, long arrays
// (written element by element) included.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  ByteWriter,
  ELEMENTWISE_ITEMS,
  holdsLongArray,
  ReplyBufferPool,
  writeJson,
} from "../../src/api/large-reply.ts";

const pool = new ReplyBufferPool();

const bytesOf = (v: unknown) => {
  const w = new ByteWriter(pool);
  writeJson(w, v, 0);
  const out = Buffer.from(w.buf.subarray(0, w.length));
  pool.give(w.buf);
  return out;
};

const anything = fc.anything({
  withBoxedValues: true,
  withDate: true,
  withNullPrototype: true,
  withSparseArray: true,
  withObjectString: true,
  withMap: true,
  withSet: true,
});
const longArray = fc.array(anything, { minLength: ELEMENTWISE_ITEMS, maxLength: ELEMENTWISE_ITEMS + 20 });

describe("writeJson", () => {
  it("writes the bytes of JSON.stringify for arbitrary values", () => {
    fc.assert(
      fc.property(anything, (v) => {
        fc.pre(JSON.stringify(v) !== undefined);
        expect(bytesOf(v).equals(Buffer.from(JSON.stringify(v)))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it("writes the bytes of JSON.stringify for long arrays, alone and inside a list object", () => {
    fc.assert(
      fc.property(anything, longArray, fc.boolean(), (meta, items, wrapped) => {
        const v = wrapped ? { kind: "List", metadata: meta, items, dropped: undefined } : items;
        expect(holdsLongArray(v)).toBe(true);
        expect(bytesOf(v).equals(Buffer.from(JSON.stringify(v)))).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it("drops a key whose toJSON gives nothing, and hands toJSON its key, as JSON.stringify does", () => {
    const seen: string[] = [];
    const v = {
      gone: { toJSON: () => undefined },
      keyed: { toJSON: (k: string) => (seen.push(k), `for ${k}`) },
      when: new Date("2026-01-02T03:04:05.000Z"),
      items: Array.from({ length: ELEMENTWISE_ITEMS }, (_, i) => (i % 2 ? { toJSON: () => undefined } : i)),
    };
    expect(bytesOf(v).toString("utf8")).toBe(JSON.stringify(v));
    expect(seen).toEqual(["keyed", "keyed"]);
  });

  it("writes text outside ASCII, grows past its first buffer, and leaves short replies alone", () => {
    const items = Array.from({ length: 3000 }, (_, i) => ({ name: `w-${i}`, note: "résumé ✓ 検証 😀", n: i }));
    const v = { task_id: "t", workers: items, fn: () => 1 };
    const bytes = bytesOf(v);
    expect(bytes.length).toBeGreaterThan(64 * 1024);
    expect(bytes.equals(Buffer.from(JSON.stringify(v)))).toBe(true);
    expect(holdsLongArray({ workers: items.slice(0, ELEMENTWISE_ITEMS - 1) })).toBe(false);
    expect(holdsLongArray(new Map([["a", items]]))).toBe(false);
  });
});
