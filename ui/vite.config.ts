// Builds the web view (ui/) into dist/ui, served by the Hub at /ui. Plain TypeScript, no
// framework; every asset is bundled, so the page loads offline with nothing from a CDN.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vite";

const here = fileURLToPath(new URL(".", import.meta.url));

export default defineConfig({
  root: here,
  base: "/ui/",
  publicDir: false,
  logLevel: "warn",
  build: {
    outDir: fileURLToPath(new URL("../dist/ui", import.meta.url)),
    emptyOutDir: true,
    target: "es2022",
    // No inline data: URLs for assets, so the page's Content-Security-Policy can stay 'self'.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
  },
});
