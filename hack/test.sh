#!/usr/bin/env bash
# Sets everything up and runs every test: unit tests (CUnit) under ASan/UBSan
# and under valgrind, then the end-to-end tests on a real local control plane,
# and one end-to-end suite again with the ASan and the TSan controller.
# Exits non-zero when any test fails.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export PATH="$PATH:/usr/local/go/bin"
step() { echo; echo "=== $* (at ${SECONDS}s) ==="; }
results=()
failed=0
# Every failed end-to-end test and its first failure, for the summary.
export SBX_E2E_REPORT="$ROOT/build/e2e-failures.txt"
mkdir -p build && : >"$SBX_E2E_REPORT"
record() { # record NAME RC
  if [ "$2" -eq 0 ]; then results+=("PASS $1"); else results+=("FAIL $1"); failed=1; fi
}

step "dependencies"
bash hack/deps.sh || exit 1
step "control plane binaries (cached after the first run)"
bash hack/build-control-plane.sh >/dev/null || exit 1
step "helm and promtool from their Go modules (cached after the first run)"
bash hack/tools.sh helm >/dev/null && bash hack/tools.sh promtool >/dev/null || exit 1

step "lint: include graph, clang-format, cppcheck (hack/lint.sh)"
bash hack/lint.sh
record "lint (include graph, clang-format, cppcheck)" $?

step "generated copies under manifests/ are current (CRD, rules, dashboard)"
bash hack/manifests.sh check
record "manifests: generated copies current" $?

# The Python client and kubectl plugin (clients/python): installed as a user
# installs it, into a venv over Debian's python3-kubernetes with no package
# index, then its unit tests. Built from a copy, so the tree stays clean.
step "Python client: install into a venv and run its unit tests (pytest)"
rm -rf build-python && mkdir -p build-python && cp -r clients/python build-python/src &&
  rm -rf build-python/src/build build-python/src/src/*.egg-info &&
  /usr/bin/python3 -m venv --system-site-packages build-python/venv &&
  build-python/venv/bin/pip install -q --no-build-isolation --no-index build-python/src &&
  (cd build-python/src && ../venv/bin/python -m pytest -q -p no:cacheprovider tests)
record "Python client unit tests (pytest)" $?

step "build (warnings are errors) with ASan/UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSBX_SANITIZE=ON -DSBX_WERROR=ON >/dev/null &&
  cmake --build build-asan -j2 || exit 1
step "unit tests under ASan/UBSan"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build-asan/unit-tests
record "unit tests (ASan/UBSan)" $?

# The Release type, as a user builds it (README), once; warnings are errors here.
step "release build (warnings are errors)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSBX_WERROR=ON >/dev/null && cmake --build build -j2 || exit 1
go build -C hack/faultproxy -o "$ROOT/build/faultproxy" . || exit 1
go build -C hack/mutator -o "$ROOT/build/mutator" . || exit 1
step "controller build with ThreadSanitizer"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSBX_TSAN=ON -DSBX_WERROR=ON >/dev/null &&
  cmake --build build-tsan -j2 --target sandbox-controller || exit 1
step "unit tests under valgrind"
valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
  --error-exitcode=3 ./build/unit-tests >build/valgrind-unit.log 2>&1
rc=$?; tail -n 3 build/valgrind-unit.log; [ $rc -eq 0 ] || grep -E "==[0-9]+==" build/valgrind-unit.log | head -40
record "unit tests (valgrind)" $rc

step "fuzzing: every target under fuzz/ for 20 s (hack/fuzz.sh)"
bash hack/fuzz.sh 20
record "fuzzing (20 s per target)" $?

step "image: hack/image.sh (offline buildah, OCI archive, smoke test)"
SBX_BUILD_DIR="$ROOT/build" bash hack/image.sh
record "image (buildah)" $?

# The foundation and idempotency suites run the controller as deployed: the
# manifests' ServiceAccount with only manifests/rbac, a TokenRequest token and
# the in-cluster file layout (e2e/lib.sh, SBX_E2E_IDENTITY).
for t in e2e/test_*.sh; do
  [ -n "${E2E_FILES:-}" ] && [[ " $E2E_FILES " != *" $(basename "$t") "* ]] && continue
  ident=""
  case "$(basename "$t")" in test_foundation.sh | test_idempotency.sh) ident=serviceaccount ;; esac
  step "end-to-end: $t${ident:+ (as the ServiceAccount of manifests/)}"
  SBX_E2E_IDENTITY=$ident SBX_BUILD_DIR="$ROOT/build" bash "$t"
  record "$t${ident:+ (ServiceAccount)}" $?
done

# The controller itself under ASan/UBSan/LSan on the real cluster: the
# foundation, lifecycle and warm pool suites again with the sanitizer build
# (a report in a controller's log fails the suite).
if [ -z "${E2E_FILES:-}" ] || [[ " $E2E_FILES " == *" asan "* ]]; then
  for t in test_foundation test_lifecycle test_warm; do
    step "end-to-end: e2e/$t.sh with the ASan/UBSan controller"
    ASAN_OPTIONS=detect_leaks=1 SBX_BUILD_DIR="$ROOT/build-asan" bash "e2e/$t.sh"
    record "e2e/$t.sh (ASan/UBSan controller)" $?
  done
fi

# The controller under ThreadSanitizer on the real cluster: the foundation
# and warm pool suites again (a "WARNING: ThreadSanitizer" in a log fails it).
if [ -z "${E2E_FILES:-}" ] || [[ " $E2E_FILES " == *" tsan "* ]]; then
  for t in test_foundation test_warm; do
    step "end-to-end: e2e/$t.sh with the TSan controller"
    TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1" SBX_BUILD_DIR="$ROOT/build-tsan" bash "e2e/$t.sh"
    record "e2e/$t.sh (TSan controller)" $?
  done
fi

step "summary"
printf '%s\n' "${results[@]}"
if [ -s "$SBX_E2E_REPORT" ]; then echo "failed end-to-end tests:"; sed 's/^/  /' "$SBX_E2E_REPORT"; fi
p=$(printf '%s\n' "${results[@]}" | grep -c '^PASS'); f=$(printf '%s\n' "${results[@]}" | grep -c '^FAIL')
echo "total time: ${SECONDS}s"
echo "suites: $p passed, $f failed"
exit $failed
