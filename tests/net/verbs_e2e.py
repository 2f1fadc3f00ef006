#!/usr/bin/python3
"""Unmodified Debian 12 verbs programs (ibverbs-utils, perftest) over uroce's
libibverbs.so.1 drop-in, each started through `uroce run`:

  - between two processes on one host (endpoints 127.0.0.2 and 127.0.0.3);
  - between two network namespaces joined by a veth pair (10.77.0.1/2 and
    one IPv6 pair, fd77::1/2), made by tests/net/netns.sh (needs root).

A run passes only if both ends exit 0 and their output shows the data
moved: the pingpongs' byte and iteration counts and a non-zero rate (with
-c, their own check of every received buffer; ibv_xsrq_pingpong, which
has no such check, its "success" and both ends agreeing on the XRC QP and
SRQ numbers), perftest's result table with
the requested size and iteration count and real figures (bandwidth and
message rate above zero; 0 < t_min <= t_avg <= t_max). GIDs are chosen by
index (-g 1 / -x 1: the IPv4-mapped RoCE v2 GID) and, for perftest, also
automatically.

Programs that are not installed are reported as skipped; the test fails if
ibverbs-utils or perftest is missing entirely unless --allow-missing.
Prints one line per case and `N passed, M failed` at the end."""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "netns.sh")

results = []


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-58s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


class Side:
    """Where one end runs: its endpoint address and network namespace."""

    def __init__(self, addr, ns=None, tcp=None, opts=()):
        self.addr = addr
        self.ns = ns
        self.opts = list(opts)  # more `uroce run` options
        # Where the programs' own TCP exchange connects to; perftest and
        # the pingpongs listen on IPv4 only.
        self.tcp = tcp or addr

    def cmd(self, uroce, argv):
        c = [uroce, "run", "--addr", self.addr] + self.opts
        if self.ns:
            c += ["--ns", self.ns]
        return c + ["--"] + argv


def listening(port, ns, deadline):
    """Waits until something listens on TCP port (in ns)."""
    pre = ["ip", "netns", "exec", ns] if ns else []
    while time.time() < deadline:
        out = subprocess.run(pre + ["ss", "-Hltn", "sport = :%d" % port],
                             capture_output=True, text=True).stdout
        if out.strip():
            return True
        time.sleep(0.05)
    return False


# perftest calibrates its cycle counter against gettimeofday at start and
# gives up when the fit is poor, which a loaded machine (the ASan run on 2
# cores) causes now and then: nothing to do with the stack under test.
PERFTEST_CLOCK = re.compile(r"Correlation coefficient r\^2|Unable to calibrate|"
                            r"Conflicting CPU frequency")
PERFTEST_CLOCK_LINE = re.compile(r"Correlation coefficient r\^2: \S+ < [\d.]+")


def run_pair(uroce, srv, cli, argv_srv, argv_cli, port, timeout=40):
    """Runs a server and a client; returns (rc_srv, rc_cli, out_srv,
    out_cli). Runs them once more if perftest failed to calibrate its
    clock, whether or not it went on (its figures are then 0 or nonsense);
    the first run's output is kept in front of the second's."""
    r = run_pair_once(uroce, srv, cli, argv_srv, argv_cli, port, timeout)
    if PERFTEST_CLOCK.search(r[2]) or PERFTEST_CLOCK.search(r[3]):
        print("  (perftest could not calibrate its clock; once more)",
              flush=True)
        r2 = run_pair_once(uroce, srv, cli, argv_srv, argv_cli, port,
                           timeout)
        r = (r2[0], r2[1], r[2][-800:] + "\n<again>\n" + r2[2],
             r[3][-800:] + "\n<again>\n" + r2[3])
    return r


def run_pair_once(uroce, srv, cli, argv_srv, argv_cli, port, timeout):
    s = subprocess.Popen(srv.cmd(uroce, argv_srv), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    if not listening(port, srv.ns, time.time() + 10):
        s.kill()
        return -1, -1, s.communicate()[0] + "\n<server never listened>", ""
    c = subprocess.Popen(cli.cmd(uroce, argv_cli), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out_c, _ = c.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        c.kill()
        out_c = c.communicate()[0] + "\n<client timed out>"
    try:
        out_s, _ = s.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        s.kill()
        out_s = s.communicate()[0] + "\n<server timed out>"
    return s.returncode, c.returncode, out_s, out_c


# ---- output checks: each returns None when good, else what is wrong ----

PP_BYTES = re.compile(r"^(\d+) bytes in ([\d.]+) seconds = ([\d.]+) Mbit/sec",
                      re.M)
PP_ITERS = re.compile(r"^(\d+) iters in ([\d.]+) seconds = ([\d.]+) usec/iter",
                      re.M)


def check_pingpong(out, size, iters):
    if re.search(r"mismatch|Failed|failed|Couldn't|error", out):
        return "error in output"
    b = PP_BYTES.search(out)
    i = PP_ITERS.search(out)
    if not b or not i:
        return "no result lines"
    # Every iteration sends and receives one message of size bytes
    # (ibv_srq_pingpong: iterations are shared among its QPs).
    if int(b.group(1)) != 2 * size * iters:
        return "moved %s bytes, expected %d" % (b.group(1), 2 * size * iters)
    if int(i.group(1)) != iters:
        return "%s iterations, expected %d" % (i.group(1), iters)
    if not float(b.group(3)) > 0 or not float(i.group(3)) > 0:
        return "zero rate"
    return None


def perftest_rows(out):
    """The numeric rows of perftest's result table."""
    # perftest writes its clock-calibration warning to stderr, which can
    # land inside a row of the table on stdout ("0.000000Correlation ...").
    out = PERFTEST_CLOCK_LINE.sub("", out)
    rows, in_table = [], False
    for line in out.splitlines():
        if "#bytes" in line:
            in_table = True
            continue
        if in_table:
            f = line.split()
            if f and re.match(r"^\d+$", f[0]):
                rows.append(f)
            elif line.startswith("---"):
                in_table = rows == [] and in_table
    return rows


def check_perftest(out, kind, size, iters, server=False):
    if re.search(r"(?i)\b(error|failed|unable|couldn't)\b", out):
        return "error in output"
    rows = perftest_rows(out)
    if not rows:
        return "no result table"
    f = rows[-1]
    try:
        if int(f[0]) != size:
            return "size %s, expected %d" % (f[0], size)
        if int(f[1]) != iters:
            return "%s iterations, expected %d" % (f[1], iters)
        if kind == "bw":
            peak, avg, rate = float(f[2]), float(f[3]), float(f[4])
            # A send_bw server reports no peak (0.00): it only receives.
            if not (avg > 0 and rate > 0 and (peak > 0 or server)):
                return "zero figures: %s" % " ".join(f)
        else:
            tmin, tmax, ttyp, tavg = (float(f[2]), float(f[3]), float(f[4]),
                                      float(f[5]))
            if not (0 < tmin <= tavg <= tmax and 0 < ttyp <= tmax):
                return "implausible latencies: %s" % " ".join(f)
    except (ValueError, IndexError):
        return "unparsable row: %s" % " ".join(f)
    return None


def summary(out, kind):
    if kind == "pp":
        i = PP_ITERS.search(out)
        b = PP_BYTES.search(out)
        return "%s Mbit/s, %s us/iter" % (b.group(3), i.group(3)) if b and i \
            else ""
    rows = perftest_rows(out)
    if not rows:
        return ""
    f = rows[-1]
    if kind == "bw":
        return "%s B: %s MB/s avg" % (f[0], f[3])
    return "%s B: t_typical %s us" % (f[0], f[4])


# ---- cases ----

def pingpong_cases(quick):
    """(name, argv without address/port, size, iters, QPs)."""
    n = 200 if quick else 500
    return [
        ("ibv_rc_pingpong", ["ibv_rc_pingpong", "-g", "1", "-c"], 4096, n, 1),
        ("ibv_rc_pingpong -s 64K", ["ibv_rc_pingpong", "-g", "1", "-c",
                                    "-s", "65536"], 65536, n // 2, 1),
        ("ibv_rc_pingpong -e", ["ibv_rc_pingpong", "-g", "1", "-c", "-e"],
         4096, n, 1),
        ("ibv_rc_pingpong -N", ["ibv_rc_pingpong", "-g", "1", "-c", "-N",
                                "-s", "1024"], 1024, n, 1),
        ("ibv_uc_pingpong", ["ibv_uc_pingpong", "-g", "1", "-c", "-s",
                             "2048"], 2048, n, 1),
        ("ibv_ud_pingpong", ["ibv_ud_pingpong", "-g", "1", "-c", "-s",
                             "1024"], 1024, n, 1),
        # GID index 0 is the endpoint's address too: reachable, not empty
        ("ibv_rc_pingpong -g 0", ["ibv_rc_pingpong", "-g", "0", "-c"], 4096,
         n, 1),
        ("ibv_ud_pingpong -g 0", ["ibv_ud_pingpong", "-g", "0", "-c", "-s",
                                  "1024"], 1024, n, 1),
        ("ibv_ud_pingpong -e", ["ibv_ud_pingpong", "-g", "1", "-c", "-e",
                                "-s", "2048"], 2048, n, 1),
        ("ibv_srq_pingpong", ["ibv_srq_pingpong", "-g", "1", "-c", "-q", "4",
                              "-s", "4096"], 4096, n, 4),
    ]


def perftest_cases(quick):
    """(name, argv, kind, size, iters). '-x 1' picks the IPv4/IPv6 RoCE v2
    GID by index; cases without -x let perftest choose."""
    n = 300 if quick else 1000
    nl = 200 if quick else 500
    return [
        ("ib_write_bw -x 1 64K", ["ib_write_bw", "-x", "1", "-s", "65536"],
         "bw", 65536, n),
        ("ib_write_bw auto-gid 4K", ["ib_write_bw", "-s", "4096"], "bw",
         4096, n),
        ("ib_write_bw old post_send 1M", ["ib_write_bw", "-x", "1", "-s",
                                          "1048576", "--use_old_post_send"],
         "bw", 1048576, n // 10),
        ("ib_write_lat", ["ib_write_lat", "-x", "1"], "lat", 2, nl),
        ("ib_write_lat auto-gid 4K", ["ib_write_lat", "-s", "4096"], "lat",
         4096, nl),
        ("ib_read_bw 64K", ["ib_read_bw", "-x", "1", "-s", "65536"], "bw",
         65536, n),
        ("ib_read_bw auto-gid 1K", ["ib_read_bw", "-s", "1024"], "bw", 1024,
         n),
        ("ib_read_lat", ["ib_read_lat", "-x", "1"], "lat", 2, nl),
        ("ib_send_bw 64K", ["ib_send_bw", "-x", "1", "-s", "65536"], "bw",
         65536, n),
        ("ib_send_bw auto-gid 512", ["ib_send_bw", "-s", "512"], "bw", 512,
         n),
        ("ib_send_lat", ["ib_send_lat", "-x", "1"], "lat", 2, nl),
        ("ib_send_lat auto-gid 8K", ["ib_send_lat", "-s", "8192"], "lat",
         8192, nl),
        ("ib_atomic_bw fetch_add", ["ib_atomic_bw", "-x", "1", "-A",
                                    "FETCH_AND_ADD"], "bw", 8, n),
        ("ib_atomic_bw cmp_swap auto-gid", ["ib_atomic_bw", "-A",
                                            "CMP_AND_SWAP"], "bw", 8, n),
        ("ib_atomic_lat", ["ib_atomic_lat", "-x", "1"], "lat", 8, nl),
    ]


def run_local_tools(uroce, side, where):
    """ibv_devices, ibv_devinfo, ibv_devinfo -v on one endpoint."""
    for argv, want in (
            (["ibv_devices"], [r"uroce0\s+[0-9a-f]{16}"]),
            (["ibv_devinfo"], [r"hca_id:\s+uroce0", r"PORT_ACTIVE",
                               r"link_layer:\s+Ethernet",
                               r"active_mtu:\s+\d+ \(\d\)"]),
            (["ibv_devinfo", "-v"],
             # indexes 0 and 1 are both the endpoint's address, RoCE v2
             [r"GID\[\s*0\]:\s+%s, RoCE v2" %
              re.escape(("::ffff:" if "." in side.addr else "") + side.addr),
              r"GID\[\s*1\]:\s+%s, RoCE v2" %
              re.escape(("::ffff:" if "." in side.addr else "") + side.addr),
              r"atomic_cap:\s+ATOMIC_HCA", r"max_qp_rd_atom:\s+\d+",
              r"max_sge:\s+\d+"])):
        name = "%s %s" % (where, " ".join(argv))
        p = subprocess.run(side.cmd(uroce, argv), capture_output=True,
                           text=True, timeout=30)
        miss = [w for w in want if not re.search(w, p.stdout)]
        ok = p.returncode == 0 and not miss
        report(name, ok, "" if ok else "rc=%d missing %s\n%s%s" %
               (p.returncode, miss, p.stdout[-2000:], p.stderr[-2000:]))


def run_suite(uroce, srv, cli, where, quick, port, only):
    def one(name, argv, iters, kind, check):
        """Runs one server/client pair; check(out_srv, out_cli) returns
        None or what is wrong."""
        nonlocal port
        port += 1
        base = argv + ["-n", str(iters), "-p", str(port)]
        t0 = time.time()
        rs, rc, os_, oc = run_pair(uroce, srv, cli, base, base + [srv.tcp],
                                   port)
        bad = None if rs == 0 and rc == 0 else "rc server %d client %d" % (
            rs, rc)
        bad = bad or check(os_, oc)
        report("%s %s" % (where, name), bad is None,
               ("%s (%.1fs)" % (summary(oc, kind), time.time() - t0))
               if bad is None else "%s\n--- server\n%s\n--- client\n%s" %
               (bad, os_[-1500:], oc[-1500:]))

    for name, argv, size, iters, _ in pingpong_cases(quick):
        if not only or re.search(only, name):
            one(name, argv, iters, "pp",
                lambda os_, oc, size=size, iters=iters:
                check_pingpong(os_, size, iters) or
                check_pingpong(oc, size, iters))
    for name, argv, kind, size, iters in perftest_cases(quick):
        # The bandwidth servers print the same table; latency servers
        # print none for write/read.
        if not only or re.search(only, name):
            one(name, argv, iters, kind,
                lambda os_, oc, kind=kind, size=size, iters=iters:
                check_perftest(oc, kind, size, iters) or
                (check_perftest(os_, kind, size, iters, server=True)
                 if kind == "bw" else None))
    return port


XSRQ_ADDR = re.compile(r"^\s*(local|remote): LID \w+, QPN RECV (\w+) SEND "
                       r"(\w+), PSN \w+, SRQN (\w+)", re.M)


def xsrq_case(uroce, srv, cli, where, port, extra=()):
    """ibv_xsrq_pingpong between a server and one client, each with an XRC
    target QP receiving into an XRC SRQ: both must end with "success" (it
    checks each completion's status and finds the target QP by
    wc.qp_num; it has no payload check), and what each side calls its
    local QPNs and SRQ number must be what the other calls remote. (With
    -c 2 its server sends a client's messages through the other client's
    target QP: that needs the clients' processes to share one XRC domain
    on one NIC, which uroce, a NIC per process, cannot give; docs/verbs.md.)"""
    argv = ["ibv_xsrq_pingpong", "-g", "1", "-n", "100", "-p", str(port)] + \
        list(extra)
    name = "%s ibv_xsrq_pingpong%s" % (
        where, (" " + " ".join(extra)) if extra else "")
    rs, rc, os_, oc = run_pair(uroce, srv, cli, argv, argv + [srv.tcp], port)
    bad = None
    if rs != 0 or rc != 0:
        bad = "rc server %d client %d" % (rs, rc)
    elif not (re.search(r"^success$", os_, re.M) and
              re.search(r"^success$", oc, re.M)):
        bad = "no success"
    else:
        seen = {m.groups() for m in XSRQ_ADDR.finditer(os_)}
        got = [m for m in XSRQ_ADDR.finditer(oc)]
        if len(got) != 2 or len(seen) != 2:
            bad = "no address lines"
        for m in got:
            other = "remote" if m.group(1) == "local" else "local"
            if (other,) + m.groups()[1:] not in seen:
                bad = "addresses disagree: %s" % m.group(0).strip()
    report(name, bad is None, "" if bad is None else
           "%s\n--- server\n%s\n--- client\n%s" % (bad, os_[-1500:],
                                                     oc[-1500:]))


def xsrq_cases(uroce, srv, cli, where, port):
    """Polling, completion events, and the roles swapped (the server on
    the other end) with a larger message."""
    for extra, a, b, w in (((), srv, cli, where), (("-e",), srv, cli, where),
                           (("-s", "16384"), cli, srv, where + " swapped")):
        port += 1
        xsrq_case(uroce, a, b, w, port, extra)
    return port


STATS = re.compile(r"uroce (\S+) stats: (.*)$", re.M)


def stats_case(uroce, port):
    """ib_write_bw with the server dropping 3% of what it receives, both
    sides with --stats: the transfer must still complete, and the counters
    must show the drops and the client's retransmissions."""
    name = "lo: ib_write_bw 64K under 3% receive drop, uroce run --stats"
    argv = ["ib_write_bw", "-x", "1", "-s", "65536", "-n", "300", "-p",
            str(port)]
    srv = Side("127.0.0.2", opts=["--stats", "--rx-drop", "0.03"])
    cli = Side("127.0.0.3", opts=["--stats"])
    rs, rc, os_, oc = run_pair(uroce, srv, cli, argv, argv + ["127.0.0.2"],
                               port)
    st = {}
    for out in (os_, oc):
        for m in STATS.finditer(out):
            st[m.group(1)] = {k: int(v) for k, v in
                              (kv.split("=") for kv in m.group(2).split())}
    s, c = st.get("127.0.0.2"), st.get("127.0.0.3")
    bad = None
    if rs != 0 or rc != 0:
        bad = "rc server %d client %d" % (rs, rc)
    elif not s or not c:
        bad = "no stats line from %s" % ("the server" if not s else
                                        "the client")
    elif s["rx_dropped_impair"] == 0:
        bad = "the server dropped nothing"
    elif c["retransmits"] == 0 or c["tx_pkts"] <= 300 * 16:
        bad = "the client did not retransmit (%s)" % c
    report(name, bad is None,
           "server dropped %d, client retransmitted %d times, sent %d "
           "packets for 4800" % (s["rx_dropped_impair"], c["retransmits"],
                                 c["tx_pkts"]) if bad is None else
           "%s\n--- server\n%s\n--- client\n%s" % (bad, os_[-1500:],
                                                    oc[-1500:]))


def drop_only_case(uroce, port):
    """--rx-drop-only sorts what it drops by the BTH opcode. In ib_read_bw
    the server receives only requests (200 READ requests) and the client
    only responses (4 READ response packets each): the server dropping
    only responses and the client only requests drop nothing at all;
    swapped, both drop (chance of none at all below 1e-9) and the client
    asks again."""
    argv = ["ib_read_bw", "-x", "1", "-s", "16384", "-n", "200", "-p"]
    bad, figs = None, []
    for srv_kind, cli_kind, want in (("responses", "requests", False),
                                     ("requests", "responses", True)):
        port += 1
        srv = Side("127.0.0.2", opts=["--stats", "--rx-drop", "0.1",
                                      "--rx-drop-only", srv_kind])
        cli = Side("127.0.0.3", opts=["--stats", "--rx-drop", "0.1",
                                      "--rx-drop-only", cli_kind])
        rs, rc, os_, oc = run_pair(uroce, srv, cli, argv + [str(port)],
                                   argv + [str(port), "127.0.0.2"], port)
        st = {}
        for out in (os_, oc):
            for m in STATS.finditer(out):
                st[m.group(1)] = {k: int(v) for k, v in
                                  (kv.split("=") for kv in
                                   m.group(2).split())}
        s, c = st.get("127.0.0.2"), st.get("127.0.0.3")
        if rs != 0 or rc != 0 or not s or not c:
            bad = "server %s, client %s: rc %d/%d\n%s\n%s" % (
                srv_kind, cli_kind, rs, rc, os_[-800:], oc[-800:])
            break
        drops = (s["rx_dropped_impair"], c["rx_dropped_impair"])
        figs.append("server %s/client %s dropped %d/%d, %d retransmits" % (
            srv_kind, cli_kind, drops[0], drops[1], c["retransmits"]))
        if want and (0 in drops or c["retransmits"] == 0):
            bad = "expected drops on both sides: " + figs[-1]
        # (not "no retransmits": a multipath probe may resend a READ
        # request when the responder is late on a busy machine)
        elif not want and drops != (0, 0):
            bad = "expected no drop at all: " + figs[-1]
        if bad:
            break
    report("lo: ib_read_bw, --rx-drop-only requests/responses",
           bad is None, bad or "; ".join(figs))
    return port


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uroce", required=True, help="the uroce program")
    ap.add_argument("--quick", action="store_true",
                    help="fewer iterations")
    ap.add_argument("--no-netns", action="store_true",
                    help="skip the network namespace cases")
    ap.add_argument("--only", help="regex: run only matching cases")
    ap.add_argument("--port", type=int, default=18600,
                    help="first TCP port for the programs' exchange")
    ap.add_argument("--allow-missing", action="store_true",
                    help="skip, not fail, when the programs are missing")
    a = ap.parse_args()

    missing = [p for p in ("ibv_devinfo", "ibv_rc_pingpong", "ib_write_bw")
               if not shutil.which(p)]
    if missing:
        print("missing programs: %s (apt-get install ibverbs-utils perftest)"
              % " ".join(missing))
        return 0 if a.allow_missing else 1
    t0 = time.time()
    lo_srv, lo_cli = Side("127.0.0.2"), Side("127.0.0.3")
    run_local_tools(a.uroce, lo_srv, "lo")
    port = run_suite(a.uroce, lo_srv, lo_cli, "lo", a.quick, a.port, a.only)
    if shutil.which("ibv_xsrq_pingpong") and (
            not a.only or re.search(a.only, "ibv_xsrq_pingpong")):
        port = xsrq_cases(a.uroce, lo_srv, lo_cli, "lo", port)
    if not a.only or re.search(a.only, "stats"):
        port += 1
        stats_case(a.uroce, port)
        port = drop_only_case(a.uroce, port)

    if not a.no_netns:
        if os.geteuid() != 0:
            print("netns cases need root: skipped")
        else:
            sfx = "v%d" % (os.getpid() % 10000)
            up = subprocess.run(["bash", NETNS, "up", sfx],
                                capture_output=True, text=True)
            if up.returncode != 0:
                report("netns setup", False, up.stderr)
            else:
                try:
                    na = Side("10.77.0.1", "uroce-a" + sfx)
                    nb = Side("10.77.0.2", "uroce-b" + sfx)
                    run_local_tools(a.uroce, na, "netns")
                    port = run_suite(a.uroce, na, nb, "netns", a.quick,
                                     port + 100, a.only)
                    if shutil.which("ibv_xsrq_pingpong") and (
                            not a.only or
                            re.search(a.only, "ibv_xsrq_pingpong")):
                        port = xsrq_cases(a.uroce, na, nb, "netns", port)
                    # IPv6 endpoints: GID 1 is the IPv6 address itself.
                    v6a = Side("fd77::1", "uroce-a" + sfx, "10.77.0.1")
                    v6b = Side("fd77::2", "uroce-b" + sfx, "10.77.0.2")
                    run_local_tools(a.uroce, v6a, "netns6")
                    run_suite(a.uroce, v6a, v6b, "netns6", True, port + 100,
                              a.only or r"^(ibv_rc_pingpong|ib_write_bw -x 1 "
                              r"64K|ib_send_lat)$")
                finally:
                    subprocess.run(["bash", NETNS, "down", sfx])
    bad = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed (%.0f s)" % (len(results) - bad, bad,
                                             time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
