// `kubectl explain` reads the CRDs: every field must say what it means (its unit and default
// where it has them). A field added without a description fails here, naming it.
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";

const CRDS = join(import.meta.dirname, "..", "..", "crds");
type Schema = {
  description?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: Schema | boolean;
};

/** Every named field under a schema, with its path; array items and map values pass their fields on. */
function fields(s: Schema, path: string, out: [string, Schema][] = []): [string, Schema][] {
  for (const [k, v] of Object.entries(s.properties ?? {})) {
    out.push([`${path}${path ? "." : ""}${k}`, v]);
    fields(v, `${path}${path ? "." : ""}${k}`, out);
  }
  if (s.items) fields(s.items, `${path}[]`, out);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    fields(s.additionalProperties, `${path}{}`, out);
  return out;
}

describe("CRD field descriptions", () => {
  for (const file of readdirSync(CRDS).filter((f) => f.endsWith(".yaml"))) {
    it(`${file}: every field has a description`, () => {
      const crd = parse(readFileSync(join(CRDS, file), "utf8")) as {
        spec: { versions: { name: string; schema: { openAPIV3Schema: Schema } }[] };
      };
      for (const v of crd.spec.versions) {
        const all = fields(v.schema.openAPIV3Schema, "");
        expect(all.length).toBeGreaterThan(10);
        const missing = all
          .filter(([, s]) => typeof s.description !== "string" || s.description.trim().length < 8)
          .map(([p]) => p);
        expect(missing, `${file} ${v.name}: fields without a description`).toEqual([]);
      }
    });
  }
});
