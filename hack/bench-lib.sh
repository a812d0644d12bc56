# Helpers shared by the benchmark commands (hack/bench*.sh), sourced after
# e2e/lib.sh (say, wait_for, free_port, controller_start, CTL_PIDS, E2E_DIR).

# bench_build TARGET...: the Release-with-symbols build of the targets named,
# unless --no-build was given (BUILD=0).
bench_build() {
  [ "${BUILD:-1}" = 1 ] || return 0
  say "building $*"
  { cmake -S "$E2E_ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSBX_SANITIZE=OFF >/dev/null &&
    cmake --build "$BUILD_DIR" -j2 --target "$@" >/dev/null; } || { echo "build failed" >&2; exit 1; }
}

# value FILE KEY: a KEY=VALUE line of sbx-bench's output (nothing for a skipped phase).
value() { [ -f "$1" ] && sed -n "s/^$2=//p" "$1" | tail -n 1; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
# ratio A B [FORMAT]: A / B, or n/a.
ratio() { awk -v a="$1" -v b="$2" -v f="${3:-%.2f}" 'BEGIN { if (b + 0 > 0 && a != "") printf f, a / b; else print "n/a" }'; }
# median [FORMAT] < numbers, one a line: their median (the middle one as
# given, or the mean of the middle two in FORMAT, default %.3f); lines that
# are not numbers ("n/a") are left out; nothing for none.
median() {
  awk '$1 ~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ { print $1 }' | sort -g |
    awk -v f="${1:-%.3f}" '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : sprintf(f, (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
mib() { awk -v k="$1" 'BEGIN { if (k > 0) printf "%.1f", k / 1024; else print "n/a" }'; }
hwm_kib() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }
rss_kib() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$1/status" 2>/dev/null; }
# reset_hwm PID: VmHWM starts again from the current RSS (Linux >= 4.0), so
# the next hwm_kib is the peak since now. Returns 1 where it cannot.
reset_hwm() { echo 5 2>/dev/null >"/proc/$1/clear_refs"; }
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / t }' "/proc/$1/stat" 2>/dev/null; }
# scrape PORT: the /metrics text of the controller on PORT.
scrape() { curl -s --max-time 5 "http://127.0.0.1:$1/metrics"; }
# msum TEXT NAME [LABEL=VALUE]: the sum of NAME's series (with that label).
msum() {
  awk -v n="$2" -v l="${3:-}" '
    { name = $1; sub(/\{.*/, "", name) }
    name == n && (l == "" || index($1, l) > 0) { s += $NF; found = 1 }
    END { if (found) printf "%.0f", s; else print 0 }' <<<"$1"
}
# requests TEXT [METHOD]: rest_client_requests_total (of that method).
requests() { msum "$1" rest_client_requests_total ${2:+"method=\"$2\""}; }
now_s() { date +%s.%N; }
# since T0: seconds from T0 (a now_s) to now, 3 decimals.
since() { awk -v a="$1" -v b="$(now_s)" 'BEGIN { printf "%.3f", b - a }'; }
# series_delta BEFORE AFTER PATTERN: the series of AFTER matching PATTERN (a regex
# on the series) minus their values in BEFORE: "series value" lines.
series_delta() {
  awk -v pat="$3" 'NR == FNR { if ($1 ~ pat) b[$1] = $NF; next } $1 ~ pat { print $1, $NF - b[$1] }' "$1" "$2"
}
# observations NAME SELECTOR < metrics: a histogram's count (matching series, summed).
observations() {
  awk -v n="$1" -v sel="$2" 'index($0, n "_bucket{") == 1 && index($0, sel) > 0 && /le="\+Inf"/ { t += $NF }
    END { printf "%d", t }'
}
# quantile Q NAME SELECTOR < metrics: a histogram quantile (linear within the
# bucket, as PromQL's histogram_quantile) over the series matching SELECTOR.
quantile() {
  awk -v q="$1" -v n="$2" -v sel="$3" '
    index($0, n "_bucket{") == 1 && index($0, sel) > 0 {
      le = $0; sub(/.*le="/, "", le); sub(/".*/, "", le)
      c[le] += $NF; if (!(le in seen)) { seen[le] = 1; les[++k] = le }
    }
    END {
      if (!k) { print "n/a"; exit }
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if ((les[i] == "+Inf") || (les[j] != "+Inf" && les[j] + 0 < les[i] + 0)) { t = les[i]; les[i] = les[j]; les[j] = t }
      total = c["+Inf"]; if (!total) { print "n/a"; exit }
      want = q * total; prev = 0; pc = 0
      for (i = 1; i <= k; i++) {
        le = les[i]
        if (c[le] >= want) {
          if (le == "+Inf") { printf "> %.0f ms", prev * 1000; exit }
          printf "%.1f ms", (prev + (le - prev) * (want - pc) / (c[le] - pc)) * 1000; exit
        }
        prev = le + 0; pc = c[le]
      }
    }'
}

# bench_fail MESSAGE: keeps the logs (e2e_cleanup keeps them on failure) and exits.
bench_fail() { say "$*"; E2E_FAILED=1; exit 1; }

# settle PORT: waits until the controller's request counter and work queue
# are still for 3 s (at most 120 s), so follow-up work is counted.
settle() {
  local last=-1 still=0 m r
  for _ in $(seq 1 120); do
    m=$(scrape "$1")
    r=$(requests "$m")
    if [ "$r" = "$last" ] && [ "$(msum "$m" workqueue_depth)" = 0 ]; then
      still=$((still + 1))
      [ "$still" -ge 3 ] && return 0
    else
      still=0
      last=$r
    fi
    sleep 1
  done
}

# delete_namespace NS: deletes it and waits until it is gone (its pods too).
delete_namespace() {
  say "deleting namespace $1"
  kubectl delete namespace "$1" --wait=false >/dev/null || bench_fail "namespace $1 not deleted"
  # The local control plane runs no pvc-protection controller: once the pods
  # are gone, the workspace PVC's finalizer would hold the namespace forever.
  wait_for 900 bash -c "! kubectl get pods -n '$1' --no-headers 2>/dev/null | grep -q ."
  kubectl get pvc -n "$1" -o name 2>/dev/null |
    xargs -r kubectl patch -n "$1" --type=merge -p '{"metadata":{"finalizers":null}}' >/dev/null 2>&1
  kubectl wait --for=delete "namespace/$1" --timeout=900s >/dev/null 2>&1 || bench_fail "namespace $1 not deleted"
}

# bench_namespace NS [ROOT]: new_namespace (its PV under ROOT) with its
# workspace PVC bound.
bench_namespace() {
  new_namespace "$1" "${2:-}"
  kubectl wait --for=jsonpath='{.status.phase}'=Bound pvc/sandbox-workspaces -n "$1" --timeout=60s >/dev/null ||
    bench_fail "the workspace PVC of $1 did not bind"
}

# start_ours NAME [FLAGS...]: the controller at its defaults plus FLAGS, with
# metrics/probes on known ports; sets CTL_PID, METRICS_PORT, PROBE_PORT.
start_ours() {
  local name=$1
  shift
  METRICS_PORT=$(free_port)
  PROBE_PORT=$(free_port)
  controller_start "$name" "$@" \
    --metrics-bind-address "127.0.0.1:$METRICS_PORT" --health-probe-bind-address "127.0.0.1:$PROBE_PORT"
}

# wait_ready_ms PORT: polls /readyz every 20 ms; prints the ms it took.
wait_ready_ms() {
  local t0 t
  t0=$(date +%s%N)
  for _ in $(seq 1 15000); do
    curl -fs -o /dev/null --max-time 1 "http://127.0.0.1:$1/readyz" && break
    sleep 0.02
  done
  t=$(date +%s%N)
  echo $(((t - t0) / 1000000))
}

# peer_apply_crds PATH: kubernetes-sigs/agent-sandbox's CRDs (a file or a
# folder of YAML) with their conversion webhooks removed (no webhook runs).
peer_apply_crds() {
  say "peer: applying $1 without conversion webhooks"
  kubectl apply --server-side -f "$1" >/dev/null || bench_fail "cannot apply $1"
  local crd
  for crd in $(kubectl get crd -o name | grep 'agents.x-k8s.io'); do
    kubectl patch "$crd" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
    kubectl wait --for=condition=Established "$crd" --timeout=60s >/dev/null
  done
}

# peer_start BIN [FLAGS...]: the peer controller out of cluster with the admin
# kubeconfig, webhooks off, at its defaults plus FLAGS, once it holds its
# Lease (unless FLAGS turn leader election off); sets PEER_PID and
# PEER_METRICS, its log is $E2E_DIR/peer.log.
peer_start() {
  local bin=$1 probe
  shift
  PEER_METRICS=$(free_port)
  probe=$(free_port)
  KUBECONFIG=$KUBECONFIG "$bin" --enable-webhook=false --manage-webhook-certs=false \
    --leader-election-namespace=default \
    --metrics-bind-address "127.0.0.1:$PEER_METRICS" --health-probe-bind-address "127.0.0.1:$probe" "$@" \
    >>"$E2E_DIR/peer.log" 2>&1 &
  PEER_PID=$!
  track_pid "$PEER_PID"
  wait_ready_ms "$probe" >/dev/null
  [[ " $* " == *" --leader-elect=false "* ]] && return 0
  # It starts reconciling once it holds its Lease.
  for _ in $(seq 1 300); do
    scrape "$PEER_METRICS" | grep -q '^leader_election_master_status{.*} 1' && break
    sleep 0.1
  done
}

# warn_if_busy LOADAVG: a warning line when the host was busy at the start.
warn_if_busy() {
  if awk -v a="${1%% *}" -v n="$(nproc)" 'BEGIN { exit !(a > n / 2) }'; then
    echo "WARNING:    the host was busy before the run (1-minute loadavg ${1%% *} on $(nproc) CPUs): other work shared the CPUs; compare ratios within this run"
  fi
}
