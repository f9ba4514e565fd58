import os from "node:os";
import { describe, expect, it } from "vitest";
import { CapacityError, defaultCapacityFromHost, parseCapacity } from "../../src/admission/index.ts";
import { hostSnapshot, resolveCapacity } from "../../src/runner/host.ts";
import { HubError } from "../../src/protocol/errors.ts";
import { normaliseCapacityInput } from "../../src/scheduler/workers.ts";

describe("host snapshot", () => {
  it("reports cpu, memory, disk of the work dir's filesystem, and loadavg", async () => {
    const s = await hostSnapshot(os.tmpdir() + "/does/not/exist/yet");
    expect(s.hostname).toBe(os.hostname());
    expect(s.resources.cpu_count).toBeGreaterThan(0);
    expect(s.resources.mem_total_mb).toBeGreaterThan(0);
    expect(s.resources.mem_available_mb).toBeLessThanOrEqual(s.resources.mem_total_mb);
    expect(s.resources.disk_total_mb).toBeGreaterThan(0);
    expect(s.resources.disk_available_mb).toBeLessThanOrEqual(s.resources.disk_total_mb);
    if (process.platform !== "win32") expect(s.resources.loadavg).toHaveLength(3);
  });
});

describe("capacity defaults (§4)", () => {
  it("are the Hub's defaults for the same snapshot", () => {
    for (const snap of [
      { cpu_count: 4, mem_total_mb: 16000, mem_available_mb: 8000.5, disk_total_mb: 90000, disk_available_mb: 50000.9 },
      { cpu_count: 0.5, mem_total_mb: 2048.7, disk_total_mb: 10 },
      {},
    ]) {
      expect(resolveCapacity(snap, undefined)).toEqual(defaultCapacityFromHost(snap));
    }
    expect(resolveCapacity({ cpu_count: 4, mem_available_mb: 8000.5 }, undefined)).toEqual({
      cpu_millis: 4000,
      memory_mb: 8000,
      disk_mb: 0,
      gpu_count: 0,
      gpu_types: [],
    });
  });
});

describe("capacity overrides", () => {
  const snap = { cpu_count: 4, mem_available_mb: 8000.5, disk_available_mb: 50000 };
  it("merge over the defaults field by field (the §8 example)", () => {
    expect(resolveCapacity(snap, { memory_mb: 2048 })).toEqual({
      cpu_millis: 4000,
      memory_mb: 2048,
      disk_mb: 50000,
      gpu_count: 0,
      gpu_types: [],
    });
  });
  it("sort and de-duplicate gpu_types, and truncate floats", () => {
    expect(resolveCapacity(snap, { gpu_count: 2.9, gpu_types: ["h100", "a100", "h100"] })).toMatchObject({
      gpu_count: 2,
      gpu_types: ["a100", "h100"],
    });
  });
  it.each([
    [{ cpu_millis: -1 }, "resource_capacity.cpu_millis"],
    [{ memory_mb: true }, "resource_capacity.memory_mb"],
    [{ disk_mb: "10" }, "resource_capacity.disk_mb"],
    [{ gpu_count: Number.NaN }, "resource_capacity.gpu_count"],
    [{ tpu_count: 1 }, "resource_capacity.tpu_count"],
    [{ gpu_types: "a100", gpu_count: 1 }, "resource_capacity.gpu_types"],
    [{ gpu_types: ["a100"] }, "resource_capacity.gpu_types"],
    [[1, 2], "resource_capacity"],
  ])("reject %j naming %s", (raw, field) => {
    let err: unknown;
    try {
      resolveCapacity(snap, raw);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(CapacityError);
    expect((err as CapacityError).field).toBe(field);
    expect((err as Error).message.startsWith(field + ":")).toBe(true);
    // The Hub refuses the same input for the same field.
    let hubErr: unknown;
    try {
      normaliseCapacityInput(raw);
    } catch (e) {
      hubErr = e;
    }
    expect(hubErr).toBeInstanceOf(HubError);
    expect((hubErr as HubError).body).toMatchObject({ error: "invalid_resource_capacity", field });
  });
  it("empty or missing overrides change nothing", () => {
    expect(parseCapacity(undefined)).toEqual({});
    expect(parseCapacity({})).toEqual({});
  });
});
