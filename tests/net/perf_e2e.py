#!/usr/bin/python3
"""End-to-end tests of uroce over real UDP, driven through `uroce perf` and
the rdma_write example, between two processes:

  - on loopback (127.0.0.x), every operation, bandwidth and latency, data
    verified;
  - across two network namespaces joined by a veth pair (IPv4 and IPv6),
    made by tests/net/netns.sh (needs root: CI runs as root);
  - 64 QPs at once;
  - the wire: a capture (dumpcap) of every operation over 8 QPs across the
    veth, IPv4 and IPv6, GSO sends included, must decode in `uroce dump`
    with every ICRC exact (a uroce receiver would accept a wrong IPv4
    identification, rxe would not);
  - garbage datagrams fired at a server in the middle of a transfer;
  - a server killed with SIGKILL mid-transfer: the client must fail with
    "retry counter exceeded" within its timeout (4.096 us x 2^14 x 7 tries, about 0.5 s), not hang.

Prints one line per case and `N passed, M failed` at the end."""
import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "netns.sh")

results = []


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-44s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def ns_prefix(ns):
    return ["ip", "netns", "exec", ns] if ns else []


def run_pair(uroce, args, srv_addr, cli_addr, srv_ns=None, cli_ns=None,
             port=18515, timeout=60, during=None):
    """Runs `uroce perf ARGS` as server and client; returns (rc_srv, rc_cli,
    out_srv, out_cli)."""
    srv = subprocess.Popen(ns_prefix(srv_ns) + [uroce, "perf"] + args +
                           ["--addr", srv_addr, "-p", str(port)],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    time.sleep(0.3)
    cli = subprocess.Popen(ns_prefix(cli_ns) + [uroce, "perf"] + args +
                           ["--addr", cli_addr, "-p", str(port), srv_addr],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    if during:
        during(srv, cli)
    try:
        out_cli, _ = cli.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        cli.kill()
        out_cli = cli.communicate()[0] + "\n<client timed out>"
    try:
        out_srv, _ = srv.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        srv.kill()
        out_srv = srv.communicate()[0] + "\n<server timed out>"
    return srv.returncode, cli.returncode, out_srv, out_cli


def figures_real(out, test):
    """The last data line's figures must be real numbers, not zeros."""
    lines = [l for l in out.splitlines() if l.strip() and l.strip()[0].isdigit()]
    if not lines:
        return False
    f = lines[-1].split()
    try:
        if test == "bw":
            return int(f[1]) > 0 and float(f[2]) > 0
        return int(f[1]) > 0 and float(f[2]) > 0 and float(f[4]) >= float(f[2])
    except (ValueError, IndexError):
        return False


def case(uroce, name, args, srv, cli, **kw):
    rs, rc, os_, oc = run_pair(uroce, args, srv, cli, **kw)
    test = args[1]
    ok = rs == 0 and rc == 0 and figures_real(oc, test)
    if "--verify" in args:
        ok = ok and "(data verified)" in oc
    detail = ""
    if not ok:
        detail = "\n  server rc=%s: %s\n  client rc=%s: %s" % (
            rs, os_.strip()[-600:], rc, oc.strip()[-600:])
    report(name, ok, detail)


def garbage_case(uroce):
    """Random datagrams to the server's port while a WRITE test runs."""
    def blast(srv, cli):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.99", 0))
        r = random.Random(5)
        end = time.time() + 1.5
        n = 0
        while time.time() < end and n < 20000:
            size = r.choice([0, 1, 12, 15, 16, 28, 60, 1100, 4200])
            data = bytes(r.randrange(256) for _ in range(size))
            if size >= 12 and r.random() < 0.5:
                data = bytes([r.choice([0x04, 0x0A, 0x0C, 0x11, 0x13])]) + \
                    data[1:]  # plausible opcodes with junk behind them
            try:
                s.sendto(data, ("127.0.0.31", 4791))
            except OSError:
                pass
            n += 1
    rs, rc, os_, oc = run_pair(uroce, ["write", "bw", "-s", "65536", "-n",
                                       "20000", "--verify", "--stats"],
                               "127.0.0.31", "127.0.0.32", during=blast)
    ok = rs == 0 and rc == 0 and "(data verified)" in oc
    bad = [l for l in os_.splitlines() if "stats:" in l]
    dropped = 0
    if bad:
        kv = dict(x.split("=") for x in bad[-1].split("stats:")[1].split())
        dropped = int(kv["rx_bad_icrc"]) + int(kv["rx_malformed"])
    ok = ok and dropped > 100
    report("garbage datagrams mid-transfer", ok,
           "(%d dropped by the server)" % dropped if ok else
           "\n  server: %s\n  client: %s" % (os_[-600:], oc[-600:]))


def kill_case(uroce):
    """SIGKILL the server mid-transfer: the client's requests must complete
    with retry exceeded within the timeout (timeout 14, retry_cnt 6)."""
    t = {}

    def killer(srv, cli):
        time.sleep(1.5)
        t["kill"] = time.time()
        # The server runs as a child of nobody else: kill it outright.
        srv.send_signal(signal.SIGKILL)

    rs, rc, os_, oc = run_pair(uroce, ["write", "bw", "-s", "65536", "-D",
                                       "30"], "127.0.0.41", "127.0.0.42",
                               during=killer, timeout=40)
    waited = time.time() - t.get("kill", time.time())
    ok = rc != 0 and "retry counter exceeded" in oc and waited < 20
    report("server killed with SIGKILL mid-transfer", ok,
           "(client failed after %.1f s)" % waited if ok else
           "\n  client rc=%s after %.1f s: %s" % (rc, waited, oc[-600:]))


def wire_case(uroce, a, b):
    """Captures every operation on 8 QPs between the namespaces a and b
    (IPv4 and IPv6) and checks each packet's ICRC against the headers
    really sent, IPv4 identification included, with `uroce dump`. GSO is
    turned off on the veth ends (gso_max_segs 1), so that the kernel cuts
    uroce's GSO sends into the packets a NIC would send before the capture
    sees them, numbering their identifications as it does on real links;
    on loopback a capture shows the unsegmented super-packets."""
    import json
    import tempfile
    name = "wire: ICRC of every captured packet"
    if not os.path.exists("/usr/bin/dumpcap"):
        report(name, False, "dumpcap missing (make deps installs tshark)")
        return
    sfx = a[len("uroce-a"):]
    for ns, dev in ((a, "ua" + sfx), (b, "ub" + sfx)):
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "gso_max_segs",
                        "1"], check=True)
    d = tempfile.mkdtemp(prefix="uroce-wire.")
    pcap = os.path.join(d, "wire.pcapng")
    cap = subprocess.Popen(["ip", "netns", "exec", a, "dumpcap", "-q", "-i",
                            "ua" + sfx, "-B", "64", "-f", "udp port 4791",
                            "-w", pcap], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # dumpcap opens the interface
    ok, detail = True, ""
    for srv, cli in (("10.77.0.1", "10.77.0.2"), ("fd77::1", "fd77::2")):
        for op, extra in [("write", ["-s", "65536", "-n", "100"]),
                          ("write", ["-s", "65536", "-n", "100",
                                     "--tx-stage"]),
                          ("write", ["-s", "65536", "-n", "100",
                                     "--tx-gather"]),
                          ("read", ["-s", "20000", "-n", "100"]),
                          ("send", ["-s", "9000", "-n", "100"]),
                          ("atomic", ["-n", "100"])]:
            rs, rc, os_, oc = run_pair(uroce, [op, "bw", "-q", "8",
                                               "--verify"] + extra,
                                       srv, cli, srv_ns=a, cli_ns=b)
            if rs != 0 or rc != 0:
                ok, detail = False, "%s %s: %s" % (op, srv, (oc + os_)[-300:])
    time.sleep(0.5)
    cap.terminate()
    err = cap.communicate(timeout=10)[1]
    if ok:
        out = subprocess.run([uroce, "dump", "--json", pcap],
                             capture_output=True, text=True, timeout=120)
        summ = [json.loads(l)["summary"] for l in out.stdout.splitlines()
                if l.startswith('{"summary"')]
        if not summ:
            ok, detail = False, "dump: %s %s" % (out.stderr[-200:], err)
        else:
            sm = summ[-1]
            ok = (sm["roce"] > 10000 and sm["bad_icrc"] == 0 and
                  sm["malformed"] == 0)
            detail = "%d RoCE packets, %d bad ICRC, %d malformed" % (
                sm["roce"], sm["bad_icrc"], sm["malformed"])
    report(name, ok, detail)
    subprocess.run(["rm", "-rf", d])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    ap.add_argument("--example", required=True)
    args = ap.parse_args()
    u = args.uroce

    # Loopback, every operation.
    for op, test, extra in [("write", "bw", ["-s", "65536", "-n", "3000"]),
                            ("read", "bw", ["-s", "65536", "-n", "3000"]),
                            ("send", "bw", ["-s", "65536", "-n", "3000"]),
                            ("atomic", "bw", ["-n", "5000"]),
                            ("write", "bw", ["-a", "-n", "50"]),
                            # both send paths, whatever this CPU defaults to
                            ("write", "bw", ["-a", "-n", "50", "--tx-stage"]),
                            ("write", "bw", ["-a", "-n", "50",
                                             "--tx-gather"]),
                            ("write", "lat", ["-n", "2000"]),
                            ("send", "lat", ["-n", "2000"]),
                            ("read", "lat", ["-n", "2000"]),
                            ("atomic", "lat", ["-n", "2000"])]:
        case(u, "loopback %s %s %s" % (op, test, " ".join(extra)),
             [op, test] + extra + ["--verify"], "127.0.0.51", "127.0.0.52")
    # The progress thread, the test spinning on the CQ or sleeping on its
    # completion channel (-e): a lost wakeup would hang these.
    for op, test, extra in [("write", "bw", ["-s", "65536", "-n", "2000"]),
                            ("read", "bw", ["-s", "65536", "-n", "2000"]),
                            ("send", "bw", ["-s", "16384", "-n", "3000"]),
                            ("send", "lat", ["-n", "1000"]),
                            ("atomic", "lat", ["-n", "1000"])]:
        for ev in ([], ["-e"]):
            case(u, "loopback thread%s %s %s" % (" -e" if ev else "", op,
                                                 test),
                 [op, test] + extra + ["--progress", "thread"] + ev +
                 ["--verify"], "127.0.0.57", "127.0.0.58")
    p = subprocess.run([u, "perf", "write", "bw", "-e"], capture_output=True,
                       text=True, timeout=10)
    report("--events without the progress thread is refused",
           p.returncode == 2 and "--events needs --progress thread" in
           p.stderr, "rc=%s %s" % (p.returncode, p.stderr.strip()))
    case(u, "loopback write bw, 64 QPs", ["write", "bw", "-q", "64", "-n",
                                          "200", "-t", "16", "--verify"],
         "127.0.0.53", "127.0.0.54")
    case(u, "loopback send bw, path MTU 256",
         ["send", "bw", "-s", "10000", "-n", "500", "-m", "256", "--verify"],
         "127.0.0.55", "127.0.0.56")

    # The example program: two processes, one RDMA WRITE.
    srv = subprocess.Popen([args.example, "server", "127.0.0.61"],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    cli = subprocess.run([args.example, "client", "127.0.0.62", "127.0.0.61"],
                         capture_output=True, text=True, timeout=30)
    out = srv.communicate(timeout=10)[0]
    report("examples/rdma_write", cli.returncode == 0 and srv.returncode == 0
           and 'hello over RoCEv2 from 127.0.0.62' in out,
           "" if cli.returncode == 0 else cli.stdout + cli.stderr)

    garbage_case(u)
    kill_case(u)

    # Two network namespaces joined by a veth pair.
    if os.geteuid() != 0:
        report("network namespaces (needs root)", False,
               "run as root, as CI does")
    else:
        sfx = str(os.getpid() % 10000)
        subprocess.run([NETNS, "up", sfx], check=True)
        try:
            a, b = "uroce-a" + sfx, "uroce-b" + sfx
            for op, test, extra in [("write", "bw", ["-n", "3000"]),
                                    ("read", "bw", ["-n", "3000"]),
                                    ("send", "bw", ["-n", "2000"]),
                                    ("atomic", "bw", ["-n", "3000"]),
                                    ("write", "lat", ["-n", "2000"])]:
                case(u, "netns IPv4 %s %s" % (op, test),
                     [op, test] + extra + ["--verify"], "10.77.0.1",
                     "10.77.0.2", srv_ns=a, cli_ns=b)
            for op, test, extra in [("write", "bw", ["-n", "3000"]),
                                    ("send", "lat", ["-n", "2000"])]:
                case(u, "netns IPv6 %s %s" % (op, test),
                     [op, test] + extra + ["--verify"], "fd77::1", "fd77::2",
                     srv_ns=a, cli_ns=b)
            wire_case(u, a, b)  # last: it turns GSO off on the veth
        finally:
            subprocess.run([NETNS, "down", sfx])

    failed = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed" % (len(results) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
