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
# A suite that needs the machine's one real node waits for another suite's
# (hack/realnode.sh, rn_lock) at most this long, then fails: never the whole
# CI budget (its lane's time limit below allows for the wait).
export SBX_REAL_NODE_WAIT=${SBX_REAL_NODE_WAIT:-900}

step "dependencies"
bash hack/deps.sh test || exit 1
step "control plane binaries (cached after the first run)"
bash hack/build-control-plane.sh >/dev/null || exit 1
# The other Go binaries the tests use (the kubelet of the real node, helm,
# promtool, the code generators, controller-gen, kube-router), built once and
# cached outside the tree, build in the background at the lowest CPU priority
# while the steps below and the suites run: on a new machine they are a third
# of the run. A suite that needs one before it is there waits for its build
# (build-control-plane.sh and tools.sh hold a lock per build) rather than
# building it a second time; the kubelet and kube-router come first, as the
# real node's suites start early.
# Its log and result go where the suites' do (hack/lanes.sh).
. hack/lanes.sh
lanes_init "$ROOT/build/suites" "${SBX_TEST_LANES:-3}"
go_tools() {
  local t s
  for t in kubelet kube-router helm promtool codegen controller-gen; do
    s=$SECONDS
    case $t in
      kubelet) nice -n 19 bash hack/build-control-plane.sh kubelet ;;
      *) nice -n 19 bash hack/tools.sh "$t" ;;
    esac >/dev/null || { echo "tools: $t failed"; return 1; }
    echo "tools: $t ready ($((SECONDS - s)) s)"
  done
}
# Its time limit: from empty caches, on 2 CPUs at the lowest priority beside
# the suites, well under an hour.
bg_job -t 3600 go-tools go_tools

step "the test harness's own tests (hack/test-lanes.sh)"
t0=$SECONDS
bash hack/test-lanes.sh
record "test harness (hack/test-lanes.sh) ($((SECONDS - t0))s)" $?

step "lint: include graph, clang-format, cppcheck (hack/lint.sh)"
t0=$SECONDS
bash hack/lint.sh
record "lint (include graph, clang-format, cppcheck) ($((SECONDS - t0))s)" $?

step "generated copies under manifests/ are current (CRD, rules, dashboard)"
t0=$SECONDS
bash hack/manifests.sh check
record "manifests: generated copies current ($((SECONDS - t0))s)" $?

# The Python client and kubectl plugin (clients/python): installed as a user
# installs it, into a venv over Debian's python3-kubernetes with no package
# index, then its unit tests. Built from a copy, so the tree stays clean.
step "Python client: install into a venv and run its unit tests (pytest)"
t0=$SECONDS
rm -rf build-python && mkdir -p build-python && cp -r clients/python build-python/src &&
  rm -rf build-python/src/build build-python/src/src/*.egg-info &&
  /usr/bin/python3 -m venv --system-site-packages build-python/venv &&
  build-python/venv/bin/pip install -q --no-build-isolation --no-index build-python/src &&
  (cd build-python/src && ../venv/bin/python -m pytest -q -p no:cacheprovider tests)
record "Python client unit tests (pytest) ($((SECONDS - t0))s)" $?

step "build (warnings are errors) with ASan/UBSan"
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DSBX_SANITIZE=ON -DSBX_WERROR=ON >/dev/null &&
  cmake --build build-asan -j2 || exit 1
step "unit tests under ASan/UBSan"
t0=$SECONDS
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ./build-asan/unit-tests
record "unit tests (ASan/UBSan) ($((SECONDS - t0))s)" $?

# The Release type, as a user builds it (README), once; warnings are errors here.
step "release build (warnings are errors)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSBX_WERROR=ON >/dev/null && cmake --build build -j2 || exit 1
go build -C hack/faultproxy -o "$ROOT/build/faultproxy" . || exit 1
go build -C hack/mutator -o "$ROOT/build/mutator" . || exit 1
step "controller build with ThreadSanitizer"
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DSBX_TSAN=ON -DSBX_WERROR=ON >/dev/null &&
  cmake --build build-tsan -j2 --target sandbox-controller || exit 1
# From here on the suites are independent: they run side by side in lanes
# (hack/lanes.sh; SBX_TEST_LANES, default 3), each with its own log printed
# whole when it ends and its own time in the summary. Longest first, so the
# run ends with the short ones.
valgrind_unit() {
  valgrind -q --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=3 ./build/unit-tests >build/valgrind-unit.log 2>&1
  local rc=$?
  tail -n 3 build/valgrind-unit.log; [ $rc -eq 0 ] || grep -E "==[0-9]+==" build/valgrind-unit.log | head -40
  return $rc
}
# e2e SUITE [VAR=VALUE...]: the suite with the Release controller unless a
# variable says otherwise. It runs in a lane's child bash (hack/lanes.sh, -t),
# which sees only exported variables: the working folder is the tree's root.
e2e() {
  local t=$1
  shift
  env SBX_BUILD_DIR="$PWD/build" "$@" bash "e2e/$t.sh"
}
want() { # want SUITE: whether E2E_FILES (if set) asks for it
  [ -z "${E2E_FILES:-}" ] || [[ " $E2E_FILES " == *" $1 "* ]]
}
# Every job, longest first by its time in a 3-lane run on 2 CPUs (seconds,
# the first field), so the run ends with short jobs filling the lanes rather
# than one long job alone. A suite missing from the list still runs, with
# 120 s assumed, so a new file is never skipped. test_realnode, test_demo
# and test_network need the machine's one real node: the second to get there waits for
# the first's lock (hack/realnode.sh, rn_lock, up to SBX_REAL_NODE_WAIT s)
# rather than failing, so they may share the lanes like any other suite
# (their times here were measured alone, the others' in a 3-lane run).
# Each job's time limit (hack/lanes.sh, lane -t) is 3 times its time here,
# at least 900 s, plus SBX_REAL_NODE_WAIT for the real node's suites; a job
# that reaches it is stopped and fails ("timed out" in the summary).
JOBS=(
  "920 e2e test_isolation"
  "700 e2e test_lifecycle"
  "650 e2e test_lifecycle asan"
  "262 e2e test_robust"
  "660 e2e test_quota"
  "640 e2e test_quota tsan"
  "214 e2e test_warm tsan"
  "212 e2e test_warm"
  "210 e2e test_warm asan"
  "212 e2e test_realnode"
  "221 e2e test_network"
  "210 e2e test_idempotency"
  "201 e2e test_certs"
  "199 e2e test_agents"
  "180 fuzz"
  "145 e2e test_kube_client"
  "185 e2e test_conformance"
  "143 e2e test_admission"
  "136 e2e test_hardening"
  "114 e2e test_listeners"
  "109 e2e test_policy"
  "99 valgrind"
  "95 e2e test_trust"
  "125 e2e test_foundation asan"
  "73 e2e test_helm"
  "72 e2e test_install"
  "110 e2e test_foundation"
  "100 e2e test_foundation tsan"
  "65 e2e test_demo"
  "59 e2e test_operation"
  "56 e2e test_ha"
  "36 e2e test_deployed"
  "13 image"
  "60 gogen"
)
for t in e2e/test_*.sh; do
  t=$(basename "$t" .sh)
  printf '%s\n' "${JOBS[@]}" | grep -q " e2e $t\( \|$\)" || JOBS+=("120 e2e $t")
done
mapfile -t JOBS < <(printf '%s\n' "${JOBS[@]}" | sort -s -k1,1nr)
ASAN_ENV=(ASAN_OPTIONS=detect_leaks=1 SBX_BUILD_DIR="$ROOT/build-asan")
TSAN_ENV=("TSAN_OPTIONS=halt_on_error=0 second_deadlock_stack=1" SBX_BUILD_DIR="$ROOT/build-tsan")
for j in "${JOBS[@]}"; do
  read -r est kind t flavour <<<"$j"
  limit=$((3 * est > 900 ? 3 * est : 900))
  case "${t:-}" in test_realnode | test_network | test_demo) limit=$((limit + SBX_REAL_NODE_WAIT)) ;; esac
  case "$kind" in
    valgrind) [ -z "${E2E_FILES:-}" ] && lane -t "$limit" "unit tests (valgrind)" valgrind_unit ;;
    fuzz) [ -z "${E2E_FILES:-}" ] && lane -t "$limit" "fuzzing (20 s per target)" bash hack/fuzz.sh 20 ;;
    image) [ -z "${E2E_FILES:-}" ] && lane -t "$limit" "image (buildah)" env SBX_BUILD_DIR="$ROOT/build" bash hack/image.sh ;;
    # The Go API modules (clients/go): the generated code is what the
    # generators make now, the Go types describe crd/ exactly, a types-only
    # program's modules, and the unit tests (gen-go.sh prints each part's time).
    gogen) [ -z "${E2E_FILES:-}" ] && lane -t "$limit" "Go API modules (generated, drift, unit tests)" bash hack/gen-go.sh test ;;
    e2e)
      case "${flavour:-}" in
        asan) want asan && lane -t "$limit" "e2e/$t.sh (ASan/UBSan controller)" e2e "$t" "${ASAN_ENV[@]}" ;;
        tsan) want tsan && lane -t "$limit" "e2e/$t.sh (TSan controller)" e2e "$t" "${TSAN_ENV[@]}" ;;
        *)
          want "$t.sh" || continue
          # The foundation and idempotency suites run the controller as
          # deployed: the manifests' ServiceAccount with only manifests/rbac,
          # a TokenRequest token and the in-cluster file layout (e2e/lib.sh).
          case $t in
            test_foundation | test_idempotency) lane -t "$limit" "e2e/$t.sh (ServiceAccount)" e2e "$t" SBX_E2E_IDENTITY=serviceaccount ;;
            *) lane -t "$limit" "e2e/$t.sh" e2e "$t" ;;
          esac
          ;;
      esac
      ;;
  esac
done
lanes_wait
bg_result go-tools
tools_rc=$?
step "the Go binaries built in the background"
cat "$(lane_file go-tools).log"
record "Go binaries (kubelet, kube-router, helm, promtool, generators) (${BG_SECS}s)" $tools_rc

step "summary (each suite's own time in brackets)"
printf '%s\n' "${results[@]}"
if [ -s "$SBX_E2E_REPORT" ]; then echo "failed end-to-end tests:"; sed 's/^/  /' "$SBX_E2E_REPORT"; fi
p=$(printf '%s\n' "${results[@]}" | grep -c '^PASS'); f=$(printf '%s\n' "${results[@]}" | grep -c '^FAIL')
echo "total time: ${SECONDS}s"
echo "suites: $p passed, $f failed"
exit $failed
