// The admission invariants (docs/architecture.md, "The invariants") checked over stored objects: what a test reads back
// from the store after a crash, a fuzzing run or a random mix of writes.
import { effectiveCapacity, leasesOn } from "../../src/admission/index.ts";
import { isActive, RESOURCE_FIELDS, type Task, type Worker } from "../../src/resources/types.ts";

/** Every way the stored state breaks an invariant, as sentences (empty: all hold). */
export function invariantViolations(workers: Worker[], tasks: Task[]): string[] {
  const out: string[] = [];
  const names = new Set(workers.map((w) => w.metadata.name));
  for (const t of tasks) {
    if (isActive(t.status?.state) && !t.status?.lease)
      out.push(`task ${t.metadata.name} is ${t.status?.state} with no lease`);
    const w = t.status?.lease?.worker;
    if (w && isActive(t.status?.state) && !names.has(w))
      out.push(`task ${t.metadata.name} holds a lease on ${w}, which does not exist`);
  }
  for (const w of workers) {
    const name = w.metadata.name;
    const leases = leasesOn(name, tasks);
    const cap = effectiveCapacity(w).capacity;
    for (const f of RESOURCE_FIELDS) {
      const reserved = leases.reduce((n, l) => n + l.reservation[f], 0);
      if (reserved > cap[f]) out.push(`worker ${name}: ${f} reserved ${reserved} > capacity ${cap[f]}`);
    }
    const max = w.spec.max_concurrency ?? w.status?.registration?.max_concurrency ?? 1;
    if (leases.length > max) out.push(`worker ${name}: ${leases.length} active leases > max_concurrency ${max}`);
    if (leases.some((l) => l.placement === "exclusive") && leases.length > 1)
      out.push(`worker ${name}: an exclusive lease shares the worker with ${leases.length - 1} other(s)`);
  }
  return out;
}
