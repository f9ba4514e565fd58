// Group commit for etcd. Each write the store decides is one Txn: its compares (the keys
// it read, at the mod_revisions it read them) and its puts and deletes. Sent one by one,
// every write pays a gRPC call on the Hub and a request through etcd's raft on the server,
// and under load those calls, not the decisions, are what the Hub spends its time on.
//
// So while one Txn is in flight, the writes decided meanwhile wait, and the next Txn
// carries all of them that can share one: writes on disjoint keys, whose compares and puts
// cannot see each other. etcd evaluates every compare before any put, so two writes that
// touched a common key would both pass their compares and the later put would silently win;
// such a write waits for the next Txn instead. A merged Txn that fails says only that some
// compare failed, not whose; so its failure branch reads the mod_revision of every key it
// compared (keys only), at the revision the compares were evaluated at. The writes whose
// compares did not hold are told so at once, and the rest go again together: each write
// learns its own outcome exactly as if it had never been merged.
import type { ICompare, IRequestOp, IResponseOp } from "etcd3";
import { leaseUnknown } from "./etcd-expiry.ts";

/** What etcd answered to one Txn: whether every compare held, and the revision it committed at. */
export type TxnOutcome = { succeeded: boolean; revision: string };

/** Sends one Txn (compares, then the puts if they all hold, else the failure ops); `responses`: what the ops that ran answered. */
export type SendTxn = (
  compare: ICompare[],
  success: IRequestOp[],
  failure?: IRequestOp[],
) => Promise<TxnOutcome & { responses?: IResponseOp[] }>;

export type BatchLimits = {
  /** etcd's --max-txn-ops: the most compares, and the most puts, one Txn may carry. */
  maxOps: number;
  /** The most key and value bytes one Txn may carry (etcd's --max-request-bytes less framing). */
  maxBytes: number;
};

type Pending = {
  compare: ICompare[];
  writes: IRequestOp[];
  /** Keys its compares read; undefined: it compares a range, and goes alone. */
  reads?: string[];
  /** Keys its writes change; undefined: it deletes a range, and goes alone. */
  written?: string[];
  bytes: number;
  resolve: (o: TxnOutcome) => void;
  reject: (e: unknown) => void;
};

/** etcd's answers to a Txn past --max-txn-ops or --max-request-bytes (nothing of it applied), and gRPC's for a message past its limit. */
const REFUSED_FOR_SIZE = /too many operations in txn request|request is too large|larger than max/;

/** etcd refused a Txn with nothing of it applied, for a reason one of its writes may have caused alone: its size, or a lease. */
const refusedUnapplied = (e: unknown) => REFUSED_FOR_SIZE.test(String((e as Error)?.message ?? e)) || leaseUnknown(e);

const keyOf = (b: Buffer | string | undefined) => (b === undefined ? "" : b.toString());

function opBytes(w: IRequestOp): number {
  return keyOf(w.request_put?.key ?? w.request_delete_range?.key).length + (w.request_put?.value?.length ?? 0) + 16;
}

/** The mod_revision of each compared key, from the failure branch's reads (0: absent); undefined if they did not come back. */
function modsOf(keys: string[], responses: IResponseOp[] | undefined): Map<string, number> | undefined {
  if (!responses || responses.length !== keys.length) return undefined;
  const mods = new Map<string, number>();
  for (let i = 0; i < keys.length; i++) {
    const kv = responses[i]?.response_range?.kvs?.[0];
    mods.set(keys[i], kv ? Number(kv.mod_revision) : 0);
  }
  return mods;
}

export class TxnBatcher {
  private queue: Pending[] = [];
  private sending = false;
  /** Txns sent and the writes they carried (the batch size, for diagnostics). */
  readonly stats = { txns: 0, writes: 0, merged: 0, split: 0 };

  /** `always`: the put every Txn ends with (the store's revision key), carried once per Txn. */
  constructor(
    private readonly send: SendTxn,
    private readonly always: IRequestOp,
    private readonly limits: BatchLimits,
  ) {}

  /** Commit one write's Txn, alone or beside others; resolves with its own outcome. */
  commit(compare: ICompare[], writes: IRequestOp[]): Promise<TxnOutcome> {
    return new Promise((resolve, reject) => {
      const ranged = compare.some((c) => c.range_end !== undefined);
      const deletesRange = writes.some((w) => w.request_delete_range?.range_end !== undefined);
      this.queue.push({
        compare,
        writes,
        reads: ranged ? undefined : compare.map((c) => keyOf(c.key)),
        written: deletesRange ? undefined : writes.map((w) => keyOf(w.request_put?.key ?? w.request_delete_range?.key)),
        // Each compared key is carried twice: in its compare, and in the failure branch's read of it.
        bytes:
          writes.reduce((n, w) => n + opBytes(w), 0) + compare.reduce((n, c) => n + 2 * (keyOf(c.key).length + 16), 0),
        resolve,
        reject,
      });
      if (!this.sending) void this.pump();
    });
  }

  private async pump(): Promise<void> {
    this.sending = true;
    try {
      while (this.queue.length > 0) await this.run(this.take());
    } finally {
      this.sending = false;
    }
  }

  /** The next Txn's writes: the oldest waiting one, and every later one that can share its Txn. */
  private take(): Pending[] {
    const first = this.queue[0];
    const batch = [first];
    const rest: Pending[] = [];
    if (first.reads === undefined || first.written === undefined) {
      this.queue = this.queue.slice(1);
      return batch;
    }
    const read = new Set(first.reads);
    const written = new Set(first.written);
    let compares = first.compare.length;
    let puts = first.writes.length + 1;
    let bytes = first.bytes + opBytes(this.always);
    /** Keys of the writes left to wait: a later write touching one stays behind it, so writes of a key keep their order. */
    const heldReads = new Set<string>();
    const heldWrites = new Set<string>();
    let heldUnknown = false;
    for (const p of this.queue.slice(1)) {
      const fits =
        !heldUnknown &&
        p.reads !== undefined &&
        p.written !== undefined &&
        compares + p.compare.length <= this.limits.maxOps &&
        puts + p.writes.length <= this.limits.maxOps &&
        bytes + p.bytes <= this.limits.maxBytes &&
        p.written.every((k) => !written.has(k) && !read.has(k) && !heldWrites.has(k) && !heldReads.has(k)) &&
        p.reads.every((k) => !written.has(k) && !heldWrites.has(k));
      if (!fits) {
        rest.push(p);
        if (p.reads === undefined || p.written === undefined) heldUnknown = true;
        for (const k of p.reads ?? []) heldReads.add(k);
        for (const k of p.written ?? []) heldWrites.add(k);
        continue;
      }
      batch.push(p);
      for (const k of p.reads!) read.add(k);
      for (const k of p.written!) written.add(k);
      compares += p.compare.length;
      puts += p.writes.length;
      bytes += p.bytes;
    }
    this.queue = rest;
    return batch;
  }

  private async run(batch: Pending[]): Promise<void> {
    this.stats.txns++;
    this.stats.writes += batch.length;
    if (batch.length === 1) return this.alone(batch[0]);
    this.stats.merged++;
    const compare = batch.flatMap((p) => p.compare);
    // Plain mod_revision compares (every merged write's, as the store makes them) can be
    // checked against the keys' mod_revisions; anything else is split as it comes.
    const attributable = compare.every((c) => c.target === "Mod" && c.result === "Equal" && c.range_end === undefined);
    const compared = attributable ? [...new Set(compare.map((c) => keyOf(c.key)))] : [];
    let out: TxnOutcome & { responses?: IResponseOp[] };
    try {
      out = await this.send(
        compare,
        [...batch.flatMap((p) => p.writes), this.always],
        compared.map((k) => ({ request_range: { key: Buffer.from(k), keys_only: true } })),
      );
    } catch (e) {
      // etcd refused the merged Txn unapplied (its size, or one write's lease): each write
      // goes alone, so only the one at fault fails. Any other failure (a broken connection)
      // leaves the outcome unknown, as it would for a single Txn, so every write of the batch
      // is told so rather than sent again.
      if (!refusedUnapplied(e)) {
        for (const p of batch) p.reject(e);
        return;
      }
      out = { succeeded: false, revision: "" };
    }
    if (out.succeeded) {
      for (const p of batch) p.resolve(out);
      return;
    }
    this.stats.split++;
    const mods = attributable ? modsOf(compared, out.responses) : undefined;
    if (mods) {
      const failed = batch.filter((p) => !p.compare.every((c) => mods.get(keyOf(c.key)) === Number(c.mod_revision)));
      if (failed.length > 0) {
        for (const p of failed) p.resolve({ succeeded: false, revision: out.revision });
        const held = batch.filter((p) => !failed.includes(p));
        // Still disjoint, and their compares held: together again, ahead of what waits.
        if (held.length > 0) await this.run(held);
        return;
      }
    }
    // Disjoint keys, so sending them alone at once cannot make them fail one another.
    await Promise.all(batch.map((p) => this.alone(p)));
  }

  private async alone(p: Pending): Promise<void> {
    try {
      p.resolve(await this.send(p.compare, [...p.writes, this.always]));
    } catch (e) {
      p.reject(e);
    }
  }
}
