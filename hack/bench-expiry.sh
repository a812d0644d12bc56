#!/usr/bin/env bash
# Benchmark: many Sandboxes expiring at the same moment (contract 5a: "the
# pods go without a request storm and without delaying other Sandboxes'
# binds"), on one local control plane, with a baseline in the same run.
# A command, not a test: it prints figures and fails only when something breaks.
#
#   hack/bench-expiry.sh [--count N] [--delete] [--rate R] [--duration T]
#                        [--lead S] [--concurrency C] [--no-build]
#
# The controller runs at its defaults with --owner-authorization namespace and
# no webhook (what is measured is the controller's expiry path, not admission).
#   1. expiring set: N Sandboxes (default 10,000; scope i, key bench-key-i, 50
#      owners) created in namespace exp by C client threads (default 8), all
#      with spec.lifecycle.shutdownTime T (one second for all; T is now + S at
#      the start, default S = 120 + N / 20 + 2 T), shutdownPolicy Retain
#      (--delete: Delete); the run waits until every one is Ready (Running);
#   2. baseline: R other Sandboxes/s (default 20) for T s (default 60) in
#      namespace other-base, no expiry under way: create -> Bound and -> Ready
#      percentiles, and the controller's requests and CPU for that load alone;
#   3. expiry: the same load in namespace other-exp from T - 1 s, while the
#      N expire: seconds from T until every pod has its deletionTimestamp, is
#      gone, and every Sandbox is Expired (or deleted); the controller's
#      requests by method, CPU and peak RSS from T - 1.5 s until the expiry is
#      done, the load has ended and the controller is quiet; the same other-
#      Sandbox percentiles as in the baseline, and their ratios.
# Requests and CPU per expired Sandbox are net of the other load: phase 3's
# delta minus phase 2's (the same R * T Sandboxes, the controller's idle
# background over the longer window is not subtracted). Peak RSS is VmHWM
# reset at T - 1.5 s (/proc/PID/clear_refs), so it is the peak of the window.
#
# Environment: SBX_BUILD_DIR (default build/), SBX_BENCH_TIMEOUT (seconds per
# phase, 900), SBX_E2E_KEEP=1 keeps the logs.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
COUNT=10000 RATE=20 DURATION=60 CONC=8 LEAD="" POLICY=Retain BUILD=1
TIMEOUT=${SBX_BENCH_TIMEOUT:-900}

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --count) COUNT=${2:-}; shift 2 ;;
    --delete) POLICY=Delete; shift ;;
    --rate) RATE=${2:-}; shift 2 ;;
    --duration) DURATION=${2:-}; shift 2 ;;
    --lead) LEAD=${2:-}; shift 2 ;;
    --concurrency) CONC=${2:-}; shift 2 ;;
    --no-build) BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
  esac
done
LEAD=${LEAD:-$((120 + COUNT / 20 + 2 * DURATION))}
for v in COUNT RATE DURATION CONC LEAD TIMEOUT; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "$v must be a positive integer, got '${!v}'" >&2; exit 2; }
done
OTHER=$((RATE * DURATION))

# shellcheck source=../e2e/lib.sh
. "$ROOT/e2e/lib.sh"
# shellcheck source=bench-lib.sh
. "$ROOT/hack/bench-lib.sh"
BENCH_BIN=$BUILD_DIR/sbx-bench EXPIRY_BIN=$BUILD_DIR/sbx-expiry
bench_build sandbox-controller sbx-bench sbx-expiry
for b in "$CONTROLLER_BIN" "$BENCH_BIN" "$EXPIRY_BIN"; do [ -x "$b" ] || { echo "missing $b" >&2; exit 1; }; done

LOAD_START=$(load)
say "starting the control plane"
cluster_up
grant_controller_rbac
# Room for the pods (2 CPU each): kwok nodes of 2000 CPUs hold 1000 each.
"$ROOT/hack/cluster.sh" nodes "$E2E_DIR" $(((COUNT + 2 * OTHER + 999) / 1000 + 1)) || bench_fail "kwok nodes not Ready"
for ns in exp other-base other-exp; do bench_namespace "$ns"; done
start_ours ctl
wait_ready_ms "$PROBE_PORT" >/dev/null
METRICS_URL="http://127.0.0.1:$METRICS_PORT/metrics"

AT=$(($(date +%s) + LEAD))
SHUTDOWN=$(date -u -d "@$AT" +%Y-%m-%dT%H:%M:%SZ)
E=$E2E_DIR/expiring.out B=$E2E_DIR/baseline.out X=$E2E_DIR/during.out W=$E2E_DIR/expiry.out

# 1. The expiring set.
L1=$(load)
say "expiring set: $COUNT Sandboxes with shutdownTime $SHUTDOWN ($POLICY), $CONC client threads, waiting for Ready"
"$BENCH_BIN" controller --namespace exp --count "$COUNT" --concurrency "$CONC" --scopes "$COUNT" --owners 50 \
  --shutdown-time "$SHUTDOWN" --shutdown-policy "$POLICY" --timeout "$((LEAD > TIMEOUT ? LEAD : TIMEOUT))" \
  --pid "$CTL_PID" --metrics-url "$METRICS_URL" >"$E" 2>"$E.err" ||
  bench_fail "the expiring set did not become Ready; see $E.err and $E2E_DIR/ctl.log"
pods_before=$(kubectl get pods -n exp -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init --no-headers 2>/dev/null | wc -l)
left=$((AT - $(date +%s)))
say "expiring set Ready: $(value "$E" ready)/$COUNT, $pods_before pods, ${left} s before the shutdownTime"
[ "$left" -gt $((DURATION + 40)) ] ||
  bench_fail "only $left s left before the shutdownTime: not enough for the baseline ($DURATION s); raise --lead (was $LEAD)"

# 2. The baseline: the other load alone.
settle "$METRICS_PORT"
LB=$(load)
say "baseline: $RATE Sandboxes/s for $DURATION s in other-base"
mb0=$(scrape "$METRICS_PORT") cb0=$(cpu_s "$CTL_PID")
"$BENCH_BIN" controller --namespace other-base --count "$OTHER" --rate "$RATE" --concurrency 8 --scopes "$OTHER" \
  --owners 50 --timeout "$TIMEOUT" >"$B" 2>"$B.err" || bench_fail "baseline run failed; see $B.err"
settle "$METRICS_PORT"
mb1=$(scrape "$METRICS_PORT") cb1=$(cpu_s "$CTL_PID")
left=$((AT - $(date +%s)))
[ "$left" -ge 8 ] || bench_fail "the baseline ended $left s before the shutdownTime (8 s needed); raise --lead (was $LEAD)"

# 3. The expiry, with the other load across it.
say "expiry: waiting $left s for $SHUTDOWN"
"$EXPIRY_BIN" --namespace exp --at "$AT" --timeout "$TIMEOUT" >"$W" 2>"$W.err" &
WATCH_PID=$!
sleep "$(awk -v t="$AT" -v n="$(now_s)" 'BEGIN { d = t - 5 - n; print (d > 0 ? d : 0) }')"
"$BENCH_BIN" controller --namespace other-exp --count "$OTHER" --rate "$RATE" --concurrency 8 --scopes "$OTHER" \
  --owners 50 --timeout "$TIMEOUT" --start-at "$((AT - 1))" >"$X" 2>"$X.err" &
LOAD_PID=$!
sleep "$(awk -v t="$AT" -v n="$(now_s)" 'BEGIN { d = t - 1.5 - n; print (d > 0 ? d : 0) }')"
LX=$(load)
mx0=$(scrape "$METRICS_PORT") cx0=$(cpu_s "$CTL_PID") rss0=$(rss_kib "$CTL_PID")
hwm_note=""
reset_hwm "$CTL_PID" || hwm_note=" (VmHWM could not be reset: the peak of the whole run)"
wait "$WATCH_PID"; watch_rc=$?
wait "$LOAD_PID"; load_rc=$?
settle "$METRICS_PORT"
mx1=$(scrape "$METRICS_PORT") cx1=$(cpu_s "$CTL_PID") hwm=$(hwm_kib "$CTL_PID")
window=$(awk -v t="$AT" -v n="$(now_s)" 'BEGIN { printf "%.1f", n - (t - 1.5) }')
printf '%s\n' "$mx1" >"$E2E_DIR/controller.metrics"
kill -0 "$CTL_PID" 2>/dev/null || bench_fail "the controller exited; see $E2E_DIR/ctl.log"
[ "$watch_rc" = 0 ] || bench_fail "the expiry did not finish within $TIMEOUT s; see $W.err and $E2E_DIR/ctl.log"
[ "$load_rc" = 0 ] || bench_fail "the load during the expiry failed; see $X.err"
pods_after=$(kubectl get pods -n exp -l app.kubernetes.io/managed-by=sandbox-controller,app.kubernetes.io/name!=sandbox-workspace-init --no-headers 2>/dev/null | wc -l)
expired=$(kubectl get sbx -n exp -o jsonpath='{range .items[*]}{.status.phase}{"\n"}{end}' 2>/dev/null | grep -c '^Expired$')
sandboxes_left=$(kubectl get sbx -n exp --no-headers 2>/dev/null | wc -l)
records=$(kubectl get sbxclaim -n exp --no-headers 2>/dev/null | wc -l)
controller_stop "$CTL_PID" || say "the controller did not stop on SIGTERM"

# delta A B [METHOD]: B's requests minus A's.
delta() { echo $(($(requests "$2" "${3:-}") - $(requests "$1" "${3:-}"))); }
# net A0 A1 B0 B1 [METHOD]: the window's requests minus the baseline's.
net() { echo $(($(delta "$3" "$4" "${5:-}") - $(delta "$1" "$2" "${5:-}"))); }
per() { awk -v a="$1" -v n="$2" 'BEGIN { printf "%.2f", a / n }'; }
sub_() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

cat <<EOF

=== sandbox-controller expiry benchmark ===
command:   hack/bench-expiry.sh --count $COUNT$([ "$POLICY" = Delete ] && echo " --delete") --rate $RATE --duration $DURATION --lead $LEAD --concurrency $CONC
load:      $COUNT Sandboxes in exp, shutdownTime $SHUTDOWN, shutdownPolicy $POLICY; other load $RATE/s for $DURATION s ($OTHER Sandboxes), from T - 1 s in other-exp, alone in other-base
host:      $(nproc) CPUs shared; loadavg $LOAD_START at start, $L1 creating, $LB baseline, $LX at T - 1.5 s, $(load) at end

expiring set: $(value "$E" ready)/$COUNT Ready in $(value "$E" ready_seconds) s ($(value "$E" ready_rate) /s), $pods_before pods; create -> Ready p99 $(value "$E" ready_p99_ms) ms

EOF
printf '%-60s %8s %8s %8s %8s\n' "expiry (seconds from the shutdownTime, as the watches saw it)" first p50 p99 last
for s in pods_deleting:"pod deleting (controller's DELETE)" pods_gone:"pod gone from the API" \
  sandboxes_done:"Sandbox $([ "$POLICY" = Delete ] && echo "Expired or deleted" || echo Expired)"; do
  k=${s%%:*}
  printf '  %-44s %6s/%-6s %8s %8s %8s %8s\n' "${s#*:}" "$(value "$W" "${k}_count")" \
    "$([ "$k" = sandboxes_done ] && value "$W" sandboxes || value "$W" pods)" \
    "$(value "$W" "${k}_first_s")" "$(value "$W" "${k}_p50_s")" "$(value "$W" "${k}_p99_s")" "$(value "$W" "${k}_last_s")"
done
cat <<EOF
  before the shutdownTime: $(value "$W" pods_deleting_early) pods deleting, $(value "$W" sandboxes_done_early) Sandboxes done (must be 0)
  pace: $(awk -v n="$COUNT" -v l="$(value "$W" sandboxes_done_last_s)" 'BEGIN { if (l > 0) printf "%.1f", n / l; else print "n/a" }') Sandboxes done per second, $(awk -v n="$(value "$W" pods)" -v l="$(value "$W" pods_gone_last_s)" 'BEGIN { if (l > 0) printf "%.1f", n / l; else print "n/a" }') pods gone per second (kwok deletes a pod once the controller's DELETE set its deletionTimestamp)
  after: $pods_after pods left in exp, $sandboxes_left Sandboxes ($expired Expired), $records claim records (SandboxClaim)

EOF
printf '%-46s %8s %14s %8s %10s\n' "controller, $window s from T - 1.5 s until quiet" window "baseline load" net "per expiry"
for m in "" GET POST PUT PATCH DELETE; do
  n=$(net "$mb0" "$mb1" "$mx0" "$mx1" "$m")
  printf '  %-44s %8s %14s %8s %10s\n' "API requests${m:+ $m}" "$(delta "$mx0" "$mx1" "$m")" "$(delta "$mb0" "$mb1" "$m")" \
    "$n" "$(per "$n" "$COUNT")"
done
# Answers that made the controller look again (a guarded write lost a race).
conflicts() { msum "$1" rest_client_requests_total 'code="409"'; }
cw=$(($(conflicts "$mx1") - $(conflicts "$mx0"))) cb=$(($(conflicts "$mb1") - $(conflicts "$mb0")))
printf '  %-44s %8s %14s %8s %10s\n' "API requests answered 409 (any method)" "$cw" "$cb" "$((cw - cb))" "$(per "$((cw - cb))" "$COUNT")"
cpu_w=$(sub_ "$cx1" "$cx0") cpu_b=$(sub_ "$cb1" "$cb0")
cpu_n=$(sub_ "$cpu_w" "$cpu_b")
printf '  %-44s %8s %14s %8s %10s\n' "CPU (s, utime + stime)" "$cpu_w" "$cpu_b" "$cpu_n" \
  "$(awk -v c="$cpu_n" -v n="$COUNT" 'BEGIN { printf "%.2f ms", c * 1000 / n }')"
cat <<EOF
  RSS $(mib "$rss0") MiB at T - 1.5 s, peak in the window $(mib "$hwm") MiB$hwm_note
  expirations counted by the controller: $(msum "$mx1" sandbox_expirations_total) (sandbox_expirations_total)

EOF
printf '%-42s %10s %15s %7s\n' "other Sandboxes, $RATE/s for $DURATION s" baseline "during expiry" ratio
for k in bound_p50 bound_p99 ready_p50 ready_p99 ready_max; do
  label=${k/bound_/Bound } label=${label/ready_/Ready }
  printf '  %-40s %10s %15s %7s\n' "create -> $label (ms)" "$(value "$B" "${k}_ms")" "$(value "$X" "${k}_ms")" \
    "$(ratio "$(value "$X" "${k}_ms")" "$(value "$B" "${k}_ms")")"
done
printf '  %-40s %10s %15s\n' "Ready / created" "$(value "$B" ready)/$(value "$B" created)" "$(value "$X" ready)/$(value "$X" created)"
ends=$(awk -v d="$DURATION" -v l="$(value "$W" sandboxes_done_last_s)" -v p="$(value "$W" pods_gone_last_s)" \
  'BEGIN { e = (l > p ? l : p); printf "%.0f", (e > 0 ? (d - 1 < e ? (d - 1) / e : 1) : 1) * 100 }')
echo "  the load ran from T - 1 s to T + $((DURATION - 1)) s: it overlapped ${ends}% of the expiry (T until the last pod and Sandbox were done)"
echo "  (Bound is the controller's part; Ready also waits for kwok, one process playing every node's kubelet, 4 pods at a time)"
warn_if_busy "$LOAD_START"
