#!/usr/bin/env bash
# rdma-core's own test suite (tests/ at tag v44.0, the generic tests: not
# the mlx5/efa ones) with Debian's python3-pyverbs against uroce's drop-in
# libibverbs.so.1, in a network namespace of its own. uroce keeps no copy
# of the suite: bring a checkout of linux-rdma/rdma-core.
#   scripts/rdma-core-tests.sh RDMA_CORE_CHECKOUT [BUILD_DIR] [-- ARGS...]
# ARGS go to the suite's run_tests.py (e.g. a test name to run one). Prints
# the suite's verbose output, then one line of counts; exits non-zero if a
# test failed or errored. Needs root (ip netns).
set -euo pipefail
src=${1:?usage: $0 RDMA_CORE_CHECKOUT [BUILD_DIR] [-- ARGS...]}
shift
build=build
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  build=$1
  shift
fi
[ "${1:-}" = -- ] && shift
uroce=$(realpath "$build/uroce")
[ -x "$uroce" ] || { echo "no $build/uroce: build first" >&2; exit 1; }
py=/usr/bin/python3 # Debian's, which sees python3-pyverbs
"$py" -c 'import pyverbs' 2>/dev/null ||
  { echo "pyverbs missing: apt install python3-pyverbs" >&2; exit 1; }

work=$(mktemp -d)
ns=uroce-rdmacore-$$
trap 'ip netns del "$ns" 2>/dev/null || true; rm -rf "$work"' EXIT
# The suite as tagged v44.0 when the checkout is a git repository (the
# Debian pyverbs is rdma-core 44's), else the checkout's tests/ as it is.
if git -C "$src" rev-parse -q --verify v44.0 >/dev/null 2>&1; then
  git -C "$src" archive v44.0 tests | tar -x -C "$work"
else
  cp -r "$src/tests" "$work/"
fi
[ -f "$work/tests/run_tests.py" ] || { echo "no tests/run_tests.py in $src" >&2; exit 1; }
if [ $# -eq 0 ]; then
  for f in "$work"/tests/test_*.py; do
    m=$(basename "$f" .py)
    case $m in *mlx5* | *efa*) continue ;; esac
    set -- "$@" "tests.$m"
  done
  set -- -v "$@"
fi

ip netns add "$ns"
ip -n "$ns" link set lo up
cd "$work"
rc=0
ip netns exec "$ns" "$uroce" run --addr 127.0.0.2 -- \
  "$py" tests/run_tests.py "$@" 2>&1 | tee "$work/log" || rc=$?
ok=$(grep -c '\.\.\. ok$' "$work/log" || true)
skip=$(grep -c '\.\.\. skipped' "$work/log" || true)
fail=$(grep -c '\.\.\. FAIL$' "$work/log" || true)
err=$(grep -c '\.\.\. ERROR$' "$work/log" || true)
echo "rdma-core tests over uroce: $ok passed, $fail failed, $err errors, $skip skipped"
exit $rc
