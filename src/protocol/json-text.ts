// A value already encoded as JSON. A reply built from parts that repeat from one answer to
// the next (task-admission's per-worker entries) carries them as text, and the large-reply
// writer copies that text as it is instead of encoding the value again. Anything else that
// serializes a JsonText (JSON.stringify of a small reply, a test) gets the same value back
// through toJSON.

export class JsonText {
  constructor(readonly json: string) {}

  toJSON(): unknown {
    return JSON.parse(this.json);
  }
}

/** A resource vector (admission/vector.ts) as JSON, in its own field order: its counts are finite integers. */
export function vectorJson(v: {
  cpu_millis: number;
  memory_mb: number;
  disk_mb: number;
  gpu_count: number;
  gpu_types: readonly string[];
}): string {
  const types = v.gpu_types.length ? JSON.stringify(v.gpu_types) : "[]";
  return `{"cpu_millis":${num(v.cpu_millis)},"memory_mb":${num(v.memory_mb)},"disk_mb":${num(v.disk_mb)},"gpu_count":${num(v.gpu_count)},"gpu_types":${types}}`;
}

// JSON has no NaN or Infinity: JSON.stringify writes null for them, and so does this.
const num = (n: number) => (Number.isFinite(n) ? String(n) : "null");
