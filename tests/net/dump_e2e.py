#!/usr/bin/python3
"""`uroce dump` on captures taken the ordinary way, which hold UDP GSO
super-frames (several RoCEv2 packets in one frame):

  - tcpdump -i lo, on a veth end and -i any, during `uroce perf` (write,
    read, send; IPv4 and IPv6) and during ib_write_bw over the libibverbs
    drop-in: every packet must decode with its ICRC exact (--strict exits
    0), and the GSO split must be reported;
  - a live capture (`uroce dump -i IFACE`), bounded by -c and by Ctrl-C,
    which must print the summary;
  - --strict exits 3 on a capture with one byte changed, 0 without it;
  - --conv accounts for every packet, --filter shows a QP's packets;
  - --udp-port: a stack on another UDP port, found only when named.

Everything runs in two network namespaces joined by a veth pair
(tests/net/netns.sh, needs root), loopback cases in the first one's own lo,
so nothing touches the host's interfaces. Prints one line per case and
`N passed, M failed` at the end."""
import argparse
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "netns.sh")

results = []


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-58s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def nsx(ns):
    return ["ip", "netns", "exec", ns]


class Capture:
    """tcpdump in a namespace, writing whole frames to a file."""

    def __init__(self, ns, iface, path, port=4791):
        self.p = subprocess.Popen(
            nsx(ns) + ["tcpdump", "-i", iface, "-s", "0", "-B", "65536",
                       "-w", path, "udp port %d" % port],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # tcpdump says "listening on" once the socket is bound.
        deadline = time.time() + 10
        self.err = ""
        while time.time() < deadline:
            line = self.p.stderr.readline()
            self.err += line
            if "listening on" in line or not line:
                break

    def stop(self):
        time.sleep(0.3)
        self.p.send_signal(signal.SIGINT)
        self.err += self.p.communicate(timeout=20)[1]
        return self.err


def perf(uroce, args, srv_ns, srv, cli_ns, cli, port=18515, timeout=60,
         cli_err=None):
    """uroce perf ARGS as server and client; True if both exit 0. The
    client's stderr is appended to cli_err when one is given."""
    s = subprocess.Popen(nsx(srv_ns) + [uroce, "perf"] + args +
                         ["--addr", srv, "-p", str(port)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    time.sleep(0.3)
    c = subprocess.run(nsx(cli_ns) + [uroce, "perf"] + args +
                       ["--addr", cli, "-p", str(port), srv],
                       capture_output=True, text=True, timeout=timeout)
    try:
        so = s.communicate(timeout=15)[0]
    except subprocess.TimeoutExpired:
        s.kill()
        so = s.communicate()[0]
    if cli_err is not None:
        cli_err.append(c.stderr)
    return (s.returncode == 0 and c.returncode == 0,
            (c.stdout + c.stderr + so)[-300:])


def ib_write_bw(uroce, srv_ns, srv, cli_ns, cli, port):
    """ib_write_bw over the drop-in, started through `uroce run`."""
    argv = ["ib_write_bw", "-x", "1", "-s", "65536", "-n", "200", "-p",
            str(port)]
    s = subprocess.Popen([uroce, "run", "--addr", srv, "--ns", srv_ns,
                          "--"] + argv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 10
    while time.time() < deadline:  # perftest listens on TCP
        if subprocess.run(nsx(srv_ns) + ["ss", "-Hltn", "sport = :%d" % port],
                          capture_output=True, text=True).stdout.strip():
            break
        time.sleep(0.05)
    tcp = srv if ":" not in srv else "10.77.0.1"
    c = subprocess.run([uroce, "run", "--addr", cli, "--ns", cli_ns, "--"] +
                       argv + [tcp], capture_output=True, text=True,
                       timeout=60)
    try:
        so = s.communicate(timeout=15)[0]
    except subprocess.TimeoutExpired:
        s.kill()
        so = s.communicate()[0]
    return (s.returncode == 0 and c.returncode == 0,
            (c.stdout + c.stderr + so)[-300:])


def dump(uroce, args, timeout=120):
    """Runs uroce dump --json ARGS: (rc, packet records, summary, convs,
    stderr)."""
    p = subprocess.run([uroce, "dump", "--json"] + args, capture_output=True,
                       text=True, timeout=timeout)
    recs, summ, convs = [], None, []
    for line in p.stdout.splitlines():
        d = json.loads(line)
        if "summary" in d:
            summ = d["summary"]
        elif "conv" in d:
            convs.append(d["conv"])
        else:
            recs.append(d)
    return p.returncode, recs, summ, convs, p.stderr


def check_capture(uroce, name, path, min_pkts, want_gso=True, extra=()):
    """The capture must decode with --strict: every ICRC exact, nothing
    malformed, the GSO split reported."""
    rc, recs, sm, _, err = dump(uroce, ["--strict"] + list(extra) + [path])
    if sm is None:
        report(name, False, "no summary: rc=%d %s" % (rc, err[-300:]))
        return None
    ok = (rc == 0 and sm["bad_icrc"] == 0 and sm["malformed"] == 0 and
          sm["roce"] >= min_pkts and len(recs) == sm["roce"] and
          (sm["gso_frames"] > 0 or not want_gso))
    split = sum(1 for r in recs if "gso" in r)
    ok = ok and split == sm["gso_packets"]
    report(name, ok, "%d frames, %d RoCE packets, %d GSO frames -> %d "
           "packets, %d bad ICRC, %d malformed, rc=%d" %
           (sm["frames"], sm["roce"], sm["gso_frames"], sm["gso_packets"],
            sm["bad_icrc"], sm["malformed"], rc))
    return sm if ok else None


def perf_capture(uroce, d, name, ns_cap, iface, args, srv_ns, srv, cli_ns,
                 cli, min_pkts, port=4791, want_gso=True, cli_err=None):
    path = os.path.join(d, name.replace(" ", "_").replace("/", "_") +
                        ".pcap")
    cap = Capture(ns_cap, iface, path, port)
    ok, out = perf(uroce, args, srv_ns, srv, cli_ns, cli, cli_err=cli_err)
    err = cap.stop()
    if not ok:
        report(name, False, "perf failed: " + out)
        return None
    if not os.path.exists(path):
        report(name, False, "tcpdump wrote nothing: " + err[-300:])
        return None
    extra = ["--udp-port", str(port)] if port != 4791 else []
    return path if check_capture(uroce, name, path, min_pkts, want_gso,
                                 extra) else None


def corrupt_one(src, dst):
    """Copies a classic pcap file, flipping a byte in the payload of the
    largest frame (a GSO super-frame: one of its packets goes bad)."""
    data = bytearray(open(src, "rb").read())
    off, best = 24, None
    while off + 16 <= len(data):
        incl = struct.unpack_from("<I", data, off + 8)[0]
        if best is None or incl > best[1]:
            best = (off + 16, incl)
        off += 16 + incl
    data[best[0] + best[1] // 2] ^= 0x40
    open(dst, "wb").write(bytes(data))


def live_cases(uroce, A, B, VA):
    # -c: the capture stops by itself after that many frames.
    name = "live: dump -i veth -c 50 --strict during perf"
    p = subprocess.Popen(nsx(A) + [uroce, "dump", "--json", "--strict", "-i",
                                   VA, "-c", "50"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    ok, out = perf(uroce, ["write", "bw", "-s", "65536", "-n", "300"], A,
                   "10.77.0.1", B, "10.77.0.2")
    try:
        so, se = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
    sm = [json.loads(l)["summary"] for l in so.splitlines()
          if l.startswith('{"summary"')]
    good = (ok and p.returncode == 0 and sm and sm[0]["frames"] == 50 and
            sm[0]["bad_icrc"] == 0 and sm[0]["roce"] >= 50)
    report(name, bool(good), "rc=%s %s" % (p.returncode, sm[0] if sm else
                                           se[-300:]))

    # Ctrl-C: the summary still comes, with what was seen.
    name = "live: dump -i veth stopped by SIGINT prints the summary"
    p = subprocess.Popen(nsx(A) + [uroce, "dump", "-q", "--conv", "-i", VA],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(1.0)
    ok, out = perf(uroce, ["send", "bw", "-s", "9000", "-n", "200"], A,
                   "10.77.0.1", B, "10.77.0.2")
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    try:
        so, se = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        so, se = p.communicate()
    good = (ok and p.returncode == 0 and "summary:" in so and
            " 0 bad ICRC" in so and "conversations" in so and
            "RC_SEND" in so)
    report(name, good, "rc=%s %s" % (p.returncode, (so + se)[-300:]
                                     if not good else ""))

    # --duration with nothing to see: ends on time with an empty summary.
    name = "live: --duration 1 ends on time"
    t0 = time.time()
    p = subprocess.run(nsx(A) + [uroce, "dump", "-i", VA, "--duration", "1"],
                       capture_output=True, text=True, timeout=20)
    dt = time.time() - t0
    good = p.returncode == 0 and "summary: 0 frames" in p.stdout and dt < 5
    report(name, good, "%.1f s rc=%d %s" % (dt, p.returncode,
                                            p.stderr[-200:]))


def ethtool(ns, dev, cmd, value):
    """A legacy ethtool ioctl (SIOCETHTOOL with a struct ethtool_value) run
    in ns: ethtool(8) is not a test dependency."""
    code = ("import array,fcntl,socket,struct\n"
            "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
            "b=array.array('B',struct.pack('II',%d,%d))\n"
            "fcntl.ioctl(s.fileno(),0x8946,struct.pack('16sP16x',%r,"
            "b.buffer_info()[0]))\n" % (cmd, value, dev.encode()))
    return subprocess.run(nsx(ns) + [sys.executable, "-c", code],
                          capture_output=True, text=True).returncode == 0


def gro_case(uroce, d, A, B, VA, VB):
    """The receive side of a veth whose sender segments (gso_max_segs 1,
    TSO off) and whose receiver runs GRO: the kernel merges the packets
    again into frames of the same shape as GSO super-frames, which a
    capture on the receiver shows. Changes the veth: run it last."""
    name = "veth rx: tcpdump after kernel GRO, perf write"
    ETHTOOL_STSO, ETHTOOL_SGRO = 0x1F, 0x2C
    ok = (subprocess.run(["ip", "-n", A, "link", "set", VA, "gso_max_segs",
                          "1"]).returncode == 0 and
          ethtool(A, VA, ETHTOOL_STSO, 0) and ethtool(B, VB, ETHTOOL_SGRO, 1))
    if not ok:
        report(name, False, "could not set up GRO on the veth")
        return
    path = os.path.join(d, "gro.pcap")
    cap = Capture(B, VB, path)
    ok, out = perf(uroce, ["write", "bw", "-s", "65536", "-n", "200"], B,
                   "10.77.0.2", A, "10.77.0.1")
    cap.stop()
    if not ok:
        report(name, False, "perf failed: " + out)
        return
    # Whether the kernel coalesced is its business (it did on Linux 6.x);
    # every packet must be sound either way.
    check_capture(uroce, name, path, 1600, want_gso=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    a = ap.parse_args()
    u = a.uroce
    if os.geteuid() != 0:
        print("needs root (network namespaces, captures)")
        return 1
    if not shutil.which("tcpdump"):
        print("tcpdump missing (scripts/install-deps.sh test installs it)")
        return 1
    sfx = "d%d" % (os.getpid() % 10000)
    up = subprocess.run(["bash", NETNS, "up", sfx], capture_output=True,
                        text=True)
    if up.returncode != 0:
        print("netns setup failed: " + up.stderr)
        return 1
    A, B, VA = "uroce-a" + sfx, "uroce-b" + sfx, "ua" + sfx
    d = tempfile.mkdtemp(prefix="uroce-dump.")
    t0 = time.time()
    try:
        # Super-frames built apart from uroce (zlib over masked headers).
        gen = os.path.join(HERE, "..", "..", "fuzz", "gen_gso_seeds.py")
        seeds = os.path.join(d, "seeds")
        os.mkdir(seeds)
        gpcap = os.path.join(d, "gen.pcap")
        subprocess.run([sys.executable, gen, "--corpus", seeds, "--pcap",
                        gpcap], check=True)
        sm = check_capture(u, "independent super-frames (gen_gso_seeds.py)",
                           gpcap, 19)
        if sm and (sm["gso_frames"], sm["gso_packets"]) != (4, 19):
            report("independent super-frames: 4 split into 19", False,
                   "%d into %d" % (sm["gso_frames"], sm["gso_packets"]))
        wr = ["write", "bw", "-s", "65536", "-n", "200"]
        # 200 x 64 KiB at MTU 4096: 3200 data packets; half of that must
        # be seen even if the capture drops frames on a loaded machine.
        perf_capture(u, d, "lo: tcpdump -i lo, perf write", A, "lo", wr, A,
                     "127.0.0.11", A, "127.0.0.12", 1600)
        v4_err = []  # the sender's counters: what it really resent
        v4 = perf_capture(u, d, "veth: tcpdump, perf write", A, VA,
                          wr + ["--stats"], A, "10.77.0.1", B, "10.77.0.2",
                          1600, cli_err=v4_err)
        perf_capture(u, d, "veth: tcpdump, perf write IPv6", A, VA, wr, A,
                     "fd77::1", B, "fd77::2", 1600)
        perf_capture(u, d, "veth: tcpdump, perf read 8 QPs", A, VA,
                     ["read", "bw", "-s", "20000", "-n", "200", "-q", "8"],
                     A, "10.77.0.1", B, "10.77.0.2", 200 * 5 // 2)
        perf_capture(u, d, "veth: tcpdump, perf send 9000", A, VA,
                     ["send", "bw", "-s", "9000", "-n", "300"], A,
                     "10.77.0.1", B, "10.77.0.2", 300 * 3 // 2)
        perf_capture(u, d, "any: tcpdump -i any, perf write", A, "any", wr,
                     A, "10.77.0.1", B, "10.77.0.2", 1600)
        perf_capture(u, d, "veth: --udp-port 4800, perf write", A, VA,
                     wr + ["--udp-port", "4800"], A, "10.77.0.1", B,
                     "10.77.0.2", 1600, port=4800)

        if shutil.which("ib_write_bw"):
            for where, cns, iface, srv, cli, port in (
                    ("lo", A, "lo", "127.0.0.21", "127.0.0.22", 18701),
                    ("veth", A, VA, "10.77.0.1", "10.77.0.2", 18702)):
                name = "%s: tcpdump, ib_write_bw over the drop-in" % where
                path = os.path.join(d, "ibw-%s.pcap" % where)
                cap = Capture(A, iface, path)
                ok, out = ib_write_bw(u, A, srv, cns if where == "lo" else B,
                                      cli, port)
                cap.stop()
                if not ok:
                    report(name, False, "ib_write_bw failed: " + out)
                else:
                    check_capture(u, name, path, 200 * 16 // 2)
        else:
            report("ib_write_bw over the drop-in", False,
                   "ib_write_bw missing (install-deps.sh test: perftest)")

        if v4:
            # --strict: one changed byte is one bad packet and exit 3.
            bad = os.path.join(d, "bad.pcap")
            corrupt_one(v4, bad)
            rc, _, sm, _, _ = dump(u, ["--strict", "-q", bad])
            rc0, _, sm0, _, _ = dump(u, ["-q", bad])
            report("--strict exits 3 on one bad ICRC, 0 without",
                   rc == 3 and rc0 == 0 and sm and sm["bad_icrc"] == 1,
                   "rc=%s/%s bad_icrc=%s" % (rc, rc0,
                                             sm and sm["bad_icrc"]))
            # --conv accounts for every packet; --filter picks one QP.
            # Retransmissions: no more than the sender made (a loaded host
            # may make it probe), none where it made none.
            m = re.search(r"retransmits=(\d+)", "".join(v4_err))
            resent = int(m.group(1)) if m else -1
            rc, recs, sm, convs, _ = dump(u, ["--conv", v4])
            data = [c for c in convs if c["packets"] >= 1600]
            total = sum(c["packets"] for c in convs)
            ok = (rc == 0 and len(data) == 1 and total == sm["roce"] and
                  0 <= data[0]["retransmissions"] <= resent and
                  any(c["acks"] > 0 for c in convs))
            report("--conv accounts for every packet", ok,
                   "%d conversations, %d of %d packets, %s retransmitted "
                   "(the sender says %d)"
                   % (len(convs), total, sm["roce"],
                      [c["retransmissions"] for c in data], resent))
            if data:
                q = data[0]["dqpn"]
                rc, recs, sm, _, _ = dump(u, ["--filter", "qp=%d" % q, v4])
                ok = (rc == 0 and len(recs) == data[0]["packets"] and
                      all(r["dqpn"] == q for r in recs) and
                      sm["shown"] == len(recs))
                report("--filter qp= shows that QP's packets only", ok,
                       "%d shown" % len(recs))
        live_cases(u, A, B, VA)
        gro_case(u, d, A, B, VA, "ub" + sfx)
    finally:
        subprocess.run(["bash", NETNS, "down", sfx])
        shutil.rmtree(d, ignore_errors=True)
    bad = sum(1 for _, ok in results if not ok)
    print("%d passed, %d failed (%.0f s)" % (len(results) - bad, bad,
                                             time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
