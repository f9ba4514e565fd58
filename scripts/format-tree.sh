#!/usr/bin/env bash
# Brings the whole tree to the lint's standard in one pass: ESLint's safe fixes (a type
# assertion that changes nothing, `import type`, `const`), then Prettier, then every check
# that must still hold. Run it on a clean work tree and commit the result as one commit of
# its own, so that `git blame` can skip it (list it in .git-blame-ignore-revs).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -n "$(git status --porcelain)" ]; then
  echo "format-tree: the work tree has changes; commit or stash them first" >&2
  exit 1
fi
npx eslint --fix . >/dev/null # what it cannot fix is reported again by `npm run lint` below
# Twice: Prettier settles a few long member chains only on its second pass.
npm run format >/dev/null && npm run format >/dev/null || exit 1
echo "format-tree: $(git status --porcelain | wc -l) files changed"
failed=0
npx tsc --noEmit || failed=1
npx tsc --noEmit -p ui || failed=1
npm run lint || failed=1
if [ "$failed" -ne 0 ]; then
  # An import used only by an assertion the fix removed is now reported unused: delete it.
  echo "format-tree: fix what is reported above, then run npm run lint again" >&2
  exit 1
fi
