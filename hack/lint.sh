#!/usr/bin/env bash
# The checks of the tree that need no build, each on its own, the first
# failure not hiding the others:
#   - the include graph of controller/ (hack/include-graph.py): no upward
#     edge between the layers, no modules in a circle;
#   - the formatting: .clang-format, with clang-format 14 as Debian 12
#     packages it (another version formats differently, so it is refused);
#   - cppcheck over controller/ (warnings, performance, portability), clean
#     but for the findings hack/cppcheck/suppressions.txt names with a reason.
# Exits non-zero when any fails. hack/test.sh runs it first.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
failed=0

echo "--- include graph (hack/include-graph.py)"
python3 hack/include-graph.py --quiet || failed=1

echo "--- clang-format (.clang-format)"
want=14
have=$(clang-format --version 2>/dev/null | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
if [ "$have" != "$want" ]; then
  echo "lint: clang-format $want is required (Debian 12's clang-format package), found '${have:-none}'"
  failed=1
else
  find controller test fuzz hack/tools -name '*.[ch]' -print0 | sort -z |
    xargs -0 clang-format --dry-run --Werror || failed=1
fi

echo "--- cppcheck (controller/)"
inc=$(mktemp -d)
ln -s /usr/include/cjson "$inc/cjson" # cJSON's macros; not the system headers (slow, and noise)
cppcheck --std=c11 --enable=warning,performance,portability --library=posix -q -j2 --inline-suppr \
  --error-exitcode=1 --template='{file}:{line}: {severity}: {message} [{id}]' \
  --include=hack/cppcheck/stubs.h --suppressions-list=hack/cppcheck/suppressions.txt \
  -I controller -I "$inc" controller/ || failed=1
rm -rf "$inc"

[ $failed -eq 0 ] && echo "lint: clean"
exit $failed
