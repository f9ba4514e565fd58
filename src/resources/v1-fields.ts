// Fields of a v1 document (inventory v1, manifest schema 1) that Loom does not act on. A
// field v1 knew is neither an error nor dropped: it is kept on the resource it belongs to, as
// JSON in one annotation (the CRDs stay strict for Loom's own resource form), and reported as
// a note so `loom validate` and `loom apply` show it. In an inventory, a field neither v1 nor
// Loom knows is a typo until shown otherwise: an error, with the nearest known name.
import { type ItemFieldError, fieldError } from "./input-errors.ts";

export const V1_FIELDS_ANNOTATION = "loom.dev/v1-fields";

/** A kept field, reported in the file's own terms (`workers[0].rack`). */
export const keptNote = (field: string, where: string, subject?: string): ItemFieldError =>
  fieldError(field, `not used by Loom; kept ${where}`, "FieldUnknown", subject);

/** The annotation holding kept fields, or nothing when there are none. */
export function keptAnnotation(kept: Record<string, unknown>): Record<string, string> {
  return Object.keys(kept).length ? { [V1_FIELDS_ANNOTATION]: JSON.stringify(kept) } : {};
}

/**
 * Worker fields v1 read from an inventory entry (or its connection_defaults) that are not
 * fields of Loom's Worker spec: another id, v1's nested connection forms, labels, a token
 * variable. (Every field of RUNNER_PROTOCOL §6 is a Worker spec field.)
 */
export const V1_ONLY_WORKER_KEYS = [
  "host_id",
  "name",
  "transport_mode",
  "connection",
  "endpoint",
  "ssh",
  "labels",
  "runner_token_env",
] as const;

/** An inventory field that neither v1 nor Loom knows, with the known name it is likely a typo of. */
export function unknownField(field: string, key: string, known: Iterable<string>, subject?: string): ItemFieldError {
  const near = nearest(key, known);
  return fieldError(
    field,
    `unknown field: neither v1 nor Loom reads it${near ? `; did you mean \`${near}\`?` : ""}`,
    "FieldUnknown",
    subject,
  );
}

/** The known name closest to `key` by edit distance, if it is close enough to be a typo of it. */
export function nearest(key: string, known: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestD = Infinity;
  for (const k of known) {
    const d = editDistance(key.toLowerCase(), k.toLowerCase());
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best !== undefined && bestD <= Math.max(1, Math.floor(Math.max(key.length, best.length) / 4))
    ? best
    : undefined;
}

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours each cost 1. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++) {
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.length][b.length];
}
