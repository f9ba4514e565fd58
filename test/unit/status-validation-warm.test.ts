// The status validators compiled ahead of the first writes (compileStatusValidators, which a
// Hub runs between requests once it serves): afterwards a lease's status writes, from the
// grant to the attempt history, compile nothing and answer as before.
import { describe, expect, it } from "vitest";
import { zero } from "../../src/admission/index.ts";
import type { TaskStatus } from "../../src/resources/types.ts";
import { taskWith } from "../support/task.ts";
import { compileStatusValidators, statusValidatorsCompiled, validateStatus } from "../../src/resources/validate.ts";
import { endLease, grantLease, requeue } from "../../src/scheduler/lifecycle.ts";

const NOW = Date.parse("2030-01-01T00:00:00Z");
const task = taskWith;
const queued: TaskStatus = {
  state: "queued",
  attempt: 1,
  conditions: [
    { type: "Admitted", status: "True", reason: "WorkerAvailable", message: "w fits", lastTransitionTime: "x" },
  ],
};
const grant = (worker: string) => ({
  worker,
  mode: "pull" as const,
  leaseSeconds: 60,
  placement: "shared" as const,
  reservation: { ...zero(), cpu_millis: 250, memory_mb: 128 },
  admission: { ok: true, requested: { cpu_millis: 250, memory_mb: 128 } } as never,
});

/** queued -> leased -> running -> ended -> requeued -> leased again, each status with the one it replaces. */
function lifecycle(): [TaskStatus, TaskStatus][] {
  const leased = grantLease(task(queued), grant("w1"), NOW);
  const running: TaskStatus = {
    ...leased,
    state: "running",
    lease: { ...leased.lease!, started_at: "2030-01-01T00:00:01Z" },
  };
  const ended = endLease(running, "run_error", NOW + 5000, "run_error", "RunFailed");
  const again = requeue(ended, NOW + 6000, "Retry", "retrying");
  const leasedAgain = grantLease(task(again), grant("w2"), NOW + 7000);
  return [
    [leased, queued],
    [running, leased],
    [ended, running],
    [again, ended],
    [leasedAgain, again],
  ];
}

describe("status validators compiled ahead", () => {
  it("without them, a status write compiles the parts it reaches on first use", () => {
    const before = statusValidatorsCompiled();
    const [[leased, prev]] = lifecycle();
    expect(validateStatus(task(leased), prev)).toEqual([]);
    expect(statusValidatorsCompiled()).toBeGreaterThan(before);
  });

  it("afterwards, a lease's writes from grant to the attempt history compile nothing", () => {
    let steps = 0;
    for (const _ of compileStatusValidators()) steps++;
    expect(steps).toBeGreaterThan(50);
    const compiled = statusValidatorsCompiled();
    for (const [next, prev] of lifecycle()) expect(validateStatus(task(next), prev)).toEqual([]);
    // A refused write still names its field.
    const [[leased, prev]] = lifecycle();
    const bad = { ...leased, lease: { ...leased.lease!, epoch: -1 } };
    expect(validateStatus(task(bad), prev).map((e) => e.field)).toEqual(["status.lease.epoch"]);
    expect(statusValidatorsCompiled()).toBe(compiled);
  });
});
