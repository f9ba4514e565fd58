// A status write is validated on what it changes: the parts, at any depth, that are not the
// very value the stored status holds, and the rules of every object and list that holds
// them. Same answers as validating it whole.
import { describe, expect, it } from "vitest";
import { boundErrors } from "../../src/resources/limits.ts";
import { validateStatus } from "../../src/resources/validate.ts";

const lease = {
  worker: "w1",
  epoch: 1,
  mode: "pull",
  leased_at: "2026-01-01T00:00:00.000Z",
  lease_until: "2026-01-01T00:10:00.000Z",
  placement: "shared",
  reservation: { cpu_millis: 250, memory_mb: 256, disk_mb: 0, gpu_count: 0 },
  admission: { ok: true, requested: { cpu_millis: 250 } },
};
const leased = { state: "leased", attempt: 1, lease, conditions: [] };
const task = (status: unknown) => ({ kind: "Task", status });

describe("validateStatus with the stored status it replaces", () => {
  it("accepts a valid change, sharing what it keeps", () => {
    const next = { ...leased, state: "running", lease: { ...lease, started_at: "2026-01-01T00:00:01.000Z" } };
    expect(validateStatus(task(next), leased)).toEqual([]);
    expect(validateStatus(task(next))).toEqual([]);
  });

  it("refuses a changed field as the whole schema does, naming it", () => {
    const next = { ...leased, lease: { ...lease, epoch: -1 } };
    const whole = validateStatus(task(next));
    expect(whole.map((e) => e.field)).toEqual(["status.lease.epoch"]);
    expect(validateStatus(task(next), leased)).toEqual(whole);
    const bad = { ...leased, finished_at: "yesterday" };
    expect(validateStatus(task(bad), leased)).toEqual(validateStatus(task(bad)));
    expect(validateStatus(task(bad), leased).map((e) => e.field)).toEqual(["status.finished_at"]);
  });

  it("keeps the status object's own rules: unknown fields and the lease rule", () => {
    const unknown = { ...leased, leese: lease };
    expect(validateStatus(task(unknown), leased)).toEqual([
      { field: "status.leese", message: "unknown field", reason: "FieldUnknown" },
    ]);
    // `state` is unchanged, yet a leased task without its lease is still refused.
    const { lease: _dropped, ...noLease } = leased;
    expect(validateStatus(task(noLease), leased)).toEqual(validateStatus(task(noLease)));
    expect(validateStatus(task(noLease), leased)).not.toEqual([]);
  });

  it("does not look again at a field that is the stored value itself", () => {
    // A status stored under older, looser rules: its unchanged field is not held against a new write.
    const old = { ...leased, finished_at: "yesterday" };
    const next = { ...old, attempt: 2 };
    expect(validateStatus(task(next))).not.toEqual([]);
    expect(validateStatus(task(next), old)).toEqual([]);
    // An equal copy is not the stored value: it is checked.
    expect(validateStatus(task({ ...next, finished_at: String(old.finished_at) }), old)).toEqual([]);
    expect(validateStatus(task({ ...next, lease: { ...lease, epoch: -1 } }), old)).not.toEqual([]);
  });
});

describe("validateStatus inside a changed field", () => {
  const attempt = (n: number) => ({
    attempt: n,
    worker: "w1",
    leased_at: "2026-01-01T00:00:00.000Z",
    ended_at: "2026-01-01T00:01:00.000Z",
    outcome: "clean",
  });
  const ended = { state: "clean", attempt: 1, attempts: [attempt(1)], conditions: [] };

  it("names a bad value deep inside a changed field as the whole schema does", () => {
    const next = { ...leased, lease: { ...lease, reservation: { ...lease.reservation, cpu_millis: -1 } } };
    const whole = validateStatus(task(next));
    expect(whole.map((e) => e.field)).toEqual(["status.lease.reservation.cpu_millis"]);
    expect(validateStatus(task(next), leased)).toEqual(whole);
  });

  it("keeps the rules of every object on the way down", () => {
    // Only started_at is new, yet the lease must still name its worker and hold no unknown field.
    const { worker: _w, ...noWorker } = lease;
    const next = { ...leased, lease: { ...noWorker, started_at: "2026-01-01T00:00:01.000Z", extra: 1 } };
    expect(validateStatus(task(next), leased)).toEqual(validateStatus(task(next)));
    expect(validateStatus(task(next), leased).map((e) => e.field)).toEqual([
      "status.lease.worker",
      "status.lease.extra",
    ]);
    // The reservation's own rule (gpu_types needs a positive gpu_count) holds when only gpu_types changed.
    const gpus = { ...leased, lease: { ...lease, reservation: { ...lease.reservation, gpu_types: ["a100"] } } };
    expect(validateStatus(task(gpus), leased).map((e) => e.field)).toEqual(["status.lease.reservation.gpu_types"]);
  });

  it("checks the items a list gained or replaced, and the list's own rules", () => {
    const next = { ...ended, attempts: [...ended.attempts, { ...attempt(2), attempt: "two" }] };
    expect(validateStatus(task(next), ended)).toEqual(validateStatus(task(next)));
    expect(validateStatus(task(next), ended).map((e) => e.field)).toEqual(["status.attempts[1].attempt"]);
    const tooMany = {
      ...ended,
      attempts: [...ended.attempts, ...Array.from({ length: 1000 }, (_, i) => attempt(i + 2))],
    };
    expect(validateStatus(task(tooMany), ended).map((e) => e.message)).toEqual(
      validateStatus(task(tooMany)).map((e) => e.message),
    );
    expect(validateStatus(task(tooMany), ended)).not.toEqual([]);
  });

  it("does not look again at a part deep inside that is the stored value itself", () => {
    // An attempt and an admission record stored under older, looser rules.
    const oldAttempt = { ...attempt(1), ended_at: "yesterday" };
    const old = { ...ended, attempts: [oldAttempt] };
    const next = { ...old, attempts: [oldAttempt, attempt(2)] };
    expect(validateStatus(task(next))).not.toEqual([]);
    expect(validateStatus(task(next), old)).toEqual([]);
    const odd = { ...leased, lease: { ...lease, admission: { capacity: { cpu_millis: "lots" } } } };
    const started = { ...odd, lease: { ...odd.lease, started_at: "2026-01-01T00:00:01.000Z" } };
    expect(validateStatus(task(started))).not.toEqual([]);
    expect(validateStatus(task(started), odd)).toEqual([]);
  });
});

describe("boundErrors with the value it replaces", () => {
  it("skips only what is the same value at the same place", () => {
    const shared = { log: "a\0b" };
    expect(boundErrors({ status: { error: shared } }, "")).toHaveLength(1);
    expect(boundErrors({ status: { error: shared, n: 1 } }, "", {}, { status: { error: shared } })).toEqual([]);
    // The same object somewhere else is walked: bounds depend on where a value sits.
    expect(boundErrors({ status: { other: shared } }, "", {}, { status: { error: shared } })).toEqual([
      { field: "status.other.log", message: "must not contain NUL characters", reason: "FieldValueInvalid" },
    ]);
    // A copy is walked: what changed in it is checked, and a string the same as there is not.
    const copy = { ...shared, extra: "c\0d" };
    expect(boundErrors({ status: { error: copy } }, "", {}, { status: { error: shared } })).toEqual([
      { field: "status.error.extra", message: "must not contain NUL characters", reason: "FieldValueInvalid" },
    ]);
    expect(boundErrors({ status: { error: { ...shared } } }, "", {}, { status: { error: shared } })).toEqual([]);
    // The same string somewhere else is scanned.
    expect(
      boundErrors({ status: { error: { note: shared.log } } }, "", {}, { status: { error: shared } }),
    ).toHaveLength(1);
  });

  it("stops at the depth limit however deep the value goes, naming where", () => {
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    const errs = boundErrors({ x: deep }, "spec");
    expect(errs).toHaveLength(1);
    expect(errs[0].message).toBe("nests deeper than 64 levels");
    expect(errs[0].field).toBe(`spec.x${".a".repeat(63)}`);
  });

  it("reports at most five errors, in document order", () => {
    const value = Object.fromEntries(Array.from({ length: 8 }, (_, i) => [`k${i}`, Number.NaN]));
    expect(boundErrors(value).map((e) => e.field)).toEqual(["k0", "k1", "k2", "k3", "k4"]);
  });

  it("names the field of an error deep inside", () => {
    expect(boundErrors({ a: [{ b: Number.NaN }] }, "spec")).toEqual([
      { field: "spec.a[0].b", message: "must be a finite number", reason: "FieldValueInvalid" },
    ]);
  });
});

describe("validateStatus bounds the parts a write changes, wherever they sit", () => {
  const deep = (n: number) => {
    let v: Record<string, unknown> = {};
    for (let i = 0; i < n; i++) v = { a: v };
    return v;
  };

  it("bounds a free part (a Runner's error) with or without the status it replaces", () => {
    const failed = { state: "run_error", attempt: 1, conditions: [], error: { type: "x", detail: "a\0b" } };
    const want = [
      { field: "status.error.detail", message: "must not contain NUL characters", reason: "FieldValueInvalid" },
    ];
    expect(validateStatus(task(failed))).toEqual(want);
    expect(validateStatus(task(failed), leased)).toEqual(want);
    const nested = { ...failed, error: deep(100) };
    const errs = validateStatus(task(nested), leased);
    expect(errs).toHaveLength(1);
    expect(errs[0]).toMatchObject({ message: "nests deeper than 64 levels" });
    // The limit counts from the object's root.
    expect(errs[0].field).toBe(`status.error${".a".repeat(62)}`);
    expect(errs).toEqual(boundErrors({ status: nested }));
    const wide = { ...failed, error: Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [`k${i}`, i])) };
    expect(validateStatus(task(wide), leased)).toEqual([
      { field: "status.error", message: "must have at most 10000 keys", reason: "FieldValueInvalid" },
    ]);
  });

  it("bounds the fields an open object keeps beyond those it names (what admission saw), wherever it sits", () => {
    const withNote = (note: unknown) => ({ ...lease, admission: { ...lease.admission, note } });
    expect(validateStatus(task({ ...leased, lease: withNote("a\0b") }), leased)).toEqual([
      { field: "status.lease.admission.note", message: "must not contain NUL characters", reason: "FieldValueInvalid" },
    ]);
    const longKey = { ...lease, admission: { ...lease.admission, ["k".repeat(5000)]: 1 } };
    expect(validateStatus(task({ ...leased, lease: longKey }))).toEqual([
      {
        field: "status.lease.admission",
        message: "has a key that is too long or contains NUL",
        reason: "FieldValueInvalid",
      },
    ]);
    // The same record inside a new attempt, as the end of a lease moves it there.
    const attempt = {
      attempt: 1,
      worker: "w1",
      leased_at: "2026-01-01T00:00:00.000Z",
      ended_at: "2026-01-01T00:01:00.000Z",
      outcome: "clean",
      admission: { note: deep(80) },
    };
    const ended = { state: "clean", attempt: 1, conditions: [], attempts: [attempt] };
    const errs = validateStatus(task(ended), leased);
    expect(errs.map((e) => e.message)).toEqual(["nests deeper than 64 levels"]);
    expect(errs[0].field.startsWith("status.attempts[0].admission.note.a")).toBe(true);
    // Its named, typed fields are ajv's: a string where a number belongs is refused by type.
    const typed = { ...lease, admission: { ...lease.admission, capacity: { cpu_millis: "a\0b" } } };
    expect(validateStatus(task({ ...leased, lease: typed }), leased).map((e) => e.field)).toEqual([
      "status.lease.admission.capacity.cpu_millis",
    ]);
  });

  it("bounds typed parts too, before their schema: a list past the bounds is refused once, not item by item", () => {
    const long = { type: "Admitted", status: "True", reason: "R", message: "m".repeat(40_000) };
    expect(validateStatus(task({ ...leased, conditions: [long] }), leased)).toEqual([
      {
        field: "status.conditions[0].message",
        message: "must be at most 32768 characters",
        reason: "FieldValueInvalid",
      },
    ]);
    const nan = { ...lease, reservation: { ...lease.reservation, cpu_millis: Number.NaN } };
    expect(validateStatus(task({ ...leased, lease: nan }), leased).map((e) => e.field)).toEqual([
      "status.lease.reservation.cpu_millis",
    ]);
    const many = { ...leased, excluded_workers: Array.from({ length: 50_000 }, (_, i) => `w${i}\0`) };
    const tooMany = [
      { field: "status.excluded_workers", message: "must have at most 10000 items", reason: "FieldValueInvalid" },
    ];
    expect(validateStatus(task(many), { ...leased, excluded_workers: ["w1"] })).toEqual(tooMany);
    expect(validateStatus(task(many))).toEqual(tooMany);
    const nul = { ...leased, excluded_workers: ["w\0"] };
    expect(validateStatus(task(nul), leased).map((e) => e.field)).toEqual(["status.excluded_workers[0]"]);
  });

  it("bounds the keys of a map (a campaign's count per state)", () => {
    const counts = { by_state: { ["s\0"]: 1 } };
    expect(validateStatus({ kind: "Campaign", status: counts })).toEqual([
      { field: "status.by_state", message: "has a key that is too long or contains NUL", reason: "FieldValueInvalid" },
    ]);
  });
});
