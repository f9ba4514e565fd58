// fastify response schemas from the protocol's reply schemas, for the replies whose shape
// is fixed. The serializer writes the fields a schema names (and, where it says
// `additionalProperties`, the rest as JSON.stringify would); `required` is the types'
// business and is left out, so a reply never fails to serialise over a missing field.
import { REPLIES } from "../protocol/schemas.ts";
import type { JSONSchema } from "../resources/crds.ts";

function forSerializer(s: JSONSchema): JSONSchema {
  const { required: _r, description: _d, "x-ts-type": _t, ...rest } = s;
  const out: JSONSchema = { ...rest };
  if (s.properties)
    out.properties = Object.fromEntries(Object.entries(s.properties).map(([k, v]) => [k, forSerializer(v)]));
  if (s.items) out.items = forSerializer(s.items);
  if (s.additionalProperties && typeof s.additionalProperties === "object")
    out.additionalProperties = forSerializer(s.additionalProperties);
  return out;
}

/** Route options that serialise the replies of `name` with these statuses (200 when none is given) through its schema. */
export function replySchema(name: keyof typeof REPLIES, ...statuses: number[]) {
  const schema = forSerializer(REPLIES[name]);
  return { schema: { response: Object.fromEntries((statuses.length ? statuses : [200]).map((s) => [s, schema])) } };
}
