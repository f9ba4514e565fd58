// Dependencies point inward (docs/architecture.md, "The rooms"): a file may import from its own room and from
// rooms below it, never from a room above. The rooms, lowest first:
//   leaves with no Loom imports (version, security, tls, results), then resources (kinds,
//   schemas, files -> resources), admission (decisions; only resources below it), protocol
//   (the wire types, their schemas and parsers), store,
//   scheduler (claims and transitions), reconciler (controllers), gitops (file sync),
//   observability, roles (leadership), api, runner (the agent), hub.ts (the composition
//   root), cli (which starts a Hub or a Runner) and, on top, ui/ (the web view, built apart).
// And no module imports itself through others, even inside one room: every import graph
// of src/ and ui/src/ is a tree that can be read from the leaves up.
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, posix, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

export const ROOMS = [
  "version",
  "security",
  "tls",
  "results",
  "resources",
  "admission",
  "protocol",
  "store",
  "scheduler",
  "reconciler",
  "gitops",
  "observability",
  "roles",
  "api",
  "runner",
  "hub",
  "cli",
  "ui",
] as const;

/**
 * The room of a path relative to the repository: `ui` for the web view's sources; under
 * src/, its first folder, or the file's name for a file at the top; undefined elsewhere.
 */
export function roomOf(path: string): string | undefined {
  if (path.startsWith("ui/src/")) return "ui";
  if (!path.startsWith("src/")) return undefined;
  const [first, ...rest] = path.slice("src/".length).split("/");
  return rest.length ? first : first.replace(/\.ts$/, "");
}

/** The repository path an import names, when it is a relative import (a package import is undefined). */
function targetOf(file: string, spec: string): string | undefined {
  return spec.startsWith(".") ? posix.normalize(posix.join(posix.dirname(file), spec)) : undefined;
}

/** Every module a source text imports, re-exports or loads dynamically (type-only imports included). */
export function importsOf(text: string): string[] {
  const out: string[] = [];
  const re =
    /\b(?:import|export)\b[^'";]*?\bfrom\s*["']([^"']+)["']|\bimport\s*\(\s*["']([^"']+)["']\s*\)|^\s*import\s+["']([^"']+)["']/gm;
  for (const m of text.matchAll(re)) out.push(m[1] ?? m[2] ?? m[3]);
  return out;
}

/** "file imports target": one line per import that goes up, or that leaves or enters an unlisted room. */
export function layerViolations(files: ReadonlyMap<string, string>, rooms: readonly string[]): string[] {
  const rank = new Map(rooms.map((r, i) => [r, i]));
  const out: string[] = [];
  for (const [file, text] of files) {
    const from = roomOf(file);
    if (from === undefined || !rank.has(from)) {
      out.push(`${file} is in no listed room (${from})`);
      continue;
    }
    for (const spec of importsOf(text)) {
      const target = targetOf(file, spec);
      if (target === undefined) continue;
      const to = roomOf(target);
      if (to === undefined) out.push(`${file} imports ${spec}, outside src and ui`);
      else if (!rank.has(to)) out.push(`${file} imports ${target}, in no listed room (${to})`);
      else if (rank.get(to)! > rank.get(from)!) out.push(`${file} (${from}) imports ${target} (${to}, a room above)`);
    }
  }
  return out;
}

/**
 * Modules private to their folder: the scheduler's shared context is handed to nothing
 * outside scheduler/ (the controllers get ControllerServices, the API the Scheduler).
 */
export const PRIVATE: ReadonlyMap<string, string> = new Map([["src/scheduler/context.ts", "src/scheduler/"]]);

/** "file imports target": one line per import of a private module from outside its folder. */
export function privateImports(
  files: ReadonlyMap<string, string>,
  priv: ReadonlyMap<string, string> = PRIVATE,
): string[] {
  const out: string[] = [];
  for (const [file, text] of files) {
    for (const spec of importsOf(text)) {
      const target = targetOf(file, spec);
      const inside = target === undefined ? undefined : priv.get(target);
      if (inside !== undefined && !file.startsWith(inside)) out.push(`${file} imports ${target}, private to ${inside}`);
    }
  }
  return out;
}

/**
 * Every import cycle among `files`, one per strongly connected group, as the path
 * "a -> b -> a" from the group's first file (type-only and dynamic imports count: a
 * cycle of types is still two modules that cannot be read apart).
 */
export function importCycles(files: ReadonlyMap<string, string>): string[] {
  const graph = new Map<string, string[]>();
  for (const [file, text] of files) {
    const targets = importsOf(text)
      .map((spec) => targetOf(file, spec))
      .filter((t): t is string => t !== undefined && files.has(t));
    graph.set(file, [...new Set(targets)]);
  }
  // Tarjan's strongly connected components, iteratively deep enough for any tree here.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const groups: string[][] = [];
  const visit = (v: string) => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const group: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      group.push(w);
    } while (w !== v);
    if (group.length > 1 || graph.get(v)!.includes(v)) groups.push(group.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return groups
    .sort((a, b) => (a[0] < b[0] ? -1 : 1))
    .map((group) => cyclePath(group[0], new Set(group), graph).join(" -> "));
}

/** The shortest way from `start` back to itself inside its group (breadth first). */
function cyclePath(start: string, group: ReadonlySet<string>, graph: ReadonlyMap<string, string[]>): string[] {
  const via = new Map<string, string>();
  const todo = [start];
  for (let i = 0; i < todo.length; i++) {
    for (const w of graph.get(todo[i])!) {
      if (!group.has(w)) continue;
      if (w === start) {
        const path: string[] = [];
        for (let x = todo[i]; x !== start; x = via.get(x)!) path.unshift(x);
        return [start, ...path, start];
      }
      if (!via.has(w)) {
        via.set(w, todo[i]);
        todo.push(w);
      }
    }
  }
  return [start, start];
}

/** The .ts files under each of `dirs` (relative to `root`), by their path from `root`. */
function sourceFiles(root: string, dirs: readonly string[]): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith(".ts")) files.set(relative(root, p).split("\\").join("/"), readFileSync(p, "utf8"));
    }
  };
  for (const d of dirs) walk(join(root, d));
  return files;
}

const repo = join(dirname(fileURLToPath(import.meta.url)), "../..");

describe("layering", () => {
  it("finds imports that go up, however they are written", () => {
    const files = new Map([
      [
        "src/admission/decide.ts",
        'import { x } from "../resources/types.ts";\nimport type { Store } from "../store/store.ts";',
      ],
      ["src/resources/load.ts", 'export { y } from "./ids.ts";\nconst m = await import("../api/app.ts");'],
      ["src/api/app.ts", 'import type {\n  Hub,\n} from "../hub.ts";\nimport "node:fs";'],
      ["src/hub.ts", 'import { app } from "./api/app.ts";'],
      ["src/cli/main.ts", 'import { Hub } from "../hub.ts";\nimport { z } from "../../bench/x.ts";'],
      ["src/cli/top.ts", 'import { draw } from "../../ui/src/charts.ts";'],
      [
        "ui/src/views/task.ts",
        'import type { TaskAdmission } from "../../../src/cli/data-api.ts";\nimport { h } from "../dom.ts";',
      ],
      ["src/mystery/x.ts", ""],
    ]);
    expect(layerViolations(files, ROOMS)).toEqual([
      "src/admission/decide.ts (admission) imports src/store/store.ts (store, a room above)",
      "src/resources/load.ts (resources) imports src/api/app.ts (api, a room above)",
      "src/api/app.ts (api) imports src/hub.ts (hub, a room above)",
      "src/cli/main.ts imports ../../bench/x.ts, outside src and ui",
      "src/cli/top.ts (cli) imports ui/src/charts.ts (ui, a room above)",
      "src/mystery/x.ts is in no listed room (mystery)",
    ]);
  });

  it("finds import cycles, inside a room and across rooms, whatever kind of import closes them", () => {
    const files = new Map([
      ["src/scheduler/context.ts", 'import { NOMINATED } from "./nomination.ts";\nimport { q } from "./queue.ts";'],
      ["src/scheduler/nomination.ts", 'import type { Ctx } from "./context.ts";'],
      ["src/scheduler/queue.ts", 'import { heap } from "../admission/heap.ts";'],
      ["src/admission/heap.ts", ""],
      ["src/cli/main.ts", 'const c = await import("./completion.ts");'],
      ["src/cli/completion.ts", 'import { x } from "./words.ts";'],
      ["src/cli/words.ts", 'export { buildProgram } from "./main.ts";'],
      ["src/tls/self.ts", 'import "./self.ts";'],
      ["ui/src/a.ts", 'import { b } from "./b.ts";'],
      ["ui/src/b.ts", 'import { a } from "./a.ts";'],
    ]);
    expect(importCycles(files)).toEqual([
      "src/cli/completion.ts -> src/cli/words.ts -> src/cli/main.ts -> src/cli/completion.ts",
      "src/scheduler/context.ts -> src/scheduler/nomination.ts -> src/scheduler/context.ts",
      "src/tls/self.ts -> src/tls/self.ts",
      "ui/src/a.ts -> ui/src/b.ts -> ui/src/a.ts",
    ]);
    files.set("src/scheduler/nomination.ts", 'import type { Reads } from "./why.ts";');
    files.delete("ui/src/b.ts");
    expect(importCycles(files)).toEqual([
      "src/cli/completion.ts -> src/cli/words.ts -> src/cli/main.ts -> src/cli/completion.ts",
      "src/tls/self.ts -> src/tls/self.ts",
    ]);
  });

  it("no file in src or ui imports from a room above it", () => {
    const files = sourceFiles(repo, ["src", "ui/src"]);
    expect(files.size).toBeGreaterThan(50);
    expect([...files.keys()].some((f) => f.startsWith("ui/src/views/"))).toBe(true);
    expect(layerViolations(files, ROOMS)).toEqual([]);
  });

  it("finds a private module imported from outside its folder, type-only imports too", () => {
    const files = new Map([
      ["src/scheduler/claim.ts", 'import type { SchedulerContext } from "./context.ts";'],
      [
        "src/reconciler/worker.ts",
        'import type { SchedulerContext } from "../scheduler/context.ts";\nimport { x } from "../scheduler/claim.ts";',
      ],
      ["src/hub.ts", 'import { SchedulerContext } from "./scheduler/context.ts";'],
    ]);
    expect(privateImports(files)).toEqual([
      "src/reconciler/worker.ts imports src/scheduler/context.ts, private to src/scheduler/",
      "src/hub.ts imports src/scheduler/context.ts, private to src/scheduler/",
    ]);
  });

  it("no file outside scheduler/ imports the scheduler's context", () => {
    expect(privateImports(sourceFiles(repo, ["src", "ui/src"]))).toEqual([]);
  });

  it("no module in src or ui imports itself through others", () => {
    expect(importCycles(sourceFiles(repo, ["src", "ui/src"]))).toEqual([]);
  });
});
