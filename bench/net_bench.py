#!/usr/bin/python3
"""uroce over real UDP next to the kernel's TCP and UDP, side by side in one
run, on loopback (and across a veth pair between two network namespaces
unless VETH=0), in two conditions: as idle as the machine is, and with two
`nice -n 19` busy loops running (a laptop or CI runner whose cores are
shared). Rows (issue 25's table):

  - 64 KiB RDMA WRITE bandwidth: `uroce perf write bw`, inline progress and
    with the progress thread (what unmodified verbs programs get), and
    perftest's `ib_write_bw -s 65536` over the libibverbs drop-in, each
    against one iperf3 TCP stream; CPU seconds per GB moved (both sides
    together) next to TCP's;
  - 64 B SEND latency (half round trip, median): `uroce perf send lat`
    inline and `ib_send_lat -s 64` over the drop-in, against sockperf UDP
    ping-pong.

Each row is measured REPS times, interleaved, and the medians are
compared; a run that does not finish within its limit is counted and
shown as DNF. The load average is printed with each condition. Goals
(issue 25), in both conditions: ib_write_bw >= 1.0x iperf3, progress
thread >= 0.8x inline, ib_send_lat <= 1.5x sockperf, no DNF. Needs root
for the veth part; installs iperf3, sockperf and perftest if missing.
Run it in a network namespace of its own on a shared machine (fixed
ports): ip netns exec NS bench/net_bench.py"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
UROCE = os.environ.get("UROCE", os.path.join(ROOT, "build", "uroce"))
NETNS = os.path.join(ROOT, "tests", "net", "netns.sh")
REPS = int(os.environ.get("REPS", "3"))
SECS = int(os.environ.get("SECS", "3"))


PACKAGE = {"ib_write_bw": "perftest"}


def ensure(progs):
    missing = [PACKAGE.get(p, p) for p in progs if not shutil.which(p)]
    if missing:
        subprocess.run(["apt-get", "install", "-y", "-qq"] + missing,
                       check=True, stdout=subprocess.DEVNULL,
                       env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))


def ns(n):
    return ["ip", "netns", "exec", n] if n else []


def timed(cmd):
    """Popen wrapped in /usr/bin/time: returns (proc, timefile)."""
    tf = "/tmp/uroce-bench-time.%d.%d" % (os.getpid(), time.monotonic_ns())
    return subprocess.Popen(["/usr/bin/time", "-f", "%U %S %e", "-o", tf] +
                            cmd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True), tf


def cpu_of(tf):
    try:
        u, s, e = open(tf).read().split()[-3:]
        os.unlink(tf)
        return (float(u) + float(s)) / max(float(e), 1e-9)
    except (OSError, ValueError):
        return float("nan")


def cpu_secs(tf):
    try:
        u, s_, e = open(tf).read().split()[-3:]
        os.unlink(tf)
        return float(u) + float(s_)
    except (OSError, ValueError):
        return float("nan")


class DNF(Exception):
    pass


def pair_abs(srv_cmd, cli_cmd, srv_ns, cli_ns, limit, settle=0.4):
    """Like pair, but CPU in seconds (both sides summed), and DNF when the
    client does not finish within limit seconds."""
    s, stf = timed(ns(srv_ns) + srv_cmd)
    time.sleep(settle)
    c, ctf = timed(ns(cli_ns) + cli_cmd)
    try:
        out_c = c.communicate(timeout=limit)[0]
    except subprocess.TimeoutExpired:
        c.kill()
        s.kill()
        c.communicate()
        s.communicate()
        cpu_secs(stf)
        cpu_secs(ctf)
        raise DNF()
    try:
        out_s = s.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        s.kill()
        out_s = s.communicate()[0]
    return out_s, out_c, cpu_secs(stf) + cpu_secs(ctf)


def pair(srv_cmd, cli_cmd, srv_ns, cli_ns, settle=0.4):
    s, stf = timed(ns(srv_ns) + srv_cmd)
    time.sleep(settle)
    c, ctf = timed(ns(cli_ns) + cli_cmd)
    out_c = c.communicate(timeout=120)[0]
    try:
        out_s = s.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        s.kill()
        out_s = s.communicate()[0]
    return out_s, out_c, cpu_of(stf), cpu_of(ctf)


def med(xs):
    return statistics.median(xs)


# ---- issue 25's table: each function returns (figure, cpu s per GB or
# None) or raises DNF ----

LIMIT = SECS * 4 + 30


def t_iperf(path):
    srv_a, cli_a, sn, cn = path
    os_, oc, cpu = pair_abs(["iperf3", "-s", "-1", "-B", srv_a, "-p", "5299"],
                            ["iperf3", "-c", srv_a, "-B", cli_a, "-p", "5299",
                             "-t", str(SECS), "-l", "64K", "-J", "-C",
                             "cubic"], sn, cn, LIMIT)
    j = json.loads(oc)
    r = j["end"]["sum_received"]
    return r["bits_per_second"] / 8e9, cpu / (r["bytes"] / 1e9)


def t_perf_bw(path, extra=()):
    srv_a, cli_a, sn, cn = path
    args = ["write", "bw", "-s", "65536", "-D", str(SECS), "--json"] + \
        list(extra)
    os_, oc, cpu = pair_abs([UROCE, "perf"] + args + ["--addr", srv_a],
                            [UROCE, "perf"] + args + ["--addr", cli_a, srv_a],
                            sn, cn, LIMIT)
    j = [json.loads(l) for l in oc.splitlines() if l.startswith("{")]
    if not j:
        raise RuntimeError("uroce perf failed: " + oc + os_)
    moved = j[-1]["bytes"] * j[-1]["iterations"]  # bytes: message size
    return j[-1]["bw_gb_s"] / 8, cpu / (moved / 1e9)


def perftest(path, prog, args, port):
    srv_a, cli_a, sn, cn = path
    run = [UROCE, "run"]
    os_, oc, cpu = pair_abs(run + ["--addr", srv_a, "--", prog] + args +
                            ["-p", str(port)],
                            run + ["--addr", cli_a, "--", prog] + args +
                            ["-p", str(port), srv_a], sn, cn, LIMIT, 0.8)
    rows = [l.split() for l in oc.splitlines()
            if re.match(r"^\s*\d+\s+\d+\s", l)]
    if not rows:
        raise RuntimeError(prog + " failed: " + oc[-600:] + os_[-600:])
    return rows[-1], cpu


def t_ib_write_bw(path):
    row, cpu = perftest(path, "ib_write_bw",
                        ["-x", "1", "-s", "65536", "-D", str(int(SECS))],
                        18590)
    # #bytes #iterations BW-peak BW-average MsgRate, MB/s = 2^20 B/s
    gbs = float(row[3]) * 2**20 / 1e9
    return gbs, cpu / (gbs * int(SECS))


def t_sockperf(path):
    srv_a, cli_a, sn, cn = path
    os_, oc, cpu = pair_abs(["timeout", str(SECS + 8), "sockperf", "server",
                             "-i", srv_a, "-p", "11299"],
                            ["sockperf", "ping-pong", "-i", srv_a, "-p",
                             "11299", "-m", "64", "-t", str(SECS),
                             "--client_ip", cli_a], sn, cn, LIMIT)
    m = re.search(r"percentile 50\.000 =\s+([\d.]+)", oc)
    if not m:
        raise RuntimeError("sockperf failed: " + oc)
    return float(m.group(1)), None


def t_perf_lat(path, extra=()):
    srv_a, cli_a, sn, cn = path
    args = ["send", "lat", "-s", "64", "-n", str(int(SECS * 20000)),
            "--json"] + list(extra)
    os_, oc, cpu = pair_abs([UROCE, "perf"] + args + ["--addr", srv_a],
                            [UROCE, "perf"] + args + ["--addr", cli_a, srv_a],
                            sn, cn, LIMIT)
    j = [json.loads(l) for l in oc.splitlines() if l.startswith("{")]
    if not j:
        raise RuntimeError("uroce perf failed: " + oc + os_)
    return j[-1]["t_typical_us"], None


def t_ib_send_lat(path):
    row, cpu = perftest(path, "ib_send_lat",
                        ["-x", "1", "-s", "64", "-n", str(int(SECS * 20000))],
                        18591)
    # #bytes #iterations t_min t_max t_typical t_avg ...
    return float(row[4]), None


ROWS = [
    ("64 KiB WRITE bw, uroce perf inline", "GB/s", t_perf_bw, (),
     "iperf3"),
    ("  same, --progress thread", "GB/s", t_perf_bw,
     (["--progress", "thread"],), "iperf3"),
    ("ib_write_bw -s 65536 (drop-in)", "GB/s", t_ib_write_bw, (), "iperf3"),
    ("64 B SEND lat, uroce perf inline", "us", t_perf_lat, (), "sockperf"),
    ("  same, --progress thread", "us", t_perf_lat,
     (["--progress", "thread"],), "sockperf"),
    ("ib_send_lat -s 64 (drop-in)", "us", t_ib_send_lat, (), "sockperf"),
]
PEERS = {"iperf3": t_iperf, "sockperf": t_sockperf}


def busy_loops(n):
    return [subprocess.Popen(["nice", "-n", "19", "sh", "-c",
                              "while :; do :; done"]) for _ in range(n)]


def run_condition(name, path, busy):
    loops = busy_loops(2) if busy else []
    res = {}
    load = []
    try:
        for _ in range(REPS):
            load.append(os.getloadavg()[0])
            jobs = [(k, fn, ()) for k, fn in PEERS.items()] + \
                [(i, r[2], r[3]) for i, r in enumerate(ROWS)]
            for key, fn, args in jobs:
                try:
                    v = fn(path, *args)
                except DNF:
                    v = None
                except RuntimeError as e:
                    print("  %s: %s" % (key, str(e)[-300:]), file=sys.stderr)
                    v = "err"
                res.setdefault(key, []).append(v)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    print("\n%s, %s: %d runs each, interleaved, medians; load average "
          "%s" % (name, "two nice -n 19 busy loops" if busy else "idle",
                  REPS, " ".join("%.1f" % x for x in load)))
    print("%-36s %12s %12s %7s %7s %14s %12s" % (
        "test", "uroce", "peer", "ratio", "DNF/err", "uroce CPU s/GB",
        "peer CPU s/GB"))

    def medof(key, i):
        xs = [v[i] for v in res[key]
              if isinstance(v, tuple) and v[i] is not None]
        return med(xs) if xs else None
    for i, (label, unit, _, _, peer) in enumerate(ROWS):
        u, p = medof(i, 0), medof(peer, 0)
        dnf = sum(1 for v in res[i] if v is None)
        err = sum(1 for v in res[i] if v == "err")
        uc, pc = medof(i, 1), medof(peer, 1)
        ratio = (u / p) if u and p else float("nan")
        print("%-36s %12s %12s %6.2fx %7s %14s %12s" % (
            label, "%.2f %s" % (u, unit) if u else "-",
            "%.2f %s" % (p, unit) if p else "-", ratio, "%d/%d" % (dnf, err),
            "%.2f" % uc if uc is not None else "",
            "%.2f" % pc if pc is not None and unit == "GB/s" else ""))
    sys.stdout.flush()


def main():
    ensure(["iperf3", "sockperf", "ib_write_bw"])
    lo = ("127.0.0.71", "127.0.0.72", None, None)
    for busy in (False, True):
        run_condition("loopback", lo, busy)
    if os.geteuid() == 0 and os.environ.get("VETH", "1") != "0":
        subprocess.run([NETNS, "up", "bench"], check=True)
        veth = ("10.77.0.1", "10.77.0.2", "uroce-abench", "uroce-bbench")
        try:
            for busy in (False, True):
                run_condition("veth", veth, busy)
        finally:
            subprocess.run([NETNS, "down", "bench"])
    if os.environ.get("SWEEP", "0") != "0":
        sweep(lo)
    return 0


def sweep(lo):
    print("\nuroce WRITE bandwidth sweep, loopback (one run per size):")
    print("%10s %12s %12s" % ("bytes", "Gb/s", "Mpps"))
    size = 2
    while size <= 8 << 20:
        srv_a, cli_a, sn, cn = lo
        iters = str(max(100, min(200000, int(1e9 / max(size, 64)))))
        args = ["write", "bw", "-s", str(size), "-n", iters, "--json"]
        os_, oc, _, _ = pair([UROCE, "perf"] + args + ["--addr", srv_a],
                             [UROCE, "perf"] + args + ["--addr", cli_a,
                                                       srv_a], sn, cn, 0.3)
        j = [json.loads(l) for l in oc.splitlines() if l.startswith("{")]
        if j:
            print("%10d %12.3f %12.4f" % (size, j[-1]["bw_gb_s"],
                                          j[-1]["msg_rate_mpps"]))
        else:
            print("%10d failed: %s" % (size, (oc + os_)[-200:]))
        size *= 4


if __name__ == "__main__":
    sys.exit(main())
