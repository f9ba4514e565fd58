// Generates src/resources/types.gen.ts from the CRD schemas, so the TypeScript types
// and the validators come from one definition. `npm run gen:types` rewrites the file;
// a test fails when the committed file is out of date.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { type JSONSchema, loadCrds } from "./crds.ts";

export const pascal = (s: string) =>
  s
    .split(/[^A-Za-z0-9]+/)
    .filter(Boolean)
    .map((w) => w[0].toUpperCase() + w.slice(1))
    .join("");

/**
 * Turns JSON schemas into TypeScript declarations. An object shape met twice (a YAML anchor,
 * a message reused inside another) becomes one interface, named where it is first met.
 */
export function typeEmitter(opts: { external?: (s: JSONSchema) => string | undefined } = {}) {
  const decls: string[] = [];
  const byShape = new Map<string, string>(); // structure -> interface name

  const typeOf = (s: JSONSchema, name: string): string => {
    const t = baseType(s, name);
    return s.nullable ? `${wrap(t)} | null` : t;
  };
  const baseType = (s: JSONSchema, name: string): string => {
    const external = opts.external?.(s);
    if (external) return external;
    if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(" | ");
    if (s["x-kubernetes-int-or-string"]) return "number | string";
    switch (s.type) {
      case "string":
        return "string";
      case "integer":
      case "number":
        return "number";
      case "boolean":
        return "boolean";
      case "array":
        return `${wrap(typeOf(s.items ?? {}, name + "Item"))}[]`;
      case "object": {
        if (!s.properties) {
          if (s.additionalProperties && typeof s.additionalProperties === "object")
            return `Record<string, ${typeOf(s.additionalProperties, name + "Value")}>`;
          return "Record<string, unknown>";
        }
        const req = new Set(s.required ?? []);
        const body = Object.entries(s.properties).map(([k, v]) => {
          const doc = v.description ? `  /** ${v.description} */\n` : "";
          return `${doc}  ${k}${req.has(k) ? "" : "?"}: ${typeOf(v, name + pascal(k))};`;
        });
        if (s["x-kubernetes-preserve-unknown-fields"] || s.additionalProperties === true)
          body.push("  [key: string]: unknown;");
        const shape = body.join("\n");
        const existing = byShape.get(shape);
        if (existing) return existing;
        byShape.set(shape, name);
        decls.push(`${s.description ? `/** ${s.description} */\n` : ""}export interface ${name} {\n${shape}\n}`);
        return name;
      }
      default:
        return "unknown";
    }
  };
  const wrap = (t: string) => (t.includes("|") ? `(${t})` : t);
  return { typeOf, decls };
}

export function generateTypes(): string {
  const { typeOf, decls } = typeEmitter();
  const kinds: string[] = [];
  for (const crd of loadCrds().values()) {
    const props = crd.schema.properties ?? {};
    const spec = props.spec ? typeOf(props.spec, `${crd.kind}Spec`) : "Record<string, unknown>";
    const status = props.status ? typeOf(props.status, `${crd.kind}Status`) : "Record<string, unknown>";
    decls.push(`export type ${crd.kind} = Resource<"${crd.kind}", ${spec}, ${status}>;`);
    kinds.push(crd.kind);
  }
  return [
    "// Generated from crds/*.yaml by src/resources/gen-types.ts. Do not edit: run `npm run gen:types`.",
    'import type { Resource } from "./meta.ts";',
    "",
    decls.join("\n\n"),
    "",
    `export const KINDS = ${JSON.stringify(kinds)} as const;`,
    "export type Kind = (typeof KINDS)[number];",
    `export type AnyResource = ${kinds.join(" | ")};`,
    "",
  ].join("\n");
}

export const GENERATED_PATH = join(import.meta.dirname ?? ".", "types.gen.ts");

if (process.argv[1] && process.argv[1].endsWith("gen-types.ts")) {
  writeFileSync(GENERATED_PATH, generateTypes());
  console.log(`wrote ${GENERATED_PATH}`);
}
