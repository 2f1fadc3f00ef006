#!/usr/bin/env bash
# Loss recovery of the standard and the multipath transport, side by side:
# perftest's ib_write_bw and ib_read_bw, unmodified, 64 KiB messages, over
# uroce's libibverbs.so.1 drop-in, with `uroce run --rx-drop P` on both
# ends, P = 0, 1, 2, 5%. For each: the data packets the sending side sent
# per packet needed (iterations x 16 at 4 KiB MTU) and the bandwidth
# relative to the lossless run of the same transport. Runs in a network
# namespace of its own (root), so that it shares nothing with other
# programs on the host's loopback.
#
# Usage: bench/loss_bench.sh [BUILD_DIR] [ITERS] [REPS]
#   BUILD_DIR  the build with `uroce` and compat/lib (default: build)
#   ITERS      perftest iterations (-n, default 500)
#   REPS       rounds, each running every case once; the median reported
#              (default 3: a 500-message run lasts tens of milliseconds,
#              which a busy host disturbs)
# LOSS_PROGS, LOSS_MODES (standard, auto) and LOSS_DROPS narrow the cases,
# e.g. LOSS_MODES=auto LOSS_DROPS="0 0.02".
set -euo pipefail
build=${1:-build}
iters=${2:-500}
reps=${3:-3}
uroce=$(realpath "$build/uroce")
[ -x "$uroce" ] || { echo "no $uroce: build first" >&2; exit 1; }
command -v ib_write_bw >/dev/null || { echo "needs perftest" >&2; exit 1; }
ns=uroce-loss-$$
ip netns add "$ns"
trap 'ip netns del "$ns" 2>/dev/null || true' EXIT
ip netns exec "$ns" ip link set lo up
tmp=$(mktemp -d)
port=18700

# One run: transport (standard, or auto: the two ends negotiate
# multipath), program, drop share. Prints "mbs sent needed".
run() {
  local mode=$1 prog=$2 drop=$3
  port=$((port + 1))
  UROCE_TRANSPORT=$mode "$uroce" run --ns "$ns" --addr 127.0.0.2 \
    --rx-drop "$drop" --stats -- "$prog" -x 1 -F -s 65536 -n "$iters" \
    -p "$port" >"$tmp/srv.out" 2>"$tmp/srv.err" &
  local srv=$!
  for _ in $(seq 200); do
    ip netns exec "$ns" ss -Hltn "sport = :$port" | grep -q . && break
    sleep 0.05
  done
  UROCE_TRANSPORT=$mode "$uroce" run --ns "$ns" --addr 127.0.0.3 \
    --rx-drop "$drop" --stats -- "$prog" -x 1 -F -s 65536 -n "$iters" \
    -p "$port" 127.0.0.2 >"$tmp/cli.out" 2>"$tmp/cli.err" || true
  wait "$srv" || true
  /usr/bin/python3 - "$prog" "$iters" "$tmp" <<'PY'
import re, sys
prog, iters, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def stats(f):
    m = re.search(r"stats: tx_pkts=(\d+).*acks_tx=(\d+)", open(f).read())
    return (int(m.group(1)) - int(m.group(2))) if m else 0
out = open(tmp + "/cli.out").read()
row = [l.split() for l in out.splitlines() if re.match(r"\s*65536\s", l)]
mbs = float(row[0][3]) if row else 0.0
# WRITE: the client sends the data; READ: the server answers with it.
sent = stats(tmp + ("/cli.err" if "write" in prog else "/srv.err"))
if not row or not sent:
    sys.exit("loss_bench: %s gave no result:\n%s%s" % (
        prog, open(tmp + "/cli.err").read()[-800:],
        open(tmp + "/srv.err").read()[-800:]))
print(mbs, sent, iters * 16)
PY
}

# Interleaved: each round runs every case once, so that a disturbance of
# the host lands on all of them alike; the median of the rounds is shown.
echo "median of $reps interleaved runs of $iters x 64 KiB each"
cases=()
for prog in ${LOSS_PROGS:-ib_write_bw ib_read_bw}; do
  for mode in ${LOSS_MODES:-standard auto}; do
    for drop in ${LOSS_DROPS:-0 0.01 0.02 0.05}; do
      cases+=("$mode $prog $drop")
    done
  done
done
for r in $(seq "$reps"); do
  for c in "${cases[@]}"; do
    # shellcheck disable=SC2086
    run $c >>"$tmp/$(echo "$c" | tr ' ' _)"
  done
done
printf '%-12s %-11s %6s %12s %10s %9s\n' program transport drop \
  'sent/needed' 'MB/s' 'vs 0%'
/usr/bin/python3 - "$tmp" "${cases[@]}" <<'PY'
import statistics, sys
tmp, cases = sys.argv[1], sys.argv[2:]
base = {}
for c in cases:
    mode, prog, drop = c.split()
    rows = [l.split() for l in open(tmp + "/" + c.replace(" ", "_"))
            if l.strip()]
    mbs = statistics.median(float(r[0]) for r in rows)
    sent = statistics.median(int(r[1]) for r in rows)
    need = int(rows[0][2])
    base.setdefault((prog, mode), mbs)
    b = base[(prog, mode)]
    print("%-12s %-11s %5.0f%% %12.2f %10.1f %9.2f" % (
        prog, "multipath" if mode == "auto" else mode, float(drop) * 100,
        sent / need if need else 0, mbs, mbs / b if b else 0))
PY
rm -rf "$tmp"
