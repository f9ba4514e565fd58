// Field selectors (`status.state=queued,spec.campaign_id!=c1`) and the one predicate the list
// and watch handlers filter with (label selector AND field selector). Like the API server,
// each kind serves a fixed table of selectable fields; naming any other field is a 400, never
// an empty answer, so a typo cannot look like "nothing matches".
import { labelSelectorMatcher } from "../store/labels.ts";
import type { StoredObject } from "../store/store.ts";
import { badRequest } from "./status.ts";

export type FieldRequirement = { field: string; op: "=" | "!="; value: string };
type FieldReader = (o: any) => unknown;

// Loom's objects are cluster-scoped: metadata.namespace always reads "", which is what
// kubectl sends for them (`involvedObject.namespace=` in describe's event search).
const COMMON: Record<string, FieldReader> = {
  "metadata.name": (o) => o.metadata?.name,
  "metadata.namespace": (o) => o.metadata?.namespace,
};

/** Per kind, the selectable fields and how to read them; a missing value reads as "". */
const FIELDS: Record<string, Record<string, FieldReader>> = {
  Worker: { "spec.unschedulable": (o) => o.spec?.unschedulable === true },
  Task: {
    "status.state": (o) => o.status?.state,
    "status.lease.worker": (o) => o.status?.lease?.worker,
    "spec.campaign_id": (o) => o.spec?.campaign_id,
  },
  Campaign: { "spec.campaign_id": (o) => o.spec?.campaign_id },
  Event: {
    "involvedObject.kind": (o) => o.involvedObject?.kind,
    "involvedObject.name": (o) => o.involvedObject?.name,
    "involvedObject.uid": (o) => o.involvedObject?.uid,
    "involvedObject.apiVersion": (o) => o.involvedObject?.apiVersion,
    "involvedObject.namespace": (o) => o.involvedObject?.namespace,
    reason: (o) => o.reason,
    type: (o) => o.type,
  },
};

export const selectableFields = (kind: string): string[] => Object.keys({ ...COMMON, ...FIELDS[kind] });

/** Split on an unescaped separator; `\` escapes the next character (as kubectl writes `a=x\,y`). */
function splitUnescaped(s: string, sep: string): string[] {
  const out: string[] = [];
  let cur = "";
  for (let i = 0; i < s.length; i++) {
    if (s[i] === "\\" && i + 1 < s.length) cur += s[i] + s[++i];
    else if (s[i] === sep) {
      out.push(cur);
      cur = "";
    } else cur += s[i];
  }
  out.push(cur);
  return out;
}

const unescape = (s: string) => s.replace(/\\(.)/g, "$1");

/** `field<op>value` split at the first unescaped operator, in one pass (no backtracking regex). */
function splitTerm(term: string): { field: string; op: "=" | "!="; value: string } | undefined {
  for (let i = 0; i < term.length; i++) {
    const c = term[i];
    if (c === "\\") i++;
    else if (c === "!")
      return term[i + 1] === "="
        ? { field: term.slice(0, i).trimEnd(), op: "!=", value: term.slice(i + 2).trimStart() }
        : undefined;
    else if (c === "=")
      return {
        field: term.slice(0, i).trimEnd(),
        op: "=",
        value: term.slice(i + (term[i + 1] === "=" ? 2 : 1)).trimStart(),
      };
  }
  return undefined;
}

export function parseFieldSelector(selector: string): FieldRequirement[] {
  if (selector.trim() === "") return [];
  return splitUnescaped(selector, ",").map((term) => {
    const m = splitTerm(term.trim());
    if (!m || m.field === "")
      throw badRequest(
        `invalid field selector "${selector.slice(0, 200)}": "${term.slice(0, 200)}" is not field=value, field==value or field!=value`,
        "fieldSelector",
      );
    return { field: unescape(m.field), op: m.op, value: unescape(m.value) };
  });
}

export function fieldSelectorMatcher(kind: string, selector: string | undefined): (obj: StoredObject) => boolean {
  const reqs = parseFieldSelector(selector ?? "");
  if (reqs.length === 0) return () => true;
  const table = { ...COMMON, ...FIELDS[kind] };
  const checks = reqs.map((r) => {
    const read = table[r.field];
    if (!read)
      throw badRequest(
        `field selector "${r.field}" is not supported for ${kind}; supported: ${Object.keys(table).join(", ")}`,
        "fieldSelector",
      );
    return (o: StoredObject) => (String(read(o) ?? "") === r.value) === (r.op === "=");
  });
  return (o) => checks.every((c) => c(o));
}

/** One predicate for `labelSelector` and `fieldSelector`; `filtered` is false when both are empty. */
export function objectMatcher(
  kind: string,
  q: { labelSelector?: string; fieldSelector?: string },
): { matches: (obj: StoredObject) => boolean; filtered: boolean } {
  const labels = labelSelectorMatcher(q.labelSelector);
  const fields = fieldSelectorMatcher(kind, q.fieldSelector);
  const filtered = Boolean(q.labelSelector?.trim() || q.fieldSelector?.trim());
  return { matches: (o) => labels(o.metadata?.labels) && fields(o), filtered };
}
