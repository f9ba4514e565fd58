// A server-side dry run (Kubernetes' dryRun=All): a transaction decided by the same decideOp
// every backend commits with (identities, preconditions, schema validation, the lease guard),
// against the objects stored now, and committed nowhere. The results are what the write would
// have stored; any refusal is the StoreError the write would have raised.
import type { LeaseView } from "../admission/view.ts";
import { allocationChange, decideOp, guardLease, objectValidator, type OpView, type Validator } from "./ops.ts";
import type { Store, StoredObject, TxnOp } from "./store.ts";

/** Thrown inside a decision that needs an object not read yet; the op is decided again once it is. */
class NeedObject {
  constructor(
    readonly kind: string,
    readonly name: string,
  ) {}
}

export type DryRunSource = {
  store: Pick<Store, "get">;
  /** The leases a worker holds now (the informer's lease index); the guard counts them. */
  leasesOn(worker: string): readonly LeaseView[];
  validate?: Validator;
};

let defaultValidator: Validator | undefined;

/** Decide `ops` as one transaction would, in order, writing nothing. */
export async function dryRunTxn(src: DryRunSource, ops: TxnOp[]): Promise<StoredObject[]> {
  const validate = src.validate ?? (defaultValidator ??= objectValidator());
  const read = new Map<string, StoredObject | undefined>();
  /** What earlier ops of this transaction wrote (null: deleted). */
  const written = new Map<string, StoredObject | null>();
  /** Each worker's lease set as this transaction has changed it. */
  const leases = new Map<string, Map<string, LeaseView>>();
  const key = (kind: string, name: string) => `${kind}/${name}`;
  const current = (kind: string, name: string): StoredObject | undefined => {
    const k = key(kind, name);
    if (written.has(k)) return written.get(k) ?? undefined;
    // A sentinel caught by the loop below, not an error: it needs no stack.
    // eslint-disable-next-line @typescript-eslint/only-throw-error
    if (!read.has(k)) throw new NeedObject(kind, name);
    return read.get(k);
  };
  const leasesOf = (worker: string) => {
    let m = leases.get(worker);
    if (!m) leases.set(worker, (m = new Map(src.leasesOn(worker).map((l) => [l.task, l]))));
    return m;
  };
  const view: OpView = {
    current,
    allocate: (kind, before, after) => {
      const change = allocationChange(kind, before, after);
      if (!change) return;
      const { was, now } = change;
      if (now) guardLease(current("Worker", now.worker), now, [...leasesOf(now.worker).values()]);
      if (was) leasesOf(was.worker).delete(was.task);
      if (now) leasesOf(now.worker).set(now.task, now.lease);
    },
  };
  const results: StoredObject[] = [];
  const at = new Date().toISOString();
  for (const op of ops) {
    for (;;) {
      try {
        // Nothing is committed, so nothing gets a new revision: the object keeps the one it has.
        const e = decideOp(op, view, at, "", validate);
        if (e) {
          const was = read.get(key(e.kind, e.name)) ?? undefined;
          const rv = e.type === "ADDED" ? "" : (was?.metadata.resourceVersion ?? "");
          const out = { ...e.result, metadata: { ...e.result.metadata, resourceVersion: rv } };
          written.set(key(e.kind, e.name), e.stored && out);
          results.push(out);
        }
        break;
      } catch (err) {
        if (!(err instanceof NeedObject)) throw err;
        read.set(key(err.kind, err.name), await src.store.get(err.kind, err.name));
      }
    }
  }
  return results;
}
