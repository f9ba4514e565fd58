// The campaign manifest as v1 wrote it -> the manifest Loom's Campaign holds. v1 accepted
// more than Loom's Campaign form: `runs` for `cases`; a campaign-level `source`,
// `extensions`, `oracle` and `trajectory_export` (the lowest layer, below defaults);
// `artifacts` for `artifact_paths`; and any other key on defaults or a case, which became a
// `{key}` template value. This reader moves each of them to its Loom place (`vars` for the
// template values) so nothing is lost, and keeps what Loom does not act on in an annotation.
import { type ItemFieldError, isPlainObject } from "./input-errors.ts";
import { V1_FIELDS_ANNOTATION, keptAnnotation, keptNote } from "./v1-fields.ts";

type Obj = Record<string, unknown>;

/** Keys the v1 reader handles at the top level; the rest of MANIFEST_KEYS is Loom's own. */
const FOLDED_INTO_DEFAULTS = ["source", "oracle", "trajectory_export"] as const;

export type V1Manifest = { doc: Obj; notes: ItemFieldError[]; annotations: Record<string, string> };

/**
 * `caseKeys` are the keys Loom's manifest knows on a case (defaults know the same minus
 * task_id); `manifestKeys` the top-level ones. The input is not changed.
 */
export function readV1Manifest(input: Obj, manifestKeys: readonly string[], caseKeys: readonly string[]): V1Manifest {
  const notes: ItemFieldError[] = [];
  const kept: Obj = {};
  const doc: Obj = {};
  const defaults: Obj = isPlainObject(input.defaults) ? { ...input.defaults } : {};
  for (const [k, v] of Object.entries(input)) {
    if (manifestKeys.includes(k)) doc[k] = v;
    else if (k === "runs" || (FOLDED_INTO_DEFAULTS as readonly string[]).includes(k) || k === "extensions") continue;
    else {
      kept[k] = v;
      notes.push(keptNote(k, `on the Campaign (annotation ${V1_FIELDS_ANNOTATION})`));
    }
  }
  if (doc.cases === undefined && input.runs !== undefined) doc.cases = input.runs;
  for (const k of FOLDED_INTO_DEFAULTS) if (input[k] !== undefined && defaults[k] === undefined) defaults[k] = input[k];
  // Extensions merge by their top-level key, the campaign's below the defaults'.
  if (isPlainObject(input.extensions))
    defaults.extensions = { ...input.extensions, ...(isPlainObject(defaults.extensions) ? defaults.extensions : {}) };
  else if (input.extensions !== undefined && defaults.extensions === undefined) defaults.extensions = input.extensions;

  if (input.defaults !== undefined && !isPlainObject(input.defaults))
    doc.defaults = input.defaults; // Loom reports it
  else if (Object.keys(defaults).length) doc.defaults = layer(defaults, "defaults", caseKeys, notes);
  if (Array.isArray(doc.cases))
    doc.cases = doc.cases.map((c, i) => (isPlainObject(c) ? layer(c, `cases[${i}]`, caseKeys, notes) : c));
  return { doc, notes, annotations: keptAnnotation(kept) };
}

/** One defaults or case object: `artifacts` becomes `artifact_paths`; unknown keys become template values. */
function layer(src: Obj, at: string, known: readonly string[], notes: ItemFieldError[]): Obj {
  const out: Obj = {};
  const vars: Obj = isPlainObject(src.vars) ? { ...src.vars } : {};
  for (const [k, v] of Object.entries(src)) {
    if (known.includes(k)) out[k] = v;
    else if (k === "artifacts" && src.artifact_paths === undefined) out.artifact_paths = v;
    else {
      vars[k] = v;
      notes.push({
        field: `${at}.${k}`,
        message: `not a Loom field; kept as the template value {${k}} (${at}.vars.${k})`,
        reason: "FieldUnknown",
      });
    }
  }
  if (Object.keys(vars).length) out.vars = vars;
  return out;
}
