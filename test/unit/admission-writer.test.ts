// A task's Admitted and Unsatisfiable conditions have one writer (scheduler/lifecycle.ts
// writeAdmission): the conditions controller hands it its answer for a queued task, and a
// grant, the end of a lease or an API status write hand it the task's state.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { grantLease, writeAdmission } from "../../src/scheduler/lifecycle.ts";
import type { Task } from "../../src/resources/types.ts";
import { zero } from "../../src/admission/index.ts";

const src = join(dirname(fileURLToPath(import.meta.url)), "../../src");

/** The src files that build an Admitted or Unsatisfiable condition. */
function writers(): string[] {
  const out: string[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts") && /\btype:\s*"(Admitted|Unsatisfiable)"/.test(readFileSync(p, "utf8")))
        out.push(relative(src, p).split("\\").join("/"));
    }
  };
  walk(src);
  return out.sort();
}

const task = (status: Task["status"]): Task => ({
  apiVersion: "loom.dev/v1alpha1",
  kind: "Task",
  metadata: { name: "t", generation: 2 },
  spec: { required_capability: "", payload: {} },
  status,
});
const NOW = Date.parse("2030-01-01T00:00:00Z");
const iso = new Date(NOW).toISOString();

describe("the Admitted condition's one writer", () => {
  it("is the only src file that builds an Admitted or Unsatisfiable condition", () => {
    expect(writers()).toEqual(["scheduler/lifecycle.ts"]);
  });

  it("writes a queued task's answer with its generation, and turns Unsatisfiable False once some worker could admit it", () => {
    const st = writeAdmission({ state: "queued" }, iso, {
      answer: {
        admitted: { status: "False", reason: "exceeds_worker_capacity", message: "too big" },
        unsatisfiable: { reason: "exceeds_worker_capacity", message: "never" },
      },
      generation: 2,
    });
    expect(st.conditions).toEqual([
      {
        type: "Admitted",
        status: "False",
        reason: "exceeds_worker_capacity",
        message: "too big",
        observedGeneration: 2,
        lastTransitionTime: iso,
      },
      {
        type: "Unsatisfiable",
        status: "True",
        reason: "exceeds_worker_capacity",
        message: "never",
        observedGeneration: 2,
        lastTransitionTime: iso,
      },
    ]);
    writeAdmission(st, iso, {
      answer: { admitted: { status: "True", reason: "WorkerAvailable", message: "w fits" } },
      generation: 3,
    });
    expect(st.conditions?.map((c) => [c.type, c.status, c.reason, c.observedGeneration])).toEqual([
      ["Admitted", "True", "WorkerAvailable", 3],
      ["Unsatisfiable", "False", "Satisfiable", 3],
    ]);
    // Without an answer a queued task's conditions stay as they are.
    const before = JSON.stringify(st);
    expect(JSON.stringify(writeAdmission(st, iso))).toBe(before);
  });

  it("a grant says Admitted on the lease's worker in the same status as the lease, whatever the queued answer was", () => {
    const queued = writeAdmission({ state: "queued", attempt: 1 }, iso, {
      answer: { admitted: { status: "True", reason: "WorkerAvailable", message: "w fits" } },
      generation: 2,
    });
    const st = grantLease(
      task(queued),
      { worker: "w", mode: "pull", leaseSeconds: 60, placement: "shared", reservation: zero(), admission: {} as never },
      NOW,
    );
    expect(st.lease?.worker).toBe("w");
    expect(st.conditions?.find((c) => c.type === "Admitted")).toMatchObject({
      status: "True",
      reason: "Admitted",
      message: "admitted on w",
    });
  });
});
