// One field's fault in an object, in the Kubernetes API's terms (StatusCause reasons).
/** A problem with one field. `field` is a dotted path with [i] for list items. */
export type FieldError = { field: string; message: string; reason: FieldReason };
export type FieldReason =
  | "FieldValueRequired"
  | "FieldValueInvalid"
  | "FieldValueNotSupported"
  | "FieldValueDuplicate"
  | "FieldValueTypeInvalid"
  | "FieldUnknown";
