#!/usr/bin/env bash
# Brings the whole tree to the lint's standard in one pass: ESLint's safe fixes (a type
# assertion that changes nothing, `import type`, `const`), then Prettier, then the checks
# that must still hold. Run it on a clean work tree and commit the result as one commit of
# its own, so that `git blame` can skip it (list it in .git-blame-ignore-revs).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain)" ]; then
  echo "format-tree: the work tree has changes; commit or stash them first" >&2
  exit 1
fi
npx eslint --fix . || true # what it cannot fix is reported again by `npm run lint` below
npm run format
npx tsc --noEmit
npx tsc --noEmit -p ui
npm run lint
git status --short | wc -l | xargs echo "format-tree: files changed:"
