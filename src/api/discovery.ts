// API discovery, generated from the CRDs, so `kubectl` (and k9s) find Loom's resources:
// /version, /api, /api/v1, /apis and /apis/loom.dev/v1alpha1. Adding a kind to crds/ adds
// it here. Answers are the plain (non-aggregated) forms, which kubectl accepts.
import type { FastifyInstance } from "fastify";
import { API_VERSION, GROUP, VERSION, loadCrds } from "../resources/crds.ts";
import { PRODUCT_VERSION } from "./data.ts";

const WRITE_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"];

export function apiResourceList() {
  const resources: Record<string, unknown>[] = [];
  for (const crd of loadCrds().values()) {
    resources.push({
      name: crd.plural,
      singularName: crd.singular,
      namespaced: false,
      kind: crd.kind,
      verbs: WRITE_VERBS,
      shortNames: crd.shortNames,
      categories: ["loom", "all"],
    });
    if (crd.hasStatus)
      resources.push({
        name: `${crd.plural}/status`,
        singularName: "",
        namespaced: false,
        kind: crd.kind,
        verbs: ["get", "patch", "update"],
      });
  }
  // "ev" belongs to core v1 Events; a second "ev" here makes kubectl warn on every `get ev`.
  resources.push({
    name: "events",
    singularName: "event",
    namespaced: false,
    kind: "Event",
    verbs: ["get", "list", "watch"],
    shortNames: ["lev"],
  });
  return { kind: "APIResourceList", apiVersion: "v1", groupVersion: API_VERSION, resources };
}

export async function discoveryRoutes(f: FastifyInstance): Promise<void> {
  f.get("/version", async () => ({
    major: "1",
    minor: "32",
    gitVersion: `v1.32.0+loom-${PRODUCT_VERSION}`,
    gitCommit: "",
    gitTreeState: "clean",
    buildDate: "",
    goVersion: "",
    compiler: "node",
    platform: `${process.platform}/${process.arch}`,
  }));
  f.get("/api", async (req) => ({
    kind: "APIVersions",
    versions: ["v1"],
    serverAddressByClientCIDRs: [{ clientCIDR: "0.0.0.0/0", serverAddress: req.headers.host ?? "" }],
  }));
  f.get("/api/v1", async () => ({
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: "v1",
    resources: [
      {
        name: "events",
        singularName: "event",
        namespaced: false,
        kind: "Event",
        verbs: ["get", "list", "watch"],
        shortNames: ["ev"],
      },
    ],
  }));
  f.get("/apis", async () => ({
    kind: "APIGroupList",
    apiVersion: "v1",
    groups: [
      {
        name: GROUP,
        versions: [{ groupVersion: API_VERSION, version: VERSION }],
        preferredVersion: { groupVersion: API_VERSION, version: VERSION },
      },
    ],
  }));
  f.get(`/apis/${GROUP}`, async () => ({
    kind: "APIGroup",
    apiVersion: "v1",
    name: GROUP,
    versions: [{ groupVersion: API_VERSION, version: VERSION }],
    preferredVersion: { groupVersion: API_VERSION, version: VERSION },
  }));
  f.get(`/apis/${API_VERSION}`, async () => apiResourceList());
}
