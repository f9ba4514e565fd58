// Errors for input files. A FieldError names a field; an input error also names the file,
// the line when known, and the item it belongs to (a worker id, a task id, Kind/name),
// so one report can cover many files and every problem in them at once.
import { type FieldError, type FieldReason, ValidationError } from "./validate.ts";

/** A FieldError that also names the item (worker, case, resource) it is about. */
export type ItemFieldError = FieldError & { subject?: string; line?: number };

/** An ItemFieldError located in a file. `field` is a path in the file's own terms. */
export type InputError = ItemFieldError & { source: string };

export function fieldError(
  field: string,
  message: string,
  reason: FieldReason = "FieldValueInvalid",
  subject?: string,
): ItemFieldError {
  return subject === undefined ? { field, message, reason } : { field, message, reason, subject };
}

/** Replace the leading `from` of a field path with `to` ("spec.x" -> "workers[2].x"). */
export function rebaseField(field: string, from: string, to: string): string | undefined {
  if (from === "") return to === "" ? field : field === "" ? to : field.startsWith("[") ? to + field : `${to}.${field}`;
  if (field === from) return to;
  const rest = field.startsWith(from + ".")
    ? field.slice(from.length + 1)
    : field.startsWith(from + "[")
      ? field.slice(from.length)
      : undefined;
  if (rest === undefined) return undefined;
  if (to === "") return rest;
  return rest.startsWith("[") ? to + rest : `${to}.${rest}`;
}

/** Prefix every field (e.g. "spec." for errors found inside a Campaign's spec). */
export function prefixErrors<T extends FieldError>(errs: T[], prefix: string): T[] {
  if (!prefix) return errs;
  return errs.map((e) => ({
    ...e,
    field: e.field === "" ? prefix : e.field.startsWith("[") ? prefix + e.field : `${prefix}.${e.field}`,
  }));
}

export function withSource(source: string, errs: ItemFieldError[]): InputError[] {
  return errs.map((e) => ({ ...e, source }));
}

/** Drop repeats (a defaults problem seen through every case is reported once). */
export function dedupeErrors<T extends ItemFieldError & { source?: string }>(errs: T[]): T[] {
  const seen = new Set<string>();
  return errs.filter((e) => {
    const k = [e.source ?? "", e.field, e.message, e.subject ?? ""].join("\0");
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** "workers[2].resource_capacity.cpu_millis" + "evaluation-01" -> "workers[2] (evaluation-01).resource_capacity.cpu_millis" */
export function locateField(field: string, subject?: string): string {
  if (!subject) return field;
  const m = /^([^[]*\[\d+\])(.*)$/.exec(field);
  if (m) return `${m[1]} (${subject})${m[2]}`;
  return field ? `${subject}: ${field}` : subject;
}

/** `file:line: path: message`; the line and path are left out when unknown or empty. */
export function formatInputError(e: InputError | ItemFieldError): string {
  const src =
    "source" in e && e.source ? `${e.source}${e.line ? `:${e.line}` : ""}: ` : e.line ? `line ${e.line}: ` : "";
  const at = locateField(e.field, e.subject);
  return `${src}${at ? `${at}: ` : ""}${e.message}`;
}

export function formatInputErrors(errs: (InputError | ItemFieldError)[]): string[] {
  return errs.map(formatInputError);
}

/** Thrown by callers that want an exception; carries every input error, formatted one per line. */
export class InputValidationError extends ValidationError {
  constructor(readonly inputErrors: InputError[]) {
    super(inputErrors);
    this.message = formatInputErrors(inputErrors).join("\n");
    this.name = "InputValidationError";
  }
}

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);
