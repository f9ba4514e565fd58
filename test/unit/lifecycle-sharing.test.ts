// Transitions build a task's next status from the informer's, sharing what they keep
// (lifecycle.ts editableStatus). The informer's objects are read by everyone and changed by
// no one: each transition here runs on a deeply frozen status, so a change in place throws,
// and the input must read the same afterwards.
import { describe, expect, it } from "vitest";
import { endLease, grantLease, markFinal, requeue } from "../../src/scheduler/lifecycle.ts";
import type { TaskStatus } from "../../src/resources/types.ts";
import { taskWith } from "../support/task.ts";
import { zero } from "../../src/admission/index.ts";
import { hasFastProperties } from "../support/v8.ts";

const NOW = Date.parse("2030-01-01T00:00:00Z");

function deepFreeze<T>(v: T): T {
  if (v && typeof v === "object" && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const x of Object.values(v)) deepFreeze(x);
  }
  return v;
}

const task = taskWith;

const grant = {
  worker: "w",
  mode: "pull" as const,
  leaseSeconds: 60,
  placement: "shared" as const,
  reservation: zero(),
};

/** A queued task with a condition and one earlier attempt, then leased: the status each later transition starts from. */
function leasedStatus(): TaskStatus {
  const queued: TaskStatus = {
    state: "retry_queued",
    attempt: 2,
    nominated_worker: "w",
    conditions: [
      { type: "Admitted", status: "True", reason: "WorkerAvailable", message: "w fits", lastTransitionTime: "x" },
      { type: "Nominated", status: "True", reason: "Nominated", message: "holds w", lastTransitionTime: "x" },
    ],
    attempts: [{ attempt: 1, worker: "v", mode: "pull", leased_at: "a", ended_at: "b", outcome: "run_error" }],
  };
  return grantLease(task(deepFreeze(queued)), { ...grant, admission: { ok: true } as never }, NOW);
}

describe("transitions share the status they start from and never change it", () => {
  it("grantLease leaves a frozen queued status as it was", () => {
    const st = leasedStatus();
    expect(st.state).toBe("leased");
    expect(st.nominated_worker).toBeUndefined();
    expect(st.conditions?.find((c) => c.type === "Nominated")?.status).toBe("False");
  });

  it("endLease, requeue and markFinal leave a frozen leased status as it was", () => {
    const leased = deepFreeze(leasedStatus());
    const before = JSON.stringify(leased);
    const ended = markFinal(endLease(leased, "returned", NOW, "returned", "CompletedWithoutResult"), NOW, "Done", "d");
    const again = requeue(leased, NOW, "lease_expired", "LeaseExpired", { excludeWorker: "w" });
    expect(JSON.stringify(leased)).toBe(before);
    expect(ended.lease).toBeUndefined();
    expect(ended.attempts?.map((a) => a.attempt)).toEqual([1, 2]);
    expect(ended.conditions?.find((c) => c.type === "Leased")?.status).toBe("False");
    expect(again.state).toBe("retry_queued");
    expect(again.attempt).toBe(3);
    expect(again.excluded_workers).toEqual(["w"]);
    // The kept history is shared, not copied: the earlier attempt is the same object.
    expect(ended.attempts?.[0]).toBe(leased.attempts?.[0]);
  });

  it("the end of a lease builds a status without the lease, rather than deleting it from a copy", () => {
    // A first attempt: the history is added by the end of the lease, after the lease's field.
    const queued: TaskStatus = { state: "queued", attempt: 1, conditions: [] };
    const leased = grantLease(task(deepFreeze(queued)), { ...grant, admission: { ok: true } as never }, NOW);
    const ended = endLease(deepFreeze(leased), "returned", NOW, "returned", "CompletedWithoutResult");
    expect(Object.hasOwn(ended, "lease")).toBe(false);
    expect(ended.attempts).toHaveLength(1);
    // A copy that lost a field would be a hash table to V8 (the store lays statuses out again, at a cost).
    expect(hasFastProperties(ended)).toBe(true);
  });

  it("a transition shares every condition it leaves as it was, and replaces the one it changes", () => {
    const leased = deepFreeze(leasedStatus());
    const ended = endLease(leased, "returned", NOW, "returned", "CompletedWithoutResult");
    const by = (st: TaskStatus, type: string) => st.conditions?.find((c) => c.type === type);
    // Admitted is unchanged by the end of a lease: the same object, so validation skips it.
    expect(by(ended, "Admitted")).toBe(by(leased, "Admitted"));
    // Leased flips to False: a new object, and the frozen one still reads True.
    expect(by(ended, "Leased")).not.toBe(by(leased, "Leased"));
    expect(by(leased, "Leased")?.status).toBe("True");
    expect(by(ended, "Leased")).toMatchObject({ status: "False", reason: "CompletedWithoutResult" });
    expect(by(ended, "Leased")?.lastTransitionTime).toBe(new Date(NOW).toISOString());
  });
});
