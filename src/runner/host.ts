// What this host has, and the resource capacity the Runner registers (RUNNER_PROTOCOL §4).
// Capacity is frozen at registration, so it is computed once from a snapshot plus overrides.
import { readFile, statfs } from "node:fs/promises";
import os from "node:os";
import path from "node:path";

export interface HostResources {
  cpu_count: number;
  mem_total_mb: number;
  mem_available_mb: number;
  disk_total_mb: number;
  disk_available_mb: number;
  loadavg: number[] | null;
}

export interface HostSnapshot {
  hostname: string;
  platform: string;
  resources: HostResources;
}

export interface ResourceCapacity {
  cpu_millis: number;
  memory_mb: number;
  disk_mb: number;
  gpu_count: number;
  gpu_types: string[];
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const MB = 1024 * 1024;

/** MemAvailable counts reclaimable cache; os.freemem() does not, so prefer /proc/meminfo on Linux. */
async function memoryMb(): Promise<{ total: number; available: number }> {
  if (process.platform === "linux") {
    try {
      const text = await readFile("/proc/meminfo", "utf8");
      const kb = (key: string) => {
        const m = new RegExp(`^${key}:\\s+(\\d+)`, "m").exec(text);
        return m ? Number(m[1]) / 1024 : undefined;
      };
      const total = kb("MemTotal");
      const available = kb("MemAvailable");
      if (total !== undefined && available !== undefined) return { total, available };
    } catch {
      // fall through to os
    }
  }
  return { total: os.totalmem() / MB, available: os.freemem() / MB };
}

/** The work dir may not exist yet; measure the nearest existing ancestor, which is on the same filesystem. */
async function diskMb(dir: string): Promise<{ total: number; available: number }> {
  let p = path.resolve(dir);
  for (;;) {
    try {
      const s = await statfs(p);
      return { total: (s.blocks * s.bsize) / MB, available: (s.bavail * s.bsize) / MB };
    } catch {
      const parent = path.dirname(p);
      if (parent === p) return { total: 0, available: 0 };
      p = parent;
    }
  }
}

export function platformString(): string {
  return `${os.type()}-${os.release()}-${os.arch()}`;
}

export async function resourceSnapshot(workDir: string = process.cwd()): Promise<HostResources> {
  const [mem, disk] = await Promise.all([memoryMb(), diskMb(workDir)]);
  return {
    cpu_count: os.availableParallelism?.() ?? (os.cpus().length || 1),
    mem_total_mb: round2(mem.total),
    mem_available_mb: round2(mem.available),
    disk_total_mb: round2(disk.total),
    disk_available_mb: round2(disk.available),
    loadavg: process.platform === "win32" ? null : os.loadavg().map(round2),
  };
}

export async function hostSnapshot(workDir: string = process.cwd()): Promise<HostSnapshot> {
  return { hostname: os.hostname(), platform: platformString(), resources: await resourceSnapshot(workDir) };
}

/** §4 capacity defaults from a resource snapshot (fields may be missing when the snapshot is partial). */
export function defaultCapacity(resources: Partial<HostResources>): ResourceCapacity {
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
  return {
    cpu_millis: Math.max(1000, Math.floor(num(resources.cpu_count) ?? 0) * 1000),
    memory_mb: Math.max(0, Math.floor(num(resources.mem_available_mb) ?? num(resources.mem_total_mb) ?? 0)),
    disk_mb: Math.max(0, Math.floor(num(resources.disk_available_mb) ?? num(resources.disk_total_mb) ?? 0)),
    gpu_count: 0,
    gpu_types: [],
  };
}

export class CapacityError extends Error {
  constructor(readonly field: string, message: string) {
    super(`${field}: ${message}`);
    this.name = "CapacityError";
  }
}

const INT_FIELDS = ["cpu_millis", "memory_mb", "disk_mb", "gpu_count"] as const;

/**
 * Validates a partial capacity override. Numbers must be finite and non-negative; floats are
 * truncated and booleans rejected, as §4 says the Hub does. `field` prefixes error messages.
 */
export function parseCapacityOverrides(raw: unknown, field = "resource_capacity"): Partial<ResourceCapacity> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== "object" || Array.isArray(raw)) throw new CapacityError(field, "must be a JSON object");
  const out: Partial<ResourceCapacity> = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    const f = `${field}.${key}`;
    if ((INT_FIELDS as readonly string[]).includes(key)) {
      if (typeof value !== "number" || !Number.isFinite(value)) throw new CapacityError(f, `must be a non-negative integer, got ${JSON.stringify(value)}`);
      if (value < 0) throw new CapacityError(f, `must be a non-negative integer, got ${value}`);
      out[key as (typeof INT_FIELDS)[number]] = Math.trunc(value);
    } else if (key === "gpu_types") {
      if (!Array.isArray(value) || value.some((t) => typeof t !== "string" || t.trim() === "")) {
        throw new CapacityError(f, "must be a list of non-empty strings");
      }
      out.gpu_types = [...new Set(value.map((t: string) => t.trim()))].sort();
    } else {
      throw new CapacityError(f, `unknown field (allowed: ${[...INT_FIELDS, "gpu_types"].join(", ")})`);
    }
  }
  return out;
}

/** The full capacity the Runner registers: defaults from the snapshot, overridden field by field. */
export function resolveCapacity(resources: Partial<HostResources>, overrides: unknown, field = "resource_capacity"): ResourceCapacity {
  const merged: ResourceCapacity = { ...defaultCapacity(resources), ...parseCapacityOverrides(overrides, field) };
  if (merged.gpu_types.length > 0 && merged.gpu_count <= 0) {
    throw new CapacityError(`${field}.gpu_types`, "needs gpu_count > 0");
  }
  return merged;
}
