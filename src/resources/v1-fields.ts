// Fields of a v1 document (inventory v1, manifest schema 1) that Loom does not act on. The
// v1 formats are read leniently: such a field is neither an error nor dropped. It is kept on
// the resource it belongs to, as JSON in one annotation (the CRDs stay strict for Loom's own
// resource form), and reported as a note so `loom validate` and `loom apply` show it.
import { type ItemFieldError, fieldError } from "./input-errors.ts";

export const V1_FIELDS_ANNOTATION = "loom.dev/v1-fields";

/** A kept field, reported in the file's own terms (`workers[0].rack`). */
export const keptNote = (field: string, where: string, subject?: string): ItemFieldError =>
  fieldError(field, `not used by Loom; kept ${where}`, "FieldUnknown", subject);

/** The annotation holding kept fields, or nothing when there are none. */
export function keptAnnotation(kept: Record<string, unknown>): Record<string, string> {
  return Object.keys(kept).length ? { [V1_FIELDS_ANNOTATION]: JSON.stringify(kept) } : {};
}
