#!/bin/bash
# uroce sim next to htsim (the Ultra Ethernet build, htsim_uec) on the same
# scenario: a k-ary three-tier fat-tree, 100 Gb/s and 1 us per hop, 4 KiB
# MTU, a permutation of 2 MiB messages with packet spraying. htsim gets the
# very permutation uroce drew (its flows.csv becomes htsim's connection
# matrix). The two run alternately, RUNS times each; the script prints the
# medians of wall time, CPU time and peak RSS, the ratios, and each one's
# FCTs.
#
#   bench/sim_vs_htsim.sh HTSIM_UEC [K] [RUNS] [--load]
#
# HTSIM_UEC is the htsim_uec binary, built by hand outside this repository
# (github.com/ultraethernet/uet-htsim: htsim/sim, cmake, target htsim_uec).
# --load runs both with two `nice -n 19` busy loops beside them.
set -euo pipefail

HTSIM=${1:?usage: bench/sim_vs_htsim.sh HTSIM_UEC [K] [RUNS] [--load]}
K=${2:-16}
RUNS=${3:-3}
LOAD=${4:-}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
UROCE=$ROOT/build/uroce
[ -x "$HTSIM" ] || { echo "sim_vs_htsim: $HTSIM: not an executable" >&2; exit 2; }
[ -x "$UROCE" ] || { echo "sim_vs_htsim: $UROCE missing: run make build" >&2; exit 2; }
case $K in 4|6|8|10|12|14|16|18|20|22|24|26|28|30|32) ;;
  *) echo "sim_vs_htsim: K must be even, 4..32 (got $K)" >&2; exit 2 ;; esac

W=$(mktemp -d)
BUSY=()
cleanup() {
  for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT

HOSTS=$((K * K * K / 4))
cat > "$W/perm.yaml" <<EOF
name: perm
seed: 1
topology:
  kind: fat_tree
  k: $K
  links:
    all: {rate_gbps: 100, delay_us: 1}
routing: spray
transport:
  mtu: 4096
  out_of_order: auto
workload:
  kind: permutation
  size: 2MiB
EOF

"$UROCE" sim -q --no-plots -o "$W/first" "$W/perm.yaml" > /dev/null
python3 - "$W/first/flows.csv" "$HOSTS" > "$W/perm.cm" <<'EOF'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("Nodes %s" % sys.argv[2])
print("Connections %d" % len(rows))
for i, r in enumerate(rows):
    print("%s->%s id %d start 0 size %s" % (r["src"], r["dst"], i + 1, r["bytes"]))
EOF

if [ "$LOAD" = --load ]; then
  for _ in 1 2; do nice -n 19 sh -c 'while :; do :; done' & BUSY+=($!); done
fi

# One run of each, alternately; /usr/bin/time's figures to a line each.
for r in $(seq "$RUNS"); do
  /usr/bin/time -f "%e %U %S %M" -o "$W/u$r.time" \
    "$UROCE" sim -q --no-plots -o "$W/u$r" "$W/perm.yaml" > /dev/null
  # -end is a bound on simulated time (us); htsim stops when flows finish.
  (cd "$W" && /usr/bin/time -f "%e %U %S %M" -o "$W/h$r.time" \
    "$HTSIM" -tm "$W/perm.cm" -tiers 3 -linkspeed 100000 -mtu 4096 \
    -hop_latency 1 -end 100000 -seed 1 > "$W/h$r.out" 2>&1)
done

python3 - "$W" "$RUNS" "$K" "$HOSTS" "${LOAD:-idle}" <<'EOF'
import csv, re, statistics as st, sys
w, runs, k, hosts, load = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
def times(p):
    v = [open("%s/%s%d.time" % (w, p, r)).read().split()[-4:] for r in range(1, runs + 1)]
    wall = st.median(float(x[0]) for x in v)
    cpu = st.median(float(x[1]) + float(x[2]) for x in v)
    rss = st.median(int(x[3]) for x in v) / 1024
    return wall, cpu, rss
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]
u = [float(r["fct_us"]) for r in csv.DictReader(open("%s/u1/flows.csv" % w)) if r["fct_us"]]
h = [float(m.group(1)) for m in re.finditer(r"finished at ([0-9.]+)", open("%s/h1.out" % w).read())]
uw, uc, ur = times("u")
hw, hc, hr = times("h")
print("permutation, k=%s fat-tree (%s hosts), 2 MiB, spraying; %d runs each, alternating, medians (%s)" % (k, hosts, runs, load))
print("%-12s %9s %9s %9s %7s %9s %9s %9s" % ("simulator", "wall s", "CPU s", "RSS MB", "flows", "FCT p50", "FCT p99", "FCT max"))
for name, a, b, c, f in (("uroce sim", uw, uc, ur, u), ("htsim_uec", hw, hc, hr, h)):
    print("%-12s %9.2f %9.2f %9.0f %7d %9.1f %9.1f %9.1f" % (name, a, b, c, len(f), pct(f, .5), pct(f, .99), max(f) if f else 0))
print("htsim / uroce: wall %.2fx, CPU %.2fx, memory %.2fx" % (hw / uw, hc / uc, hr / ur))
if len(h) != len(u):
    print("htsim finished %d of %d flows" % (len(h), len(u)))
    sys.exit(1)
EOF
