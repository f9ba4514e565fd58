// What this host has, and the resource capacity the Runner registers (RUNNER_PROTOCOL §4).
// Capacity is frozen at registration, so it is computed once from a snapshot plus overrides.
import { readFile, statfs } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { defaultCapacityFromHost, overlayCapacity, parseCapacity, type Vector } from "../admission/index.ts";

export { CapacityError } from "../admission/index.ts";

// A type, not an interface, so it fits the protocol's open health.resources map.
export type HostResources = {
  cpu_count: number;
  mem_total_mb: number;
  mem_available_mb: number;
  disk_total_mb: number;
  disk_available_mb: number;
  loadavg: number[] | null;
};

export interface HostSnapshot {
  hostname: string;
  platform: string;
  resources: HostResources;
}

/** What a Runner registers: every field filled in (RUNNER_PROTOCOL section 4). */
export type ResourceCapacity = Vector;

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

/** The full capacity the Runner registers: defaults from the snapshot, overridden field by field. */
export function resolveCapacity(
  resources: Partial<HostResources>,
  overrides: unknown,
  field = "resource_capacity",
): ResourceCapacity {
  return overlayCapacity(defaultCapacityFromHost(resources), parseCapacity(overrides, field));
}
