#!/usr/bin/env bash
# End-to-end: the README's first command, hack/demo.sh, run non-interactively
# (SBX_DEMO_EXIT=1) in a folder of its own, and what it must show: alice's
# Sandbox Ready, `id` run in it as the sandbox's user, a file written into her
# workspace and shown on disk, bob refused at admission and at the exec gate.
# SBX_DEMO_NODE=real (set here unless the caller sets it) makes a missing real
# node a failure instead of the demo's fallback to kwok.
. "$(dirname "$0")/lib.sh"

setup() {
  E2E_DIR=$(mktemp -d "${TMPDIR:-/tmp}/sbx-e2e.XXXXXX")
  trap demo_cleanup EXIT
  DEMO_LOG=$E2E_DIR/demo.out
  local t0=$SECONDS
  SBX_DEMO_EXIT=1 SBX_DEMO_DIR="$E2E_DIR/demo" SBX_DEMO_NODE=${SBX_DEMO_NODE:-real} \
    bash "$E2E_ROOT/hack/demo.sh" </dev/null >"$DEMO_LOG" 2>&1
  DEMO_RC=$?
  say "hack/demo.sh exited $DEMO_RC after $((SECONDS - t0)) s; its output:"
  sed 's/^/  | /' "$DEMO_LOG" >&2
}

demo_cleanup() {
  # The demo stops its own cluster on exit; this only catches a demo that died.
  [ -d "$E2E_DIR/demo" ] && "$E2E_ROOT/hack/cluster.sh" down "$E2E_DIR/demo" >/dev/null 2>&1
  if [ "$E2E_FAILED" -eq 0 ] && [ -z "${SBX_E2E_KEEP:-}" ]; then rm -rf "$E2E_DIR"; else say "logs kept in $E2E_DIR"; fi
}

# shows REGEX WHAT: a line of the demo's output matches REGEX (grep -E).
shows() { grep -Eq -- "$1" "$DEMO_LOG" || fail "the demo did not show $2 (no line matching /$1/)"; }

test_1_the_demo_exits_0() {
  expect_eq "$DEMO_RC" 0 "hack/demo.sh's exit status"
}

test_2_alice_sandbox_ready() {
  shows '^demo +Running +sbx-[0-9a-f]{32} +demo-task-1 +alice +True' "alice's Sandbox demo Running and Ready (kubectl get sbx)"
}

test_3_id_in_the_sandbox() {
  # The sandbox's process runs as the configured non-root user on a real node.
  shows '^uid=1000(\([a-z]+\))? gid=1000' "the output of id in alice's sandbox"
  expect_fail grep -q "falling back to kwok" "$DEMO_LOG"
}

test_4_file_on_disk() {
  # Written in the sandbox as uid 1000, read back from the host's disk.
  shows '^on disk: [^ ]*/alice/workspace/hello.txt \(owner 1000:1000\): hello from alice$' \
    "the file alice's sandbox wrote, shown on disk"
}

test_5_bob_refused() {
  shows 'bob may not use workspace owner "alice" in namespace default' "bob's Sandbox refused at admission"
  shows '^bob.s exec into .*: refused' "bob's exec refused by the exec gate"
}

test_6_nothing_left_behind() {
  local left
  left=$(pgrep -fa "$E2E_DIR/demo" || true)
  expect_eq "$left" "" "processes of the demo left running"
}

setup
e2e_main
