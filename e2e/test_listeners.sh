#!/usr/bin/env bash
# End-to-end: the HTTP listeners under hostile and unlucky clients (issue 8
# items 4 and 6). The controller runs with `ulimit -n 256`; slow clients
# (e2e/slowclients.py: one header byte every 5 s, reconnecting when dropped)
# hold 300, then 1000 connections on the probe port while /healthz must keep
# answering (curl, and e2e/latewriters.py: clients that write their request
# 50 ms after connecting, as a descheduled client does), the log must stay
# quiet and Sandboxes must still be bound. Each
# endpoint answers only on its own listener, and SIGTERM with keep-alive
# clients connected exits cleanly, with no report from the ASan and the TSan
# builds when they exist (SBX_ASAN_BIN, SBX_TSAN_BIN override their paths).
# SIGTERM to a controller serving the admission webhook fails /readyz at once
# and drains the webhook (--webhook-drain) before its listener closes; one
# whose webhook listener binds late is not Ready until it listens.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib_admission.sh"

IMG=registry.local/agent:1.0
SLOW="$E2E_ROOT/e2e/slowclients.py"
LATE="$E2E_ROOT/e2e/latewriters.py"
ASAN_BIN=${SBX_ASAN_BIN:-$E2E_ROOT/build-asan/sandbox-controller}
TSAN_BIN=${SBX_TSAN_BIN:-$E2E_ROOT/build-tsan/sandbox-controller}


# start_limited NAME BIN [FLAGS...]: the controller BIN under `ulimit -n 256`
# on fresh ports (MPORT, PPORT); pid in CTL_PID.
start_limited() {
  local name=$1 bin=$2; shift 2
  MPORT=$(free_port); PPORT=$(free_port)
  cat >"$E2E_DIR/limited-$name.sh" <<SH
#!/usr/bin/env bash
ulimit -n 256
exec "$bin" "\$@"
SH
  chmod +x "$E2E_DIR/limited-$name.sh"
  CONTROLLER_BIN="$E2E_DIR/limited-$name.sh" controller_start "$name" \
    --metrics-bind-address "127.0.0.1:$MPORT" --health-probe-bind-address "127.0.0.1:$PPORT" "$@"
}

# start_other NAME BIN [FLAGS...]: start_limited for a controller beside the
# main one: its ports in OTHER_M / OTHER_P, MPORT / PPORT left the main's.
start_other() {
  local main_m=$MPORT main_p=$PPORT
  start_limited "$@"
  OTHER_M=$MPORT OTHER_P=$PPORT
  MPORT=$main_m PPORT=$main_p
}

# each_build FN: FN BIN for each sanitizer build there is (hack/test.sh builds
# both first), or for CONTROLLER_BIN when there is none.
each_build() {
  local ran=0 b
  for b in "$ASAN_BIN" "$TSAN_BIN"; do
    [ -x "$b" ] || continue
    "$1" "$b"; ran=1
  done
  [ $ran = 1 ] || "$1" "$CONTROLLER_BIN"
}

code() { curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$1"; }
ready() { [ "$(code "http://127.0.0.1:$PPORT/readyz")" = 200 ]; }

setup() {
  cluster_up
  grant_controller_rbac
  new_namespace slow
  webhook_certs
  start_limited ctl "$CONTROLLER_BIN"
  MAIN_PID=$CTL_PID
  wait_for 60 ready || say "controller not ready"
}

test_each_endpoint_on_its_own_listener() {
  local m="http://127.0.0.1:$MPORT" p="http://127.0.0.1:$PPORT"
  expect_eq "$(code "$m/metrics")" 200 "/metrics on the metrics port"
  expect_eq "$(code "$p/healthz")" 200 "/healthz on the probe port"
  expect_eq "$(code "$p/readyz")" 200 "/readyz on the probe port"
  expect_eq "$(code "$p/metrics")" 404 "/metrics on the probe port"
  expect_eq "$(code "$m/healthz")" 404 "/healthz on the metrics port"
  expect_eq "$(code "$m/readyz")" 404 "/readyz on the metrics port"
}

# hold_slow N SECONDS LABEL: N slow clients on the probe port while /healthz
# is timed every second, late writers ask it five times a second and a Sandbox
# is created; prints the figures.
hold_slow() {
  local n=$1 secs=$2 label=$3 log="$E2E_DIR/ctl.log"
  python3 "$SLOW" 127.0.0.1 "$PPORT" "$n" "$secs" 5 >"$E2E_DIR/slow-$n.out" 2>&1 &
  local spid=$!
  sleep 3 # let the clients connect
  python3 "$LATE" 127.0.0.1 "$PPORT" /healthz $(((secs - 8) * 5)) 0.2 0.05 >"$E2E_DIR/late-$n.out" 2>&1 &
  local lpid=$!
  local l0 t0 lat=() codes=() i
  l0=$(wc -l <"$log"); t0=$SECONDS
  sandbox slow "$label" $IMG "key-$label" alice >/dev/null
  for i in $(seq 1 $((secs - 6))); do
    local out
    out=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 5 "http://127.0.0.1:$PPORT/healthz")
    codes+=("${out%% *}"); lat+=("${out##* }")
    sleep 1
  done
  local l1 t1
  l1=$(wc -l <"$log"); t1=$SECONDS
  wait "$spid"; wait "$lpid"
  local bad max p50 rate
  bad=$(printf '%s\n' "${codes[@]}" | grep -vc '^200$')
  max=$(printf '%s\n' "${lat[@]}" | sort -g | tail -1)
  p50=$(printf '%s\n' "${lat[@]}" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  rate=$(awk -v a="$l0" -v b="$l1" -v s=$((t1 - t0)) 'BEGIN {printf "%.2f", (b - a) / (s > 0 ? s : 1)}')
  say "  figures ($n slow connections, ulimit -n 256): /healthz ${#codes[@]} probes, $bad not 200," \
    "latency median ${p50}s max ${max}s; controller log $rate lines/s ($((l1 - l0)) lines in $((t1 - t0))s);" \
    "slow clients: $(cat "$E2E_DIR/slow-$n.out"); late writers: $(cat "$E2E_DIR/late-$n.out")"
  expect_eq "$bad" 0 "/healthz answers while $n slow connections are held"
  expect_eq "$(sed -n 's/.*failed=\([0-9]*\).*/\1/p' "$E2E_DIR/late-$n.out")" 0 \
    "/healthz answers clients that write 50 ms after connecting while $n slow connections are held"
  awk -v m="$max" 'BEGIN {exit !(m < 1.0)}' || fail "/healthz max latency ${max}s with $n slow connections"
  awk -v r="$rate" 'BEGIN {exit !(r <= 3)}' || fail "controller log grows $rate lines/s"
  wait_for 60 bound slow "$label" || fail "$label not bound while $n slow connections are held"
  kill -0 "$MAIN_PID" 2>/dev/null || fail "controller died"
}

test_slow_a_300_connections() { hold_slow 300 30 s300; }
test_slow_b_1000_connections() { hold_slow 1000 30 s1000; }

# sigterm_with_keepalive BIN: a second controller (its own ports) gets SIGTERM
# while keep-alive clients hammer /readyz and /metrics.
sigterm_with_keepalive() {
  local bin=$1 build name
  build=$(basename "$(dirname "$bin")"); name="term-$build"
  start_other "$name" "$bin"
  local pid=$CTL_PID mport=$OTHER_M pport=$OTHER_P
  wait_for 120 eval '[ "$(code "http://127.0.0.1:$pport/readyz")" = 200 ]' || fail "$build controller not ready"
  python3 - "$mport" "$pport" >"$E2E_DIR/keepalive-$build.out" 2>&1 <<'PY' &
import socket, sys, time
mport, pport = int(sys.argv[1]), int(sys.argv[2])
conns = []
for i in range(16):
    port, path = (pport, "/readyz") if i % 2 else (mport, "/metrics")
    s = socket.create_connection(("127.0.0.1", port)); s.settimeout(2)
    conns.append((s, path))
end = time.time() + 30
while time.time() < end and conns:
    for c in list(conns):
        s, path = c
        try:
            s.sendall(("GET %s HTTP/1.1\r\nHost: x\r\n\r\n" % path).encode())
            if not s.recv(65536):
                conns.remove(c)
        except OSError:
            conns.remove(c)
print("keep-alive clients done", flush=True)
PY
  local kpid=$!
  sleep 2
  local t0=$SECONDS
  kill -TERM "$pid"
  wait_dead "$pid" 30 || fail "$build controller did not exit within 30 s of SIGTERM"
  say "  SIGTERM with 16 keep-alive clients: $build controller exited in $((SECONDS - t0))s"
  kill "$kpid" 2>/dev/null; wait "$kpid" 2>/dev/null
  clean_stop "$name" "SIGTERM ($build)"
}

# clean_stop NAME WHAT: the log NAME.log ends in a clean stop, with no
# sanitizer report in it.
clean_stop() {
  local log="$E2E_DIR/$1.log"
  grep -q '"msg":"stopped"' "$log" || fail "no clean stop in $1.log"
  local reports="ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|WARNING: ThreadSanitizer"
  if grep -qE "$reports" "$log"; then
    fail "sanitizer report on $2: $(grep -m1 -A3 -E "$reports" "$log" | tr '\n' ' ')"
  fi
}

test_sigterm_with_keepalive_clients() { each_build sigterm_with_keepalive; }

# sigterm_idle BIN: a second controller, its caches synced and nothing
# queued, gets SIGTERM and exits within 3 s. Each watch notices the stop at
# its next progress callback (libcurl calls it about once a second on an idle
# stream); stopped one after another, its eleven watches took 4 to 6 s, most
# of the 10 s controller_stop gives a controller before SIGKILL (which skips
# LeakSanitizer's report too).
sigterm_idle() {
  local bin=$1 build name
  build=$(basename "$(dirname "$bin")"); name="idle-$build"
  start_other "$name" "$bin"
  local pid=$CTL_PID pport=$OTHER_P
  wait_for 120 eval '[ "$(code "http://127.0.0.1:$pport/readyz")" = 200 ]' || fail "$build controller not ready"
  sleep 2
  local t0 t; t0=$(date +%s.%N)
  kill -TERM "$pid"
  wait_dead "$pid" 30 || fail "$build controller did not exit within 30 s of SIGTERM"
  t=$(python3 -c "print(round($(date +%s.%N) - $t0, 2))")
  say "  SIGTERM, idle: $build controller exited in ${t}s"
  expect_ok python3 -c "import sys; sys.exit(0 if $t < 3 else 1)"
  clean_stop "$name" "SIGTERM, idle ($build)"
}

test_sigterm_idle_within_3s() { each_build sigterm_idle; }

# sigterm_while_writing BIN: a second controller (its own ports) gets SIGTERM
# while one of its workers is inside a status write, held there 4 s by
# SBX_FAULT_DELAYS just after it took the network probe's state. The shutdown
# must wait for the worker before it frees what the worker reads: a sanitizer
# build reports the read after the free (the TSan report of CI's run of
# 2026-12-03, test_warm.sh).
sigterm_while_writing() {
  local bin=$1 build name n
  build=$(basename "$(dirname "$bin")"); name="wstop-$build"
  SBX_FAULT_DELAYS=netverify-condition=4000 start_other "$name" "$bin"
  local pid=$CTL_PID pport=$OTHER_P
  wait_for 120 eval '[ "$(code "http://127.0.0.1:$pport/readyz")" = 200 ]' || fail "$build controller not ready"
  n=$(held "$name")
  sandbox slow "w-$build" $IMG "key-w-$build" alice >/dev/null
  wait_for 60 eval '[ "$(held "$name")" -gt "$n" ]' || fail "$build controller's worker never reached the held status write"
  kill -TERM "$pid"
  wait_dead "$pid" 30 || fail "$build controller did not exit within 30 s of SIGTERM during a status write"
  clean_stop "$name" "SIGTERM during a status write ($build)"
}
held() { grep -c '"point":"netverify-condition"' "$E2E_DIR/$1.log"; }

test_sigterm_during_a_status_write() { each_build sigterm_while_writing; }

# mcert CN: a self-signed pair for 127.0.0.1 in $E2E_DIR/mcert (written aside
# and moved in, as a Secret volume update does).
mcert() {
  mkdir -p "$E2E_DIR/mcert" "$E2E_DIR/mcert.new"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj "/CN=$1" \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$E2E_DIR/mcert.new/tls.key" -out "$E2E_DIR/mcert.new/tls.crt" 2>/dev/null
  mv "$E2E_DIR/mcert.new/tls.key" "$E2E_DIR/mcert/tls.key"
  mv "$E2E_DIR/mcert.new/tls.crt" "$E2E_DIR/mcert/tls.crt"
}
served_cn() { # served_cn PORT: the CN of the certificate the listener presents
  openssl s_client -connect "127.0.0.1:$1" </dev/null 2>/dev/null | openssl x509 -noout -subject 2>/dev/null |
    sed 's/.*CN *= *//'
}

# --metrics-cert-path: /metrics over HTTPS only, and a rotated pair is served
# without a restart (issue 9 item 6, the TLS part).
test_metrics_over_https() {
  mcert first
  start_other tls "$CONTROLLER_BIN" --metrics-cert-path "$E2E_DIR/mcert"
  local pid=$CTL_PID mport=$OTHER_M
  wait_for 30 eval '[ "$(curl -s -o /dev/null -w "%{http_code}" --cacert "$E2E_DIR/mcert/tls.crt" "https://127.0.0.1:$mport/metrics")" = 200 ]' ||
    fail "/metrics over HTTPS"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$mport/metrics")" 000 "plain HTTP on the HTTPS listener"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 --tls-max 1.1 -k "https://127.0.0.1:$mport/metrics")" 000 "TLS 1.1"
  expect_eq "$(served_cn "$mport")" first "certificate served"
  mcert second
  wait_for 10 eval '[ "$(served_cn "$mport")" = second ]' || fail "rotated certificate not served without a restart"
  expect_eq "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$E2E_DIR/mcert/tls.crt" "https://127.0.0.1:$mport/metrics")" 200 "/metrics with the rotated certificate"
  controller_stop "$pid"
}

# SIGTERM while the caches cannot sync (the API server is unreachable) stops
# the controller at once, not after the 120 s sync timeout.
test_sigterm_while_caches_sync() {
  sed -E 's#(server: https://[^:]+):[0-9]+#\1:1#' "$E2E_DIR/controller.kubeconfig" >"$E2E_DIR/dead.kubeconfig"
  start_other nosync "$CONTROLLER_BIN" --kubeconfig "$E2E_DIR/dead.kubeconfig"
  local pid=$CTL_PID pport=$OTHER_P
  wait_for 10 eval '[ "$(code "http://127.0.0.1:$pport/readyz")" = 503 ]' || fail "not serving /readyz 503 while unsynced"
  local t0=$SECONDS
  kill -TERM "$pid"
  wait_dead "$pid" 10 || fail "SIGTERM during the cache sync not honoured within 10 s"
  say "  SIGTERM while the caches could not sync: exited in $((SECONDS - t0))s"
  grep -q '"msg":"stopped"' "$E2E_DIR/nosync.log" || fail "no clean stop in the log"
  kill -KILL "$pid" 2>/dev/null
}

# A Sandbox CREATE review as the API server posts it (no owner: namespace
# mode allows it without a SubjectAccessReview).
review_json() {
  cat <<'JSON'
{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
 "request": {"uid": "drain-1", "operation": "CREATE", "namespace": "slow", "name": "drain",
  "kind": {"group": "sandbox.dev", "version": "v1alpha1", "kind": "Sandbox"},
  "resource": {"group": "sandbox.dev", "version": "v1alpha1", "resource": "sandboxes"},
  "userInfo": {"username": "alice"},
  "object": {"apiVersion": "sandbox.dev/v1alpha1", "kind": "Sandbox",
   "metadata": {"name": "drain", "namespace": "slow"}, "spec": {"image": "registry.local/agent:1.0"}}}}
JSON
}
# review_code PORT: the HTTP status of that review posted to the webhook on
# PORT (000: no answer).
review_code() {
  curl -sk -o /dev/null -w '%{http_code}' --max-time 2 -H 'Content-Type: application/json' \
    --data-binary @"$E2E_DIR/review.json" "https://127.0.0.1:$1/validate-sandbox"
}
now_ms() { date +%s%3N; }

# launch_webhook NAME BIN [FLAGS...]: a controller beside the main one
# serving the webhook on a fresh port (WPORT), the review to post in
# $E2E_DIR/review.json (review_json); its pid in CTL_PID, its probe port in
# OTHER_P. start_webhook: the same, once ready and answering the review.
launch_webhook() {
  local name=$1 bin=$2; shift 2
  WPORT=$(free_port)
  review_json >"$E2E_DIR/review.json"
  start_other "$name" "$bin" --webhook-bind-address "127.0.0.1:$WPORT" --webhook-cert-dir "$WEBHOOK_CERT_DIR" "$@"
}
start_webhook() {
  local name=$1
  launch_webhook "$@"
  wait_for 120 eval '[ "$(code "http://127.0.0.1:$OTHER_P/readyz")" = 200 ]' || fail "$name: controller not ready"
  wait_for 10 eval '[ "$(review_code "$WPORT")" = 200 ]' || fail "$name: webhook not answering before SIGTERM"
}

# webhook_drain BIN: a controller serving the webhook (default drain, 5 s)
# gets SIGTERM. The API server keeps calling a terminating pod until its
# endpoints catch up, and every webhook fails closed: /readyz must fail within
# a second while the webhook still answers reviews 2 s after the signal, and
# the process exits within the drain and 3 s.
webhook_drain() {
  local bin=$1 build name
  build=$(basename "$(dirname "$bin")"); name="drain-$build"
  E2E_KEEP_DRAIN=1 start_webhook "$name" "$bin" # the default drain, 5 s
  local pid=$CTL_PID pport=$OTHER_P wport=$WPORT
  local t0 el start c unready="" unready_code="" last_ok=-1 after=""
  t0=$(now_ms)
  kill -TERM "$pid"
  while kill -0 "$pid" 2>/dev/null && [ $(($(now_ms) - t0)) -lt 20000 ]; do
    if [ -z "$unready" ]; then
      c=$(code "http://127.0.0.1:$pport/readyz")
      el=$(($(now_ms) - t0))
      if [ "$c" != 200 ]; then unready=$el unready_code=$c; say "  /readyz $c ${el} ms after SIGTERM"; fi
    fi
    start=$(($(now_ms) - t0))
    c=$(review_code "$wport")
    if [ "$c" = 200 ]; then last_ok=$start; elif [ -z "$after" ]; then after="$c at ${start} ms"; fi
    sleep 0.1
  done
  el=$(($(now_ms) - t0))
  say "  SIGTERM ($build): last review answered 200 when posted ${last_ok} ms after it, first other answer: ${after:-none}, exit after ${el} ms"
  [ -n "$unready" ] && [ "$unready" -le 1000 ] ||
    fail "/readyz answered 200 until ${unready:-the exit, ${el}} ms after SIGTERM, want 503 within 1000 ($build)"
  [[ "$unready_code" =~ ^(503|000)$ ]] || fail "/readyz answered $unready_code after SIGTERM, want 503 (or refused)"
  [ "$last_ok" -ge 2000 ] ||
    fail "no review answered 200 when posted 2000 ms or more after SIGTERM (last: ${last_ok} ms; then ${after:-none}) ($build)"
  wait_dead "$pid" 1 || fail "$build controller did not exit within 20 s of SIGTERM"
  [ "$el" -le 8000 ] || fail "$build controller exited ${el} ms after SIGTERM, want <= 8000 (drain 5 s + 3 s)"
  clean_stop "$name" "SIGTERM with the webhook ($build)"
}

test_sigterm_drains_the_webhook() { each_build webhook_drain; }

# A second SIGTERM during the drain (an operator's ^C twice) ends it at once.
test_second_sigterm_ends_the_drain() {
  start_webhook drain-twice "$CONTROLLER_BIN" --webhook-drain 60s
  local pid=$CTL_PID wport=$WPORT
  kill -TERM "$pid"
  sleep 1
  expect_eq "$(review_code "$wport")" 200 "a review 1 s into a 60 s drain"
  local t0=$SECONDS
  kill -TERM "$pid"
  wait_dead "$pid" 5 || fail "a second SIGTERM did not end the 60 s drain within 5 s"
  say "  second SIGTERM: exited in $((SECONDS - t0))s"
  clean_stop drain-twice "a second SIGTERM during the drain"
}

# two_reviews PORT: the review posted twice in one curl, which keeps the
# connection alive between them as the API server does; for each,
# "CODE/NEW-CONNECTIONS/CONNECTION-HEADER" (e.g. "200/0/": the second
# reused the first's connection).
two_reviews() {
  local u="https://127.0.0.1:$1/validate-sandbox"
  curl -sk -o /dev/null -o /dev/null -w '%{http_code}/%{num_connects}/%header{connection} ' --max-time 4 \
    -H 'Content-Type: application/json' --data-binary @"$E2E_DIR/review.json" "$u" "$u"
}

# During the drain the API server keeps reusing its kept-alive connections to
# the terminating replica (conntrack keeps them on the old pod), and the calls
# on them fail when the listener closes: every answer of the drain must say
# "Connection: close" and close its connection, so the next call connects
# again (through the Service, to a ready replica). Before SIGTERM, keep-alive
# is kept.
test_drain_answers_close_keepalive() {
  start_webhook drain-close "$CONTROLLER_BIN" --webhook-drain 3s
  local pid=$CTL_PID pport=$OTHER_P wport=$WPORT
  expect_eq "$(two_reviews "$wport")" "200/1/ 200/0/ " "two reviews on one keep-alive connection before SIGTERM"
  kill -TERM "$pid"
  wait_for 2 eval '[ "$(code "http://127.0.0.1:$pport/readyz")" != 200 ]' || fail "/readyz still 200 after SIGTERM"
  expect_eq "$(two_reviews "$wport")" "200/1/close 200/1/close " \
    "two reviews during the drain: each answered, saying Connection: close, the second on a new connection"
  wait_dead "$pid" 10 || fail "controller did not exit within 10 s of SIGTERM (drain 3 s)"
  clean_stop drain-close "answers closing their connections during the drain"
}

# A replica serving the webhook is Ready only once its webhook listens: the
# Service sends the API server's admission calls to every Ready replica, and
# every webhook fails closed, so a Ready replica whose port refuses them
# refuses Sandbox creates during a rollout. The listener is held 3 s before it
# binds (SBX_FAULT_DELAYS=webhook-start); /readyz and the port are polled
# every 100 ms: /readyz must not answer 200 while a connection to the port is
# refused, and must answer 200 once it listens.
test_not_ready_before_the_webhook_listens() {
  SBX_FAULT_DELAYS=webhook-start=3000 launch_webhook wstart "$CONTROLLER_BIN"
  local pid=$CTL_PID pport=$OTHER_P wport=$WPORT t0 el early="" ready=""
  t0=$(now_ms)
  while [ -z "$ready" ] && [ $(($(now_ms) - t0)) -lt 60000 ] && kill -0 "$pid" 2>/dev/null; do
    if [ "$(code "http://127.0.0.1:$pport/readyz")" = 200 ]; then
      el=$(($(now_ms) - t0))
      # /readyz first, then the port: a listener that binds in between hides
      # an early Ready, never makes one up.
      if listening "$wport"; then ready=$el; elif [ -z "$early" ]; then early=$el; fi
    fi
    sleep 0.1
  done
  say "  /readyz 200 while the webhook port refused: ${early:-never}; Ready with the webhook listening: ${ready:-never} (ms after start)"
  grep -q '"point":"webhook-start"' "$E2E_DIR/wstart.log" || fail "the webhook listener was never held (webhook-start)"
  [ -z "$early" ] || fail "/readyz answered 200 ${early} ms after start while the webhook port refused connections"
  [ -n "$ready" ] || fail "/readyz never answered 200 with the webhook listening (60 s)"
  expect_eq "$(review_code "$wport")" 200 "a review once Ready"
  controller_stop "$pid"
}

setup
e2e_main
