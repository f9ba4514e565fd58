// The web view's static files at /ui, built by `npm run build:ui` (run by `npm ci` through
// `prepare`) into dist/ui. They hold no data, so they are served without a token; the page
// asks for the token and sends it as a bearer header on every API call it makes.
import { readFile, stat } from "node:fs/promises";
import { dirname, extname, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance, FastifyReply } from "fastify";

export const UI_PREFIX = "/ui";
export const UI_DIST = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "dist", "ui");

/** True for the paths of the page itself, which need no token. */
export const isUiPath = (path: string) => path === UI_PREFIX || path.startsWith(`${UI_PREFIX}/`);

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".map": "application/json",
};

// Everything the page loads comes from this Hub: no CDN, no inline script, no framing.
const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export async function uiRoutes(f: FastifyInstance, o: { dir?: string } = {}): Promise<void> {
  const root = o.dir ?? UI_DIST;

  async function send(reply: FastifyReply, rel: string) {
    const file = resolve(root, rel);
    if (file !== root && !file.startsWith(root + sep)) return reply.code(404).send({ error: "not_found" });
    const st = await stat(file).catch(() => undefined);
    if (!st?.isFile()) {
      // An unbuilt checkout: say how to build instead of a bare 404.
      if (rel === "index.html")
        return reply
          .code(503)
          .type("text/plain; charset=utf-8")
          .send(`the web view is not built in ${root}; run: npm run build:ui\n`);
      return reply.code(404).send({ error: "not_found", path: `${UI_PREFIX}/${rel}` });
    }
    // Hashed asset names change with their content; index.html must always be fetched fresh.
    const immutable = rel.startsWith("assets/");
    return reply
      .type(TYPES[extname(file)] ?? "application/octet-stream")
      .header("cache-control", immutable ? "public, max-age=31536000, immutable" : "no-store")
      .header("content-security-policy", CSP)
      .header("referrer-policy", "no-referrer")
      .header("x-content-type-options", "nosniff")
      .send(await readFile(file));
  }

  f.get(UI_PREFIX, (_req, reply) => reply.redirect(`${UI_PREFIX}/`));
  f.get(`${UI_PREFIX}/`, (_req, reply) => send(reply, "index.html"));
  f.get(`${UI_PREFIX}/*`, (req, reply) => send(reply, (req.params as { "*": string })["*"]));
}
