// Generates src/protocol/types.gen.ts from the wire schemas (schemas.ts), the way
// resources/gen-types.ts generates the resource types from the CRDs. `npm run gen:types`
// rewrites both; a test fails when the committed file is out of date. The file imports
// nothing but types, so the web view compiles it as it is.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { typeEmitter } from "../resources/gen-types.ts";
import type { JSONSchema } from "../resources/crds.ts";
import { REPLIES, REPLY_TYPES, REQUESTS, REQUEST_TYPES, SHARED } from "./schemas.ts";

/** Types a schema names by `x-ts-type` that live elsewhere, with where. */
const EXTERNAL: Record<string, string> = { QueueExplanation: "../resources/queue-explanation.ts" };

export function generateProtocolTypes(): string {
  const { typeOf, decls } = typeEmitter({
    external: (s: JSONSchema) => (typeof s["x-ts-type"] === "string" ? s["x-ts-type"] : undefined),
  });
  const alias = (name: string, s: JSONSchema) => {
    const t = typeOf(s, name);
    if (t !== name) decls.push(`export type ${name} = ${t};`);
  };
  for (const [name, s] of Object.entries(SHARED)) alias(name, s);
  for (const [k, s] of Object.entries(REQUESTS)) alias(REQUEST_TYPES[k as keyof typeof REQUESTS], s);
  for (const [k, s] of Object.entries(REPLIES)) alias(REPLY_TYPES[k as keyof typeof REPLIES], s);
  // Each checked request's name -> its type, for checkRequest's answer (errors.ts).
  const names = Object.entries(REQUEST_TYPES).map(([k, t]) => `  ${JSON.stringify(k)}: ${t};`);
  decls.push(`/** A request's schema name -> its type. */\nexport interface RequestTypes {\n${names.join("\n")}\n}`);
  const imports = Object.entries(EXTERNAL).map(([t, from]) => `import type { ${t} } from "${from}";`);
  return [
    "// Generated from src/protocol/schemas.ts by src/protocol/gen.ts. Do not edit: run `npm run gen:types`.",
    ...imports,
    "",
    decls.join("\n\n"),
    "",
  ].join("\n");
}

export const PROTOCOL_TYPES_PATH = join(import.meta.dirname ?? ".", "types.gen.ts");

if (process.argv[1] && process.argv[1].endsWith("gen.ts")) {
  writeFileSync(PROTOCOL_TYPES_PATH, generateProtocolTypes());
  console.log(`wrote ${PROTOCOL_TYPES_PATH}`);
}
