// Object metadata and conditions, as the Kubernetes API conventions define them.

export type OwnerReference = { apiVersion: string; kind: string; name: string; uid: string; controller?: boolean };

export type ObjectMeta = {
  name: string;
  uid?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** The store revision of the last write to this object; opaque to clients. */
  resourceVersion?: string;
  /** Increases on every spec change; status.observedGeneration dates the status. */
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  /** What must happen before a deleted object goes (Kubernetes' finalizers: orphan, foregroundDeletion). */
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  /** Which field manager set which fields, recorded by server-side apply (fieldsV1). */
  managedFields?: ManagedFieldsEntry[];
};

export type ManagedFieldsEntry = {
  manager: string;
  operation: string;
  apiVersion: string;
  time: string;
  fieldsType: "FieldsV1";
  fieldsV1: Record<string, unknown>;
  subresource?: string;
};

/** What an Event can be about: any object with a kind and metadata. */
export type ObjectHead = { apiVersion: string; kind: string; metadata: ObjectMeta };

/** Something that happened to an object, recorded as an Event (reconciler/events.ts). */
export type LoomEvent = { object: ObjectHead; type: "Normal" | "Warning"; reason: string; message: string };

export type Resource<K extends string, S, St> = {
  apiVersion: "loom.dev/v1alpha1";
  kind: K;
  metadata: ObjectMeta;
  spec: S;
  status?: St;
};

export type ConditionStatus = "True" | "False" | "Unknown";
export type Condition = {
  type: string;
  status: ConditionStatus;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
  observedGeneration?: number;
};

/**
 * Set a condition in `list`. lastTransitionTime moves only when status flips; the return
 * value says whether anything changed, so callers write status only then. A changed
 * condition is replaced by a new object, never edited: a list copied with its array alone
 * (`[...conditions]`) still shares every condition that stays as it was with the stored
 * status, and validation skips what it shares.
 */
export function setCondition(list: Condition[], next: Omit<Condition, "lastTransitionTime">, now: string): boolean {
  const i = list.findIndex((c) => c.type === next.type);
  if (i < 0) {
    list.push({ ...next, lastTransitionTime: now });
    return true;
  }
  const cur = list[i];
  const changed = (["status", "reason", "message", "observedGeneration"] as const).some((f) => cur[f] !== next[f]);
  if (!changed) return false;
  list[i] = { ...cur, ...next, lastTransitionTime: cur.status !== next.status ? now : cur.lastTransitionTime };
  return true;
}

export function getCondition(list: Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}
