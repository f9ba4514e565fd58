// One worker's entry in a task-admission answer, as JSON text. A fleet of 2,000 workers
// makes 2,000 entries of about 900 bytes per answer, and encoding them was the largest part
// of the answer's cost. About half of each entry depends on the worker alone (its capacity,
// what its leases reserve, its concurrency): that part is encoded once per state of the
// worker and reused by every answer until the Worker object, one of its leases or its
// reported activity changes. The parts that depend on the task alone (its placement and
// request, the source-cache affinity) are encoded once per answer. What is left per entry is
// the decision itself. The field order is the admission object's (snapshot.ts).
//
// An entry that admits says nothing its parts do not already say: its verdict, shortfalls and
// explanation are constants, and what is available after the lease follows from the worker's
// part and the task's request. Those entries are kept as well (AdmittedEntries), so that an
// answer for a task of a shape asked about before (another task of the same campaign, or a
// view polling one task) copies them instead of building them again.
import { explainWorker, sameLeases, type Decision, type LeaseView, type WorkerView } from "../admission/index.ts";
import { JsonText, vectorJson } from "../protocol/json-text.ts";
import type { Worker } from "../resources/types.ts";
import type { CacheAffinity } from "./affinity.ts";
import type { BlockingLeases } from "./why.ts";

/** The worker-only part of an entry, and the state it was encoded from. */
type WorkerPart = {
  leases: readonly LeaseView[];
  reported: number;
  /** capacity, reserved_before, available_before */
  held: string;
  /** active_task_ids, exclusive_active, concurrency */
  active: string;
};

// A stored Worker never changes (a write makes a new object), and a lease's view is one
// object for as long as its Task is current (leaseView()): comparing them by identity
// tells whether anything the part shows has changed.
const parts = new WeakMap<Worker, WorkerPart>();

// A string built by concatenation is a tree of its pieces, and every copy of it walks the
// tree again. A part kept from one answer to the next is made one flat string once (a JSON
// round trip gives a new, flat string), so copying it into each entry moves its bytes and
// nothing more: with the kept parts left as trees, 2,000 entries took 3.7 ms, flat 1.5 ms.
const flat = (s: string): string => JSON.parse(JSON.stringify(s));

function workerPart(worker: Worker, view: WorkerView, d: Decision): WorkerPart {
  const known = parts.get(worker);
  if (known && known.reported === view.reported_active && sameLeases(known.leases, view.leases)) return known;
  const a = d.admission;
  const part: WorkerPart = {
    leases: view.leases.slice(),
    reported: view.reported_active,
    held: flat(
      `,"capacity":${vectorJson(a.capacity)},"reserved_before":${vectorJson(a.reserved_before)},"available_before":${vectorJson(a.available_before)}`,
    ),
    active: flat(
      `,"active_task_ids":${JSON.stringify(a.active_task_ids)},"exclusive_active":${a.exclusive_active},"concurrency":${JSON.stringify(a.concurrency)}`,
    ),
  };
  parts.set(worker, part);
  return part;
}

/** The admitting entries kept for one task part: by affinity text, then by worker part. */
export type KeptEntries = { chars: number; byAffinity: Map<string, WeakMap<object, JsonText>> };

/**
 * Admitting entries by the task part they were built for. A worker part that is replaced
 * takes its entries with it (a WeakMap). Once the text kept passes the budget, the task parts
 * asked about least recently are dropped; the text of a replaced worker part stays counted
 * (a WeakMap cannot say when it went), so a task asked about for long starts over in the end.
 */
export class AdmittedEntries {
  private readonly byTask = new Map<string, KeptEntries>();
  private chars = 0;

  /** budget: characters of entry text to keep at most. */
  constructor(private readonly budget: number) {}

  /** The entries kept for a task part, now the most recently used. */
  forTask(taskPart: string): KeptEntries {
    let kept = this.byTask.get(taskPart);
    if (kept) this.byTask.delete(taskPart);
    else kept = { chars: 0, byAffinity: new Map() };
    this.byTask.set(taskPart, kept);
    return kept;
  }

  add(kept: KeptEntries, affinity: string, part: object, entry: JsonText): void {
    let byPart = kept.byAffinity.get(affinity);
    if (!byPart) kept.byAffinity.set(affinity, (byPart = new WeakMap()));
    byPart.set(part, entry);
    kept.chars += entry.json.length;
    this.chars += entry.json.length;
    for (const [taskPart, old] of this.byTask) {
      if (this.chars <= this.budget) break;
      this.chars -= old.chars;
      if (old === kept) {
        // The task being answered holds the whole budget: it starts over.
        kept.byAffinity.clear();
        kept.chars = 0;
      } else this.byTask.delete(taskPart);
    }
  }

  /** Characters counted as kept (for tests). */
  get size(): number {
    return this.chars;
  }
}

/**
 * What the Hub keeps of admitting entries: 32 M characters, about 18 answers' worth for
 * 2,000 workers (an entry is about 900 characters), 3 for 10,000.
 */
const admitted = new AdmittedEntries(32 * 1024 * 1024);

const ADMITTED = `"ok":true,"reason":null,"reasons":[]`;

/** The entries of one answer: one task against every worker. */
export class AdmissionEntries {
  /** placement and requested: the task's, the same in every entry. */
  private taskPart?: string;
  private kept?: KeptEntries;
  private readonly affinities = new Map<CacheAffinity["reason"], string[]>();

  constructor(private readonly keep: AdmittedEntries = admitted) {}

  entry(worker: Worker, view: WorkerView, d: Decision, affinity: CacheAffinity, blocking?: BlockingLeases): JsonText {
    const a = d.admission;
    this.taskPart ??= flat(`,"placement":${JSON.stringify(a.placement)},"requested":${vectorJson(a.requested)}`);
    const part = workerPart(worker, view, d);
    const affinityText = this.affinity(affinity);
    // An admitting entry without blocking leases is the same text whenever the parts are.
    const keepable = d.ok && !blocking;
    if (keepable) {
      this.kept ??= this.keep.forTask(this.taskPart);
      const known = this.kept.byAffinity.get(affinityText)?.get(part);
      if (known) return known;
    }
    const e = this.build(worker, part, d, affinityText, blocking);
    if (keepable) this.keep.add(this.kept!, affinityText, part, e);
    return e;
  }

  private build(worker: Worker, part: WorkerPart, d: Decision, affinity: string, blocking?: BlockingLeases): JsonText {
    const a = d.admission;
    const verdict = d.ok
      ? ADMITTED
      : `"ok":false,"reason":${JSON.stringify(a.reason)},"reasons":${JSON.stringify(a.reasons)}`;
    const shortfalls = d.ok ? "{}" : JSON.stringify(a.shortfalls);
    const explanation = d.ok ? `"ok"` : JSON.stringify(explainWorker(d));
    const blocked = blocking
      ? `,"blocking_leases":${JSON.stringify(blocking.leases)}${blocking.until ? `,"blocking_until":${JSON.stringify(blocking.until)}` : ""}`
      : "";
    // Joined into one flat string now, while its pieces are young. Left as a concatenation,
    // the entry would be flattened only when the reply is written, after the answer's other
    // work; in a Hub under load that deferred copy cost as much as the JSON.stringify this
    // replaces.
    return new JsonText(
      [
        `{"worker_id":${JSON.stringify(worker.metadata.name)},`,
        verdict,
        this.taskPart,
        part.held,
        `,"available_after":${vectorJson(a.available_after)},"shortfalls":${shortfalls}`,
        part.active,
        `,"explanation":${explanation},"cache_affinity":${affinity}`,
        blocked,
        "}",
      ].join(""),
    );
  }

  // A task has one source key, so a worker's affinity follows from its reason (which says
  // whether the cache hit) and whether the worker's cache is on: at most five objects.
  private affinity(c: CacheAffinity): string {
    let byEnabled = this.affinities.get(c.reason);
    if (!byEnabled) this.affinities.set(c.reason, (byEnabled = []));
    const i = c.worker_cache_enabled ? 1 : 0;
    return (byEnabled[i] ??= JSON.stringify(c));
  }
}
