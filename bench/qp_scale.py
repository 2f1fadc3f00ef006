#!/usr/bin/python3
"""QP scale: aggregate WRITE bandwidth of many QPs on one device against
one QP, on loopback, through `uroce perf` and through perftest's
ib_write_bw unmodified over the libibverbs drop-in, side by side.

Each round runs every QP count once with each program, interleaved, and
the tables give the medians over the rounds and each one's ratio to the
same program's -q 1 (the goal of issue 24: within 10% at -q 1024). The
whole set runs twice: on the idle machine, then with two `nice -n 19`
busy loops running. The last `uroce perf` run of each count verifies the
data (--verify).

Usage: bench/qp_scale.py [--build DIR] [--qps 1,64,256,1024] [--rounds N]
                         [--secs S] [--size BYTES] [--msgs N] [--no-busy]
  --secs: each uroce perf run; --msgs: each ib_write_bw run's messages,
  all QPs together (-n is per QP)
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

PORT = 18700


def free_port():
    global PORT
    PORT += 1
    return PORT


def listening(port, proc, limit=10):
    """Whether proc listens on TCP port (asked of ss: a connection would
    be taken for the client's by perftest's server)."""
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            return False
        if subprocess.run(["ss", "-Hltn", "sport = :%d" % port],
                          stdout=subprocess.PIPE, text=True).stdout.strip():
            return True
        time.sleep(0.05)
    return False


def pair(srv, cli, port, timeout):
    s = subprocess.Popen(srv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if not listening(port, s):
        s.kill()
        raise RuntimeError("uroce perf server did not listen:\n" +
                           s.communicate()[0][-1500:])
    c = subprocess.run(cli, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    try:
        so = s.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        s.kill()
        so = s.communicate()[0]
    return c.returncode, c.stdout, s.returncode, so


def uroce_perf(a, q, verify):
    port = free_port()
    args = ["write", "bw", "-s", str(a.size), "-D", str(a.secs), "-q",
            str(q), "-p", str(port), "--json"] + (["--verify"] if verify
                                                  else [])
    rc, out, src, sout = pair([a.uroce, "perf"] + args + ["--addr",
                                                          "127.0.0.1"],
                              [a.uroce, "perf"] + args +
                              ["--addr", "127.0.0.2", "127.0.0.1"], port,
                              a.secs * 4 + 60)
    for line in out.splitlines():
        if line.startswith("{"):
            o = json.loads(line)
            if rc == 0:
                return o["bw_mib_s"]
    raise RuntimeError("uroce perf -q %d failed (rc %d):\n%s\n%s" %
                       (q, rc, out[-1500:], sout[-800:]))


def perftest(a, q):
    port = free_port()
    # -n, not -D: perftest's duration mode printed 0 iterations at -q 1024
    # in some runs whose packets all flowed (its timer's states); here each
    # QP writes its share of a fixed total.
    n = max(-(-a.msgs // q), 10)
    argv = ["ib_write_bw", "-x", "1", "-F", "-s", str(a.size), "-n", str(n),
            "-q", str(q), "-p", str(port)]
    srv = [a.uroce, "run", "--addr", "127.0.0.2", "--"] + argv
    # to a file, not a pipe: the server prints a line per QP, more than a
    # pipe holds, and would block on it
    log = tempfile.TemporaryFile(mode="w+")
    s = subprocess.Popen(srv, stdout=log, stderr=subprocess.STDOUT)
    if not listening(port, s):
        s.kill()
        s.wait()
        log.seek(0)
        raise RuntimeError("ib_write_bw server did not listen:\n" +
                           log.read()[-1500:])
    c = subprocess.run([a.uroce, "run", "--addr", "127.0.0.3", "--"] + argv +
                       ["127.0.0.2"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True,
                       timeout=a.secs * 4 + 60)
    try:
        s.wait(timeout=60)
    except subprocess.TimeoutExpired:
        s.kill()
        s.wait()
    log.close()
    # the row: #bytes #iterations peak avg msgrate (MB/s = MiB/s)
    m = re.search(r"^\s*%d\s+\d+\s+[\d.]+\s+([\d.]+)\s" % a.size, c.stdout,
                  re.M)
    if c.returncode or not m:
        raise RuntimeError("ib_write_bw -q %d failed (rc %d):\n%s" %
                           (q, c.returncode, c.stdout[-1500:]))
    return float(m.group(1))


def run_set(a, label):
    res = {("uroce perf", q): [] for q in a.qps}
    res.update({("ib_write_bw", q): [] for q in a.qps})
    for r in range(a.rounds):
        for q in a.qps:
            res[("uroce perf", q)].append(
                uroce_perf(a, q, verify=r == a.rounds - 1))
            res[("ib_write_bw", q)].append(perftest(a, q))
        print("  %s: round %d of %d done" % (label, r + 1, a.rounds),
              flush=True)
    print("\n%s: WRITE %d B on loopback, MiB/s, median of %d rounds "
          "(ratio to -q 1)" % (label, a.size, a.rounds))
    print("  %-6s %-22s %-22s" % ("QPs", "uroce perf", "ib_write_bw (drop-in)"))
    for q in a.qps:
        cells = []
        for prog in ("uroce perf", "ib_write_bw"):
            m = statistics.median(res[(prog, q)])
            one = statistics.median(res[(prog, a.qps[0])])
            cells.append("%8.0f (%4.2fx)" % (m, m / one))
        print("  %-6d %-22s %-22s" % (q, cells[0], cells[1]))
    print(flush=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--qps", default="1,64,256,1024")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=int, default=2)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--msgs", type=int, default=40000,
                    help="ib_write_bw: messages of all QPs together")
    ap.add_argument("--no-busy", action="store_true",
                    help="skip the run with two busy loops")
    a = ap.parse_args()
    a.uroce = os.path.join(a.build, "uroce")
    a.qps = [int(x) for x in a.qps.split(",")]
    if a.qps[0] != 1:
        a.qps.insert(0, 1)
    if not os.access(a.uroce, os.X_OK):
        sys.exit("no %s: build first" % a.uroce)
    if not shutil.which("ib_write_bw"):
        subprocess.run(["apt-get", "install", "-y", "perftest"],
                       stdout=subprocess.DEVNULL, check=True)
    run_set(a, "idle")
    if a.no_busy:
        return
    busy = [subprocess.Popen(["nice", "-n", "19", "sh", "-c",
                              "while :; do :; done"]) for _ in range(2)]
    try:
        run_set(a, "two nice -n 19 busy loops")
    finally:
        for b in busy:
            b.kill()
            b.wait()


if __name__ == "__main__":
    main()
