// Store errors are data: each carries a Kubernetes Status reason, and Invalid carries
// every field cause, so the API and the CLI can report them without parsing strings.
import type { FieldError } from "../resources/validate.ts";

export type StatusReason =
  "NotFound" | "AlreadyExists" | "Conflict" | "Invalid" | "Gone" | "BadRequest" | "RequestEntityTooLarge";

export class StoreError extends Error {
  constructor(
    readonly reason: StatusReason,
    readonly code: number,
    message: string,
    readonly causes: FieldError[] = [],
  ) {
    super(message);
    this.name = `${reason}Error`;
  }
}

export const notFound = (kind: string, name: string) =>
  new StoreError("NotFound", 404, `${kind.toLowerCase()} "${name}" not found`);
export const alreadyExists = (kind: string, name: string) =>
  new StoreError("AlreadyExists", 409, `${kind.toLowerCase()} "${name}" already exists`);
export const conflict = (
  kind: string,
  name: string,
  detail = "the object has been modified; read it again and retry",
) => new StoreError("Conflict", 409, `${kind.toLowerCase()} "${name}": ${detail}`);
export const invalid = (kind: string, name: string, causes: FieldError[]) =>
  new StoreError(
    "Invalid",
    422,
    `${kind} "${name}" is invalid: ${causes.map((c) => `${c.field}: ${c.message}`).join("; ")}`,
    causes,
  );
export const gone = (from: number, oldest?: number) =>
  new StoreError(
    "Gone",
    410,
    `too old resource version: ${from}${oldest === undefined ? " (compacted)" : ` (oldest available is ${oldest})`}; list again and watch from the new revision`,
  );

export const tooLarge = (message: string) => new StoreError("RequestEntityTooLarge", 413, message);

export const isStoreError = (e: unknown, reason?: StatusReason): e is StoreError =>
  e instanceof StoreError && (reason === undefined || e.reason === reason);
