// `npm run lint`: ESLint over every TypeScript file, with the type-aware rules that catch
// bugs (a promise nobody awaits, an await on a plain value, a switch that misses a case).
// Formatting belongs to Prettier alone, so no rule here is about layout.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    // Generated or built output, and what tests and benches leave behind.
    ignores: ["node_modules/", "dist/", "coverage/", "**/*.gen.ts", "bench/tmp/", ".tmp-rt/", "test-output/", ".loom/"],
  },
  js.configs.recommended,
  tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // Each file is checked with the tsconfig that includes it (the root one, or ui/'s);
        // the two tool configs belong to neither and get a default project.
        projectService: { allowDefaultProject: ["vitest.config.ts", "ui/vite.config.ts"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
    rules: {
      // Request and stored bodies are still `unknown` and `Record<string, unknown>` until the
      // wire protocol has types of its own; until then these rules flag that debt (about 1,500
      // places) rather than bugs, and String(x) on such a value is deliberate.
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-base-to-string": "off",
      "@typescript-eslint/restrict-template-expressions": "off",
      "@typescript-eslint/no-explicit-any": "off",
      // An async function without an await is a common, harmless way to return a promise.
      "@typescript-eslint/require-await": "off",
      // Test helpers destructure functions that never use `this`.
      "@typescript-eslint/unbound-method": "off",
      // Tests match aligned CLI tables with literal runs of spaces.
      "no-regex-spaces": "off",
      // Passing on a caught error as it came is not a bug, whatever its type.
      "@typescript-eslint/prefer-promise-reject-errors": ["error", { allowThrowingUnknown: true }],
      // Names starting with "_" are kept on purpose: a rest-destructure that drops a field,
      // or a parameter an interface requires.
      "@typescript-eslint/no-unused-vars": [
        "error",
        {
          argsIgnorePattern: "^_",
          varsIgnorePattern: "^_",
          destructuredArrayIgnorePattern: "^_",
          caughtErrors: "none",
          ignoreRestSiblings: true,
        },
      ],
      "@typescript-eslint/switch-exhaustiveness-check": ["error", { considerDefaultExhaustiveForUnions: true }],
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
    },
  },
  {
    files: ["**/*.js", "**/*.mjs"],
    extends: [tseslint.configs.disableTypeChecked],
    languageOptions: { globals: { process: "readonly", URL: "readonly", console: "readonly" } },
  },
);
