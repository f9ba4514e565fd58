// OpenAPI v3 for Loom's group, generated from the CRDs, as an API server publishes it:
// `kubectl apply` reads it to learn that the server validates fields itself (the
// `fieldValidation` parameter on PATCH), and `kubectl explain` reads the schemas. Loom
// always validates strictly against the same compiled CRD schemas, whatever the parameter says.
import { createHash } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { API_VERSION, GROUP, VERSION, loadCrds } from "../resources/crds.ts";

const schemaName = (kind: string) => `dev.loom.${VERSION}.${kind}`;
const gvk = (kind: string) => ({ group: GROUP, version: VERSION, kind });
const query = (name: string, description: string) => ({
  name,
  in: "query",
  description,
  schema: { type: "string", uniqueItems: true },
});
const ok = (kind: string) => ({
  "200": {
    description: "OK",
    content: { "application/json": { schema: { $ref: `#/components/schemas/${schemaName(kind)}` } } },
  },
});

export function openApiDocument() {
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  for (const crd of loadCrds().values()) {
    const item = `/apis/${API_VERSION}/${crd.plural}/{name}`;
    const common = { "x-kubernetes-group-version-kind": gvk(crd.kind) };
    const writeParams = [
      query("dryRun", "not supported; Loom applies writes"),
      query(
        "fieldManager",
        "who makes the write; required by server-side apply, which records the fields each manager applied in metadata.managedFields",
      ),
      query("force", "server-side apply: take over fields another manager owns instead of answering Conflict"),
      query("fieldValidation", "Loom always validates strictly against the CRD schema"),
    ];
    paths[`/apis/${API_VERSION}/${crd.plural}`] = {
      get: {
        ...common,
        operationId: `list${crd.kind}`,
        "x-kubernetes-action": "list",
        parameters: [
          query("labelSelector", "label selector"),
          query("fieldSelector", "field selector"),
          query("watch", "watch for changes"),
          query("resourceVersion", "revision to list or watch from"),
        ],
        responses: ok(crd.kind),
      },
      post: {
        ...common,
        operationId: `create${crd.kind}`,
        "x-kubernetes-action": "post",
        parameters: writeParams,
        responses: ok(crd.kind),
      },
    };
    paths[item] = {
      parameters: [
        {
          name: "name",
          in: "path",
          required: true,
          description: `name of the ${crd.kind}`,
          schema: { type: "string" },
        },
      ],
      get: { ...common, operationId: `read${crd.kind}`, "x-kubernetes-action": "get", responses: ok(crd.kind) },
      put: {
        ...common,
        operationId: `replace${crd.kind}`,
        "x-kubernetes-action": "put",
        parameters: writeParams,
        responses: ok(crd.kind),
      },
      patch: {
        ...common,
        operationId: `patch${crd.kind}`,
        "x-kubernetes-action": "patch",
        parameters: writeParams,
        responses: ok(crd.kind),
      },
      delete: { ...common, operationId: `delete${crd.kind}`, "x-kubernetes-action": "delete", responses: ok(crd.kind) },
    };
    if (crd.hasStatus)
      paths[`${item}/status`] = {
        parameters: [{ name: "name", in: "path", required: true, schema: { type: "string" } }],
        get: { ...common, operationId: `read${crd.kind}Status`, "x-kubernetes-action": "get", responses: ok(crd.kind) },
        patch: {
          ...common,
          operationId: `patch${crd.kind}Status`,
          "x-kubernetes-action": "patch",
          parameters: writeParams,
          responses: ok(crd.kind),
        },
      };
    schemas[schemaName(crd.kind)] = { ...crd.schema, "x-kubernetes-group-version-kind": [gvk(crd.kind)] };
  }
  return { openapi: "3.0.0", info: { title: "Loom", version: VERSION }, paths, components: { schemas } };
}

export async function openApiRoutes(f: FastifyInstance): Promise<void> {
  const doc = JSON.stringify(openApiDocument());
  const hash = createHash("sha256").update(doc).digest("hex").slice(0, 32).toUpperCase();
  f.get("/openapi/v3", async () => ({
    paths: { [`apis/${API_VERSION}`]: { serverRelativeURL: `/openapi/v3/apis/${API_VERSION}?hash=${hash}` } },
  }));
  f.get(`/openapi/v3/apis/${API_VERSION}`, async (_req, reply) =>
    reply.header("content-type", "application/json").send(doc),
  );
}
