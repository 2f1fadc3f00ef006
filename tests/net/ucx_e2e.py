#!/usr/bin/env python3
"""UCX over uroce: Debian's UCX (ucx-utils) finds uroce0 under `uroce run`
and runs its verbs transports between two processes in a network
namespace of this test's own.

- `uroce run` gives the program /dev/infiniband/uverbs0 and
  /sys/class/infiniband{,_verbs} and the host keeps neither;
  `ucx_info -d` lists rc_verbs and ud_verbs on uroce0:1.
- ucx_check (tests/net/ucx_check.c, built where libucx-dev is) moves
  tagged messages of 1 B to 1 MiB both ways, puts, gets and 64-bit
  atomics through UCP and checks every byte, with UCX_TLS=rc_verbs,ud_verbs
  (its lane must be rc_verbs) and with UCX_TLS=ud_verbs.
- ucx_perftest: UCP tag latency/bandwidth, put, get and atomics with
  rc_verbs (ud_verbs as UCP's wireup transport) and with ud_verbs alone;
  UCT put, get and atomics on rc_verbs, active messages on ud_verbs. Each
  pair must exit 0 with its final line. Counts are small: this checks
  that they run, bench/ucx_bench.sh measures.

Needs root (ip netns). Exits 77 (skip) when ucx_perftest is missing.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

RESULTS = []


def report(name, ok, detail=""):
    RESULTS.append(ok)
    print("%-58s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


class Netns:
    def __init__(self):
        self.name = "uroce-ucx-%d" % os.getpid()

    def __enter__(self):
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        subprocess.run(["ip", "-n", self.name, "link", "set", "lo", "up"],
                       check=True)
        return self

    def __exit__(self, *a):
        subprocess.run(["ip", "netns", "del", self.name])

    def cmd(self, argv):
        return ["ip", "netns", "exec", self.name] + argv


def urun(uroce, addr, argv):
    return [uroce, "run", "--addr", addr, "--"] + argv


def env_with(tls):
    e = dict(os.environ)
    e["UCX_TLS"] = tls
    e["UCX_NET_DEVICES"] = "uroce0:1"
    e.pop("UCX_LOG_LEVEL", None)
    return e


def run_pair(ns, uroce, server_argv, client_argv, env, timeout=90):
    """Server on 127.0.0.2, client on 127.0.0.3; returns (rs, rc, out_s,
    out_c)."""
    srv = subprocess.Popen(ns.cmd(urun(uroce, "127.0.0.2", server_argv)),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, env=env)
    time.sleep(0.5)
    try:
        cli = subprocess.run(ns.cmd(urun(uroce, "127.0.0.3", client_argv)),
                             capture_output=True, text=True, env=env,
                             timeout=timeout)
        rc, out_c = cli.returncode, cli.stdout + cli.stderr
    except subprocess.TimeoutExpired as ex:
        rc, out_c = -1, "timeout\n%s" % (ex.stdout or "")
    try:
        out_s, _ = srv.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        srv.kill()
        out_s, _ = srv.communicate()
    return srv.returncode, rc, out_s, out_c


def check_discovery(ns, uroce):
    host_had = os.path.exists("/dev/infiniband")
    host_sys = os.path.exists("/sys/class/infiniband/uroce0")
    script = ("test -c /dev/infiniband/uverbs0 && test -r /dev/infiniband/"
              "uverbs0 && test -w /dev/infiniband/uverbs0 && "
              "cat /sys/class/infiniband/uroce0/ports/1/gid_attrs/types/0 "
              "/sys/class/infiniband/uroce0/ports/1/gids/0 "
              "/sys/class/infiniband/uroce0/ports/1/link_layer "
              "/sys/class/infiniband_verbs/uverbs0/ibdev && ls /sys/class/net")
    p = subprocess.run(ns.cmd(urun(uroce, "127.0.0.2", ["sh", "-c", script])),
                       capture_output=True, text=True, timeout=30)
    want = ["RoCE v2", "0000:0000:0000:0000:0000:ffff:7f00:0002", "Ethernet",
            "uroce0", "lo"]
    miss = [w for w in want if w not in p.stdout]
    ok = p.returncode == 0 and not miss
    report("device node and sysfs entries under uroce run", ok,
           "" if ok else "rc=%d missing %s\n%s%s" % (p.returncode, miss,
                                                      p.stdout, p.stderr))
    ok = (os.path.exists("/dev/infiniband") == host_had and
          os.path.exists("/sys/class/infiniband/uroce0") == host_sys)
    report("the host's /dev and /sys unchanged", ok)
    p = subprocess.run(ns.cmd(urun(uroce, "127.0.0.2", ["ucx_info", "-d"])),
                       capture_output=True, text=True, timeout=60,
                       env=env_with("all"))
    found = {t for t in ("rc_verbs", "ud_verbs") if re.search(
        r"Transport: %s\s*\n#\s+Device: uroce0:1" % t, p.stdout)}
    ok = p.returncode == 0 and len(found) == 2
    report("ucx_info -d lists rc_verbs and ud_verbs on uroce0:1", ok,
           "" if ok else "rc=%d found %s\n%s" % (p.returncode, found,
                                                  p.stdout[-2000:]))


def check_data(ns, uroce, ucx_check, port):
    for tls, lane in (("rc_verbs,ud_verbs", "rc_verbs"),
                      ("ud_verbs", "ud_verbs")):
        port += 1
        rs, rc, os_, oc = run_pair(ns, uroce, [ucx_check, "-l", str(port)],
                                   [ucx_check, "-i", "127.0.0.2", str(port)],
                                   env_with(tls))
        lanes = re.findall(r"lane\[\d+\]:\s+\d+:(\w+)/uroce0", oc)
        ok = (rs == 0 and rc == 0 and "ucx_check ok" in oc and
              "ucx_check ok" in os_ and lanes and
              all(l == lane for l in lanes))
        report("UCP data checks, UCX_TLS=%s" % tls, ok,
               "lanes %s" % lanes if ok else
               "rc server %d client %d lanes %s\n--- server\n%s\n--- client"
               "\n%s" % (rs, rc, lanes, os_[-1500:], oc[-1500:]))
    return port


def perftest_cases():
    """(name, UCX_TLS, ucx_perftest arguments)."""
    rc, ud = "rc_verbs,ud_verbs", "ud_verbs"
    uct_rc = ["-d", "uroce0:1", "-x", "rc_verbs"]
    uct_ud = ["-d", "uroce0:1", "-x", "ud_verbs"]
    return [
        ("UCP tag_lat rc_verbs", rc, ["-t", "tag_lat", "-s", "64"]),
        ("UCP tag_bw 64K rc_verbs", rc, ["-t", "tag_bw", "-s", "65536"]),
        ("UCP put_bw 64K rc_verbs", rc, ["-t", "ucp_put_bw", "-s", "65536"]),
        ("UCP get 64K rc_verbs", rc, ["-t", "ucp_get", "-s", "65536"]),
        ("UCP fadd rc_verbs", rc, ["-t", "ucp_fadd"]),
        ("UCP cswap rc_verbs", rc, ["-t", "ucp_cswap"]),
        ("UCP tag_lat ud_verbs", ud, ["-t", "tag_lat", "-s", "64"]),
        ("UCP tag_bw 64K ud_verbs", ud, ["-t", "tag_bw", "-s", "65536"]),
        ("UCT put_lat rc_verbs", rc, uct_rc + ["-t", "put_lat", "-s", "8"]),
        ("UCT put_bw zcopy 64K rc_verbs", rc,
         uct_rc + ["-t", "put_bw", "-s", "65536", "-D", "zcopy"]),
        ("UCT get zcopy 64K rc_verbs", rc,
         uct_rc + ["-t", "get", "-s", "65536", "-D", "zcopy"]),
        ("UCT add_lat rc_verbs", rc, uct_rc + ["-t", "add_lat"]),
        ("UCT fadd rc_verbs", rc, uct_rc + ["-t", "fadd"]),
        ("UCT cswap rc_verbs", rc, uct_rc + ["-t", "cswap"]),
        ("UCT am_lat ud_verbs", ud, uct_ud + ["-t", "am_lat", "-s", "8"]),
        ("UCT am_bw bcopy 1K ud_verbs", ud,
         uct_ud + ["-t", "am_bw", "-s", "1024", "-D", "bcopy"]),
    ]


def check_perftest(ns, uroce, port, iters):
    for name, tls, args in perftest_cases():
        port += 1
        base = ["ucx_perftest", "-p", str(port), "-n", str(iters), "-w",
                "100", "-f"] + args
        t0 = time.time()
        rs, rc, os_, oc = run_pair(ns, uroce, base, base + ["127.0.0.2"],
                                   env_with(tls))
        # the final numbers: iterations, then 7 figures
        final = re.findall(r"^(?:Final:)?\s+(\d+)(?:\s+[\d.]+){7}\s*$", oc,
                           re.M)
        ok = rs == 0 and rc == 0 and final and int(final[-1]) == iters
        report(name, ok, "(%.1fs)" % (time.time() - t0) if ok else
               "rc server %d client %d\n--- server\n%s\n--- client\n%s" %
               (rs, rc, os_[-1500:], oc[-1500:]))
    return port


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uroce", required=True)
    ap.add_argument("--ucx-check", help="the ucx_check program, if built")
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--port", type=int, default=19600,
                    help="first TCP port of the side channels (in the "
                         "test's own network namespace)")
    a = ap.parse_args()
    if not shutil.which("ucx_perftest") or not shutil.which("ucx_info"):
        print("ucx_perftest/ucx_info missing (apt install ucx-utils): skip")
        return 77
    t0 = time.time()
    with Netns() as ns:
        check_discovery(ns, a.uroce)
        port = a.port
        if a.ucx_check:
            port = check_data(ns, a.uroce, a.ucx_check, port)
        else:
            report("UCP data checks (ucx_check not built: needs libucx-dev)",
                   False)
        check_perftest(ns, a.uroce, port, a.iters)
    bad = RESULTS.count(False)
    print("%d passed, %d failed (%.0f s)" % (len(RESULTS) - bad, bad,
                                             time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
