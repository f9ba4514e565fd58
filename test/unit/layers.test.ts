// Dependencies point inward (DESIGN.md §2b): a file may import from its own room and from
// rooms below it, never from a room above. The rooms, lowest first:
//   leaves with no Loom imports (version, security, tls, results), then resources (kinds,
//   schemas, files -> resources), admission (decisions; only resources below it), protocol
//   (the wire types, their schemas and parsers), store,
//   scheduler (claims and transitions), reconciler (controllers), gitops (file sync),
//   observability, roles (leadership), api, runner (the agent), hub.ts (the composition
//   root) and cli (which starts a Hub or a Runner).
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

export const ROOMS = ["version", "security", "tls", "results", "resources", "admission", "protocol", "store", "scheduler", "reconciler", "gitops", "observability", "roles", "api", "runner", "hub", "cli"] as const;

/** The room of a path relative to src/: its first folder, or the file's name for a file at the top. */
export function roomOf(path: string): string {
  const [first, ...rest] = path.split("/");
  return rest.length ? first : first.replace(/\.ts$/, "");
}

/** Every module a source text imports, re-exports or loads dynamically (type-only imports included). */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  const re = /\b(?:import|export)\b[^'";]*?\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s+["']([^"']+)["']/gm;
  for (const m of text.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

/** "file imports target": one line per import that goes up, or that leaves or enters an unlisted room. */
export function layerViolations(files: ReadonlyMap<string, string>, rooms: readonly string[]): string[] {
  const rank = new Map(rooms.map((r, i) => [r, i]));
  const out: string[] = [];
  for (const [file, text] of files) {
    const from = roomOf(file);
    if (!rank.has(from)) {
      out.push(`${file} is in no listed room (${from})`);
      continue;
    }
    for (const spec of importsOf(text)) {
      if (!spec.startsWith(".")) continue;
      const target = posix.normalize(posix.join(posix.dirname(file), spec));
      if (target.startsWith("..")) {
        out.push(`${file} imports ${spec}, outside src`);
        continue;
      }
      const to = roomOf(target);
      if (!rank.has(to)) out.push(`${file} imports ${target}, in no listed room (${to})`);
      else if (rank.get(to)! > rank.get(from)!) out.push(`${file} (${from}) imports ${target} (${to}, a room above)`);
    }
  }
  return out;
}

function sourceFiles(root: string): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) files.set(relative(root, p).split("\\").join("/"), readFileSync(p, "utf8"));
    }
  };
  walk(root);
  return files;
}

describe("layering", () => {
  it("finds imports that go up, however they are written", () => {
    const files = new Map([
      ["admission/decide.ts", 'import { x } from "../resources/types.ts";\nimport type { Store } from "../store/store.ts";'],
      ["resources/load.ts", 'export { y } from "./ids.ts";\nconst m = await import("../api/app.ts");'],
      ["api/app.ts", 'import type {\n  Hub,\n} from "../hub.ts";\nimport "node:fs";'],
      ["hub.ts", 'import { app } from "./api/app.ts";'],
      ["cli/main.ts", 'import { Hub } from "../hub.ts";\nimport { z } from "../../bench/x.ts";'],
      ["mystery/x.ts", ""],
    ]);
    expect(layerViolations(files, ROOMS)).toEqual([
      "admission/decide.ts (admission) imports store/store.ts (store, a room above)",
      "resources/load.ts (resources) imports api/app.ts (api, a room above)",
      "api/app.ts (api) imports hub.ts (hub, a room above)",
      "cli/main.ts imports ../../bench/x.ts, outside src",
      "mystery/x.ts is in no listed room (mystery)",
    ]);
  });

  it("no file in src imports from a room above it", () => {
    const src = join(dirname(fileURLToPath(import.meta.url)), "../../src");
    const files = sourceFiles(src);
    expect(files.size).toBeGreaterThan(50);
    expect(layerViolations(files, ROOMS)).toEqual([]);
  });
});
