#!/usr/bin/python3
"""Unmodified Debian 12 rdma_cm programs (rdmacm-utils, perftest) over
uroce's librdmacm.so.1 and libibverbs.so.1 drop-ins, two processes on one
host (endpoints 127.0.0.2 and 127.0.0.3), each started through `uroce run`.
The connection manager speaks the InfiniBand CM protocol on QP1, so each
case also checks, in a capture of the client, that the CM MADs it expects
crossed the wire (decoded by `uroce dump`).

Cases: rping with data verification (-V) in both directions of RDMA READ
and WRITE, ucmatose (RC, 2 connections), udaddy (UD via SIDR), rdma_server
/ rdma_client (the synchronous API: rdma_getaddrinfo, rdma_create_ep,
rdma_get_request), ib_write_bw -R, and a connection to a port nobody
listens on, which the peer's CM must reject (REJ, invalid service ID) at
once rather than let time out.

Run it in a network namespace of its own (CTest does, with unshare -n): the
servers listen on fixed ports. Prints one line per case and
`N passed, M failed`; exits non-zero if any failed or a program is
missing (unless --allow-missing)."""
import argparse
import os
import random
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zlib

results = []


def report(name, ok, detail=""):
    results.append((name, ok))
    print("%-46s %s %s" % (name, "ok" if ok else "FAIL", detail), flush=True)


def urun(uroce, addr, argv, pcap=None):
    c = [uroce, "run", "--addr", addr]
    if pcap:
        c += ["--pcap", pcap]
    return c + ["--"] + argv


def run_pair(uroce, argv_srv, argv_cli, pcap, timeout=60, settle=1.0,
             addrs=("127.0.0.2", "127.0.0.3")):
    """Starts the server, then the client. A client rejected because the
    server was not listening yet (REJ, invalid service ID) tries again
    against a fresh server: perftest 4.5-0.17 retries a rejected connect
    itself with the CM IDs it has just destroyed, and a REQ of such a
    retry could reach the first server once it listened, which then took
    that connection for the one it waited for and never answered the
    next client's (its SENDs were refused RNR forever)."""
    def start():
        p = subprocess.Popen(urun(uroce, addrs[0], argv_srv),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        time.sleep(settle)
        return p

    s = start()
    deadline = time.time() + timeout
    while True:
        c = subprocess.run(urun(uroce, addrs[1], argv_cli, pcap),
                           capture_output=True, text=True,
                           timeout=max(5, deadline - time.time()))
        out_c = c.stdout + c.stderr
        if (c.returncode == 0 or "REJECTED" not in out_c or
                time.time() > deadline - 15 or s.poll() is not None):
            break
        s.kill()
        s.communicate()
        time.sleep(0.5)
        s = start()
    try:
        out_s, _ = s.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        s.kill()
        out_s = s.communicate()[0] + "\n<server timed out>"
    return s.returncode, c.returncode, out_s, out_c


def mads(uroce, pcap):
    """The CM messages in a capture, in order, as `uroce dump` names them."""
    out = subprocess.run([uroce, "dump", pcap], capture_output=True,
                         text=True).stdout
    return re.findall(r"\| CM (\w+) ", out)


def expect_mads(got, want):
    """want appear in got in this order (others may come between)."""
    i = 0
    for m in got:
        if i < len(want) and m == want[i]:
            i += 1
    return i == len(want)


def case(name, uroce, tmp, srv, cli, check, want_mads, timeout=60,
         forbid=(), times=1, addrs=("127.0.0.2", "127.0.0.3")):
    pcap = os.path.join(tmp, re.sub(r"\W+", "_", name) + ".pcap")
    t0 = time.time()
    rs, rc, out_s, out_c = run_pair(uroce, srv, cli, pcap, timeout,
                                    addrs=addrs)
    why = None
    if rs != 0 or rc != 0:
        why = "exit codes server %s client %s" % (rs, rc)
    else:
        why = check(out_s, out_c)
    if not why:
        got = mads(uroce, pcap)
        if (not expect_mads(got, want_mads) or set(got) & set(forbid) or
                any(got.count(m) < times for m in want_mads)):
            why = "CM MADs %s, expected %s in order (each %d times)%s" % (
                got, want_mads, times,
                ", none of %s" % list(forbid) if forbid else "")
    report(name, why is None, why or "(%.1fs)" % (time.time() - t0))
    if why:
        print("---- server\n%s\n---- client\n%s" % (out_s[-2000:],
                                                    out_c[-2000:]))


def check_rping(count):
    def check(out_s, out_c):
        for who, out in (("server", out_s), ("client", out_c)):
            n = re.findall(r"ping data: rdma-ping-(\d+):", out)
            if [int(x) for x in n] != list(range(count)):
                return "%s printed %d of %d pings" % (who, len(n), count)
        if re.search(r"(?i)error|failed|miscompare", out_s + out_c):
            return "error in output"
        return None
    return check


def check_status0(out_s, out_c):
    for who, out in (("server", out_s), ("client", out_c)):
        if "return status 0" not in out or "data transfers complete" not in out:
            return "%s did not complete its transfers" % who
    return None


def check_sync(out_s, out_c):
    if "rdma_server: end 0" not in out_s or "rdma_client: end 0" not in out_c:
        return "no clean end"
    return None


def check_bw(size, iters):
    def check(out_s, out_c):
        for who, out in (("server", out_s), ("client", out_c)):
            if re.search(r"(?i)\b(error|failed|unable)\b", out):
                return "%s: error in output" % who
            rows = [l.split() for l in out.splitlines()
                    if re.match(r"^\s*%d\s+%d\s" % (size, iters), l)]
            if not rows:
                return "%s: no result row for %d x %d" % (who, size, iters)
            if not float(rows[-1][3]) > 0:
                return "%s: zero bandwidth" % who
        return None
    return check


# ---- a hostile peer: RoCEv2 UD packets to QP1 made here ----

def icrc(ip, udp, rest):
    """RoCEv2 ICRC (IPv4) over the masked headers: CRC-32 of 8 bytes of
    ones, the IP header with TOS, TTL and checksum ones, the UDP header
    with checksum ones, the BTH with byte 4 ones, and the rest."""
    ip = bytearray(ip)
    ip[1] = ip[8] = 0xFF
    ip[10:12] = b"\xff\xff"
    udp = bytearray(udp)
    udp[6:8] = b"\xff\xff"
    rest = bytearray(rest)
    rest[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))


def gsi_packet(src, dst, sport, mad, psn):
    """UDP payload: BTH (UD SEND only to QP1) + DETH (GSI Q_Key, source QP
    1) + mad + ICRC, for a datagram sent with DF (IP ID 0, as Linux sends
    a DF datagram from an unconnected socket)."""
    bth = struct.pack(">BBHII", 0x64, 0, 0xFFFF, 1, psn & 0xFFFFFF)
    deth = struct.pack(">II", 0x80010000, 1)
    body = bth + deth + mad
    n = 8 + len(body) + 4
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 20 + n, 0, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    udp = struct.pack(">HHHH", sport, 4791, n, 0)
    return body + struct.pack("<I", icrc(ip, udp, body))


def mad_hdr(attr, method=3, tid=0):
    return struct.pack(">BBBBHHQHHI", 1, 7, 2, method, 0, 0, tid, attr, 0, 0)


def hostile_case(uroce, tmp):
    """Thousands of random and malformed CM MADs (right ICRC, so they reach
    the CM) at a process whose rping server listens; then a REQ for a
    service nobody offers must still get its REJ, and a real rping client
    must still connect and verify its data."""
    me, peer = "127.0.0.99", "127.0.0.2"
    srv = subprocess.Popen(urun(uroce, peer, ["rping", "-s", "-a", peer, "-p",
                                              "7190", "-C", "3", "-V"]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    time.sleep(1.0)
    sk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sk.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER: DO (DF)
    sk.bind((me, 4791))
    sk.settimeout(0.01)
    r = random.Random(26)
    sent = 0
    for i in range(4000):
        attr = r.choice([0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17,
                         0x18, 0x19, 0x01, 0xFFFF])
        body = bytes(r.randrange(256) for _ in range(232))
        mad = mad_hdr(attr, method=r.choice([3, 3, 3, 1, 0x81]),
                      tid=r.getrandbits(64)) + body
        k = r.random()
        if k < 0.1:
            mad = mad[:r.randrange(256)]          # short
        elif k < 0.15:
            mad = mad + bytes(r.randrange(1, 64))  # long
        elif k < 0.2:
            mad = bytes([r.randrange(256)]) + mad[1:]  # base version
        try:
            sk.sendto(gsi_packet(me, peer, 4791, mad, i), (peer, 4791))
            sent += 1
        except OSError:
            pass
        if i % 200 == 0:
            try:
                while sk.recv(4096):
                    pass
            except OSError:
                pass
    # A REQ for a service nobody offers: the CM must still answer REJ 8.
    req = bytearray(mad_hdr(0x10, tid=0x2626) + bytes(232))
    struct.pack_into(">I", req, 24, 0x12345678)             # local comm ID
    struct.pack_into(">Q", req, 32, 0x0000000001060000 | 7191)
    struct.pack_into(">I", req, 56, 0x000042 << 8)           # QPN
    req[24 + 140] = 0x00
    req[24 + 141] = 0x40  # rdma_cm IP header: IPv4
    try:
        while sk.recv(4096):
            pass
    except OSError:
        pass
    sk.settimeout(3)
    sk.sendto(gsi_packet(me, peer, 4791, bytes(req), 9999), (peer, 4791))
    rej = None
    end = time.time() + 3
    while time.time() < end and rej is None:
        try:
            d = sk.recv(4096)
        except OSError:
            break
        m = d[20:20 + 256]
        if len(m) == 256 and struct.unpack(">H", m[16:18])[0] == 0x12 and \
                struct.unpack(">I", m[28:32])[0] == 0x12345678:
            rej = struct.unpack(">H", m[34:36])[0]
    sk.close()
    c = subprocess.run(urun(uroce, "127.0.0.3",
                            ["rping", "-c", "-a", peer, "-p", "7190", "-C",
                             "3", "-V", "-v"]),
                       capture_output=True, text=True, timeout=60)
    try:
        out_s = srv.communicate(timeout=20)[0]
    except subprocess.TimeoutExpired:
        srv.kill()
        out_s = srv.communicate()[0] + "<server timed out>"
    ok = (rej == 8 and c.returncode == 0 and srv.returncode == 0 and
          len(re.findall(r"ping data: rdma-ping-", c.stdout)) == 3)
    report("4000 hostile MADs, then REJ and rping", ok,
           "(%d sent, REJ reason %s)" % (sent, rej) if ok else
           "REJ %s, client rc %s, server rc %s\n%s\n%s" % (
               rej, c.returncode, srv.returncode, (c.stdout + c.stderr)[-500:],
               out_s[-500:]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--uroce", required=True)
    ap.add_argument("--allow-missing", action="store_true")
    a = ap.parse_args()
    uroce = os.path.abspath(a.uroce)
    need = ["rping", "ucmatose", "udaddy", "rdma_server", "rdma_client",
            "ib_write_bw"]
    missing = [p for p in need if not shutil.which(p)]
    if missing:
        print("missing programs: %s (apt-get install rdmacm-utils perftest)"
              % " ".join(missing))
        return 0 if a.allow_missing else 1
    tmp = tempfile.mkdtemp(prefix="rdmacm_e2e.")
    # (the client's capture ends with its process: the DREP answering its
    # DREQ may come after it exits)
    conn = ["REQ", "REP", "RTU", "DREQ"]
    case("rping -V -C 20", uroce, tmp,
         ["rping", "-s", "-a", "127.0.0.2", "-p", "7174", "-C", "20", "-V",
          "-v"],
         ["rping", "-c", "-a", "127.0.0.2", "-p", "7174", "-C", "20", "-V",
          "-v"], check_rping(20), conn)
    case("rping -V -S 32768 -C 5", uroce, tmp,
         ["rping", "-s", "-a", "127.0.0.2", "-p", "7175", "-C", "5", "-V",
          "-S", "32768"],
         ["rping", "-c", "-a", "127.0.0.2", "-p", "7175", "-C", "5", "-V",
          "-S", "32768"], lambda s, c: None, conn)
    # IPv6: GIDs are the addresses themselves (this namespace's own lo)
    v6 = ("fd77::2", "fd77::3")
    for a in v6:
        subprocess.run(["ip", "addr", "add", a + "/128", "dev", "lo",
                        "nodad"], stderr=subprocess.DEVNULL)
    case("rping -V -C 5 over IPv6", uroce, tmp,
         ["rping", "-s", "-a", v6[0], "-p", "7181", "-C", "5", "-V", "-v"],
         ["rping", "-c", "-a", v6[0], "-p", "7181", "-C", "5", "-V", "-v"],
         check_rping(5), conn, addrs=v6)
    case("ucmatose -c 2 -C 10", uroce, tmp,
         ["ucmatose", "-b", "127.0.0.2", "-p", "7176", "-c", "2", "-C", "10"],
         ["ucmatose", "-s", "127.0.0.2", "-p", "7176", "-c", "2", "-C", "10"],
         check_status0, ["REQ", "REP", "RTU"], times=2)
    case("udaddy -c 2 -C 10", uroce, tmp,
         ["udaddy", "-b", "127.0.0.2", "-c", "2", "-C", "10"],
         ["udaddy", "-s", "127.0.0.2", "-c", "2", "-C", "10"],
         check_status0, ["SIDR_REQ", "SIDR_REP", "SIDR_REP"],
         forbid=["DREQ", "REQ"])
    case("rdma_server / rdma_client", uroce, tmp,
         ["rdma_server", "-s", "127.0.0.2", "-p", "7178"],
         ["rdma_client", "-s", "127.0.0.2", "-p", "7178"], check_sync,
         ["REQ", "REP", "RTU"])
    case("ib_write_bw -R 64K x 500", uroce, tmp,
         ["ib_write_bw", "-R", "-d", "uroce0", "-x", "1", "-p", "18600",
          "-s", "65536", "-n", "500"],
         ["ib_write_bw", "-R", "-d", "uroce0", "-x", "1", "-p", "18600",
          "-s", "65536", "-n", "500", "127.0.0.2"], check_bw(65536, 500),
         ["REQ", "REP", "RTU"], timeout=90)

    # Nobody listens: the peer's CM answers the REQ with a REJ at once.
    pcap = os.path.join(tmp, "rej.pcap")
    # (udaddy listens in the UDP port space: the CM runs, no TCP listener)
    srv = subprocess.Popen(urun(uroce, "127.0.0.2", ["udaddy", "-b",
                                                     "127.0.0.2"]),
                           stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    t0 = time.time()
    c = subprocess.run(urun(uroce, "127.0.0.3",
                            ["rping", "-c", "-a", "127.0.0.2", "-p", "7180",
                             "-C", "1"], pcap),
                       capture_output=True, text=True, timeout=60)
    dt = time.time() - t0
    srv.kill()
    srv.wait()
    out = c.stdout + c.stderr
    got = mads(uroce, pcap)
    ok = (c.returncode != 0 and "REJECTED" in out and dt < 10 and
          expect_mads(got, ["REQ", "REJ"]))
    report("rping to a port nobody listens on", ok,
           "(%.1fs, REJ)" % dt if ok else "rc %s, %.1fs, MADs %s: %s" %
           (c.returncode, dt, got, out.strip()[-300:]))

    hostile_case(uroce, tmp)

    npass = sum(1 for _, ok in results if ok)
    print("%d passed, %d failed" % (npass, len(results) - npass))
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if npass == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
