// Shared copies of the parts that most cached objects repeat. At 200,000 queued tasks the
// informer holds 200,000 execution profiles, payloads and condition objects that are equal
// among tasks of one campaign or shape, and as many copies of the same few strings
// ("loom.dev/v1alpha1", "queued", a dispatch's creationTimestamp). Replacing each by one
// frozen instance keeps the object's value and drops most of its heap.
//
// Cached objects are read-only for everyone (store.ts); freezing the shared parts turns a
// write that would reach every task holding them into a TypeError at the writer.
import { isQueued } from "../resources/types.ts";

/** Subtrees whose JSON is longer are left alone: a large payload is rarely shared. */
const MAX_SUBTREE_CHARS = 512;
/** A table that grows past this is started afresh; instances already shared stay shared. */
const MAX_ENTRIES = 50_000;

export class Interner {
  private subtrees = new Map<string, unknown>();
  private strings = new Map<string, string>();

  /** The shared instance of a string. */
  string<T>(s: T): T {
    if (typeof s !== "string") return s;
    const hit = this.strings.get(s);
    if (hit !== undefined) return hit as T;
    if (this.strings.size >= MAX_ENTRIES) this.strings = new Map();
    this.strings.set(s, s);
    return s;
  }

  /** The shared, deeply frozen instance of a small JSON value (objects and arrays only). */
  subtree<T>(v: T): T {
    if (v === null || typeof v !== "object" || Object.isFrozen(v)) return v;
    const key = JSON.stringify(v);
    if (key.length > MAX_SUBTREE_CHARS) return v;
    const hit = this.subtrees.get(key);
    if (hit !== undefined) return hit as T;
    if (this.subtrees.size >= MAX_ENTRIES) this.subtrees = new Map();
    deepFreeze(v);
    this.subtrees.set(key, v);
    return v;
  }

  /**
   * Share the repeated parts of a cached object, in place. `old` is the version it replaces:
   * a status write keeps the object's spec and metadata parts as they were, and those are
   * shared already.
   */
  object(obj: CachedObject, old?: CachedObject): void {
    // Only fields that are there: a key set to undefined would be a field to the validator.
    if (obj.apiVersion !== undefined) obj.apiVersion = this.string(obj.apiVersion);
    obj.kind = this.string(obj.kind);
    const m = obj.metadata;
    if (m && m !== old?.metadata) {
      if (m.creationTimestamp !== undefined) m.creationTimestamp = this.string(m.creationTimestamp);
      if (m.labels) m.labels = this.subtree(m.labels);
      if (m.annotations) m.annotations = this.subtree(m.annotations);
      if (m.ownerReferences) m.ownerReferences = this.subtree(m.ownerReferences);
    }
    // A write that left the spec alone keeps the cached one, shared already: same object (uid)
    // and same generation, which the store raises on every change of the spec (store/ops.ts).
    if (old && obj.spec !== old.spec && sameGeneration(obj.metadata, old.metadata)) obj.spec = old.spec;
    const spec = obj.spec;
    if (isRecord(spec) && spec !== old?.spec) {
      // Object-valued fields only (a task's execution_profile and payload): the strings of
      // a spec are mostly its own (ids), and would only fill the table.
      for (const k of Object.keys(spec)) if (typeof spec[k] === "object") spec[k] = this.subtree(spec[k]);
    }
    const st = obj.status;
    if (isRecord(st) && st !== old?.status) {
      if (st.state !== undefined) st.state = this.string(st.state);
      // The conditions of waiting tasks repeat (one answer per shape); a lease's conditions name
      // its worker, epoch and times, so they are its own and would only fill the table.
      const own = obj.kind === "Task" && !isQueued((st.state as string | undefined) ?? "queued");
      if (Array.isArray(st.conditions) && !own) st.conditions = st.conditions.map((c) => this.subtree(c));
    }
  }
}

type CachedObject = {
  apiVersion?: string;
  kind: string;
  metadata: {
    uid?: string;
    generation?: number;
    creationTimestamp?: string;
    labels?: unknown;
    annotations?: unknown;
    ownerReferences?: unknown;
  };
  spec?: unknown;
  status?: unknown;
};

const sameGeneration = (a: CachedObject["metadata"], b: CachedObject["metadata"]) =>
  a.uid !== undefined && a.uid === b.uid && a.generation !== undefined && a.generation === b.generation;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v) && !Object.isFrozen(v);

function deepFreeze(v: unknown): void {
  if (v === null || typeof v !== "object" || Object.isFrozen(v)) return;
  Object.freeze(v);
  for (const x of Object.values(v)) deepFreeze(x);
}
