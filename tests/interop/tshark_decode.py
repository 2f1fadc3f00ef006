#!/usr/bin/python3
"""Interop test: packets encoded by `uroce pktgen`, decoded by tshark.

Runs `uroce pktgen --random N --seed S` (a pcap plus a JSON-lines file of
what uroce meant to encode), decodes the pcap with tshark's InfiniBand
(RoCEv2) dissector and checks, packet by packet, that tshark sees the
fields uroce says it wrote: IP/UDP fields, every BTH field, DETH, RETH,
AtomicETH, AETH, AtomicAckETH, ImmDt, IETH, the payload length and the
ICRC bytes, and that tshark finds the IPv4 header checksum and the UDP
checksum (IPv6) good and flags nothing as malformed. Wireshark does not
verify the ICRC, so it is recomputed here from the pcap bytes (the rules
docs/dump.md states). Finally `uroce dump --json` of the same pcap must report
the same values, a good ICRC on every packet and a matching summary.

Run with Debian's /usr/bin/python3. Exit status 0 when everything matches,
1 on any mismatch, 2 on a usage or setup error.
"""

import argparse
import ipaddress
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib

PROG = "tshark_decode"
ROCE_PORT = 4791

# Fields asked from tshark, in this order (one tab-separated column each).
TS_FIELDS = [
    "frame.number", "frame.time_epoch", "ip.version",
    "ip.src", "ip.dst", "ip.dsfield", "ip.ttl", "ip.id",
    "ip.checksum.status",
    "ipv6.src", "ipv6.dst", "ipv6.tclass", "ipv6.flow", "ipv6.hlim",
    "udp.srcport", "udp.dstport", "udp.checksum.status",
    "infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m",
    "infiniband.bth.padcnt", "infiniband.bth.tver", "infiniband.bth.p_key",
    "infiniband.reserved",  # first one: BTH byte 4 (FECN, BECN, resv6)
    "infiniband.bth.destqp", "infiniband.bth.a", "infiniband.bth.reserved7",
    "infiniband.bth.psn",
    "infiniband.rdeth.eecnxt",
    "infiniband.deth.q_key", "infiniband.deth.srcqp",
    # Wireshark shows the AtomicETH VA and R_Key with the RETH fields.
    "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
    "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
    "infiniband.aeth.syndrome", "infiniband.aeth.msn",
    "infiniband.atomicacketh.origremdt",
    "infiniband.immdt", "infiniband.ieth",
    "infiniband.invariant.crc", "data.len",
    "_ws.malformed", "_ws.expert.severity", "_ws.expert.message",
]

NAK_NAMES = ["PSN-sequence-error", "invalid-request", "remote-access-error",
             "remote-operational-error", "invalid-RD-request"]
RNR_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24,
          0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24,
          15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76,
          327.68, 491.52]

# Extension headers by opcode (IBA rules), for RC, UC, UD and CNP.
_HDRS = {0x03: ["immdt"], 0x05: ["immdt"], 0x06: ["reth"], 0x09: ["immdt"],
         0x0A: ["reth"], 0x0B: ["reth", "immdt"], 0x0C: ["reth"],
         0x0D: ["aeth"], 0x0F: ["aeth"], 0x10: ["aeth"], 0x11: ["aeth"],
         0x12: ["aeth", "atomicacketh"], 0x13: ["atomiceth"],
         0x14: ["atomiceth"]}


def opcode_headers(op):
    if op < 0x20:
        return set(_HDRS.get(op, [])) | ({"ieth"} if op in (0x16, 0x17)
                                         else set())
    if op < 0x40:
        return set(_HDRS.get(op - 0x20, []))
    if op == 0x64:
        return {"deth"}
    if op == 0x65:
        return {"deth", "immdt"}
    if op == 0x81:
        return {"cnp"}
    return None


# --------------------------------------------------------------------------


def icrc_of_l3(l3):
    """ICRC over an IP packet (IP header .. ICRC): CRC-32 of 8 bytes of ones,
    the IP header with TOS/TTL/checksum (IPv4) or traffic class/flow label/
    hop limit (IPv6) set to ones, the UDP header with checksum ones, the BTH
    with byte 4 ones, and the rest up to the ICRC. The value's little-endian
    bytes are what the wire carries."""
    if l3[0] >> 4 == 4:
        hl = (l3[0] & 15) * 4
        ip = bytearray(l3[:hl])
        ip[1] = 0xFF
        ip[8] = 0xFF
        ip[10:12] = b"\xff\xff"
    else:
        hl = 40
        ip = bytearray(l3[:40])
        ip[0] |= 0x0F
        ip[1:4] = b"\xff\xff\xff"
        ip[7] = 0xFF
    udp = bytearray(l3[hl:hl + 8])
    udp[6:8] = b"\xff\xff"
    rest = bytearray(l3[hl + 8:len(l3) - 4])
    rest[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))


def ip6_text(a):
    """Python 3.11 ipaddress's compressed text (no dotted quad)."""
    words = [(a >> (112 - 16 * i)) & 0xFFFF for i in range(8)]
    best, best_len, i = -1, 0, 0
    while i < 8:
        if words[i] == 0:
            j = i
            while j < 8 and words[j] == 0:
                j += 1
            if j - i > best_len:
                best, best_len = i, j - i
            i = j
        else:
            i += 1
    hexw = ["%x" % w for w in words]
    if best_len < 2:
        return ":".join(hexw)
    return ":".join(hexw[:best]) + "::" + ":".join(hexw[best + best_len:])


def read_frames(path):
    """[(l3 bytes, linktype)] from a pcap (any byte order, µs or ns) or a
    pcapng (through scapy's reader)."""
    with open(path, "rb") as f:
        data = f.read()
    magic = data[:4]
    frames = []
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1",
                 b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = "<" if magic[0] in (0xD4, 0x4D) else ">"
        linktype = struct.unpack(e + "I", data[20:24])[0] & 0x0FFFFFFF
        off = 24
        while off + 16 <= len(data):
            _s, _u, incl, _orig = struct.unpack(e + "IIII", data[off:off + 16])
            off += 16
            frames.append((data[off:off + incl], linktype))
            off += incl
        return frames
    from scapy.utils import RawPcapNgReader  # pcapng: let scapy read it
    rd = RawPcapNgReader(path)
    for b, md in rd:
        frames.append((b, getattr(md, "linktype", 1)))
    rd.close()
    return frames


def l3_of(frame, linktype):
    if linktype == 1:
        off = 14
        et = struct.unpack(">H", frame[12:14])[0]
        while et in (0x8100, 0x88A8):
            et = struct.unpack(">H", frame[off + 2:off + 4])[0]
            off += 4
        p = frame[off:]
    elif linktype in (12, 101, 228, 229):
        p = frame
    elif linktype == 113:
        p = frame[16:]
    elif linktype == 276:
        p = frame[20:]
    else:
        return None
    if not p:
        return None
    if p[0] >> 4 == 4:
        return p[:struct.unpack(">H", p[2:4])[0]]
    if p[0] >> 4 == 6:
        return p[:40 + struct.unpack(">H", p[4:6])[0]]
    return None

# --------------------------------------------------------------------------


def ival(s):
    """tshark text (decimal, 0x hex, or bare hex bytes) -> int; None if
    empty."""
    if s is None or s == "":
        return None
    s = s.split(";")[0].strip()
    if s == "":
        return None
    if s in ("True", "False"):
        return 1 if s == "True" else 0
    if s.startswith(("0x", "0X")):
        return int(s, 16)
    if ":" in s:
        return int(s.replace(":", ""), 16)
    try:
        return int(s, 10)
    except ValueError:
        return int(s, 16)


def hexval(s):
    """A bytes field (e.g. ImmDt: 'c68b1d3f' or 'c6:8b:1d:3f') -> int."""
    if not s:
        return None
    s = s.split(";")[0].replace(":", "").strip()
    return int(s, 16) if s else None


# Heuristic dissectors that Wireshark 4.0 tries on InfiniBand payloads
# (RPC-over-RDMA, SMB Direct, iSER, ...). They would claim random payload
# bytes, or throw "Malformed Packet" on short ones, so they are all turned
# off: the payload is then plain data whose length can be compared. Names
# this tshark does not know are dropped (see run_tshark).
IB_HEURISTICS = ["rpcrdma_infiniband", "smb_direct_infiniband",
                 "smcr_infiniband", "nvme_rdma", "lnet_ib",
                 "iser_infiniband", "eth_over_ib", "mellanox_eoib",
                 "fc_infiniband", "drbd_rdma", "sdp_infiniband"]
TSHARK = "tshark"


def run_tshark(path, tmp, extra_args):
    env = dict(os.environ)
    env["HOME"] = tmp            # no personal preferences, writable
    env["XDG_CONFIG_HOME"] = os.path.join(tmp, ".config")
    env.pop("DISPLAY", None)
    for _ in range(len(IB_HEURISTICS) + 1):
        cmd = [TSHARK, "-n", "-r", path,
               "-o", "ip.check_checksum:TRUE",
               "-o", "udp.check_checksum:TRUE",
               "-o", "infiniband.rroce.port:%d" % ROCE_PORT]
        for h in IB_HEURISTICS:
            cmd += ["--disable-heuristic", h]
        cp = subprocess.run(cmd + extra_args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, timeout=300)
        err = cp.stderr.decode(errors="replace")
        unknown = [h for h in IB_HEURISTICS
                   if "No such protocol %s," % h in err]
        if not unknown:
            break
        for h in unknown:
            IB_HEURISTICS.remove(h)
    if cp.returncode != 0:
        raise RuntimeError("tshark failed (%d): %s" % (
            cp.returncode, err[-800:]))
    return cp.stdout.decode(errors="replace")


def tshark_rows(path, tmp):
    # Pass 1: UDP ports. The UDP dissector tries the lower port first, so a
    # source port below 4791 that has a dissector of its own would win;
    # such ports are mapped to InfiniBand with "Decode As".
    out = run_tshark(path, tmp, ["-T", "fields", "-e", "udp.srcport",
                                 "-e", "udp.dstport"])
    low = set()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and parts[1] == str(ROCE_PORT) and parts[0]:
            p = int(parts[0])
            if p < ROCE_PORT:
                low.add(p)
    decode = []
    for p in sorted(low):
        decode += ["-d", "udp.port==%d,infiniband" % p]
    args = decode + ["-T", "fields", "-E", "separator=/t",
                     "-E", "occurrence=a", "-E", "aggregator=;",
                     "-E", "quote=n"]
    for f in TS_FIELDS:
        args += ["-e", f]
    out = run_tshark(path, tmp, args)
    rows = {}
    for line in out.splitlines():
        parts = line.split("\t", len(TS_FIELDS) - 1)
        if len(parts) < len(TS_FIELDS):
            parts += [""] * (len(TS_FIELDS) - len(parts))
        r = dict(zip(TS_FIELDS, parts))
        rows[int(r["frame.number"])] = r
    return rows, len(low)


def tshark_view(r):
    """tshark's row -> values in the schema of the expectation file."""
    v = {}
    ipver = ival(r["ip.version"])
    v["ip"] = ipver
    if r["ipv6.src"]:
        v["ip"] = 6
        v["src"] = r["ipv6.src"]
        v["dst"] = r["ipv6.dst"]
        v["tclass"] = ival(r["ipv6.tclass"])
        v["ttl"] = ival(r["ipv6.hlim"])
        v["flow_label"] = ival(r["ipv6.flow"])
    else:
        v["src"] = r["ip.src"]
        v["dst"] = r["ip.dst"]
        v["tclass"] = ival(r["ip.dsfield"])
        v["ttl"] = ival(r["ip.ttl"])
        v["ip_id"] = ival(r["ip.id"])
    if v["tclass"] is not None:
        v["ecn"] = v["tclass"] & 3
    v["sport"] = ival(r["udp.srcport"])
    v["dport"] = ival(r["udp.dstport"])
    m = {"opcode": "infiniband.bth.opcode", "se": "infiniband.bth.se",
         "mig": "infiniband.bth.m", "pad": "infiniband.bth.padcnt",
         "tver": "infiniband.bth.tver", "pkey": "infiniband.bth.p_key",
         "dqpn": "infiniband.bth.destqp", "ackreq": "infiniband.bth.a",
         "resv7": "infiniband.bth.reserved7", "psn": "infiniband.bth.psn"}
    for k, f in m.items():
        v[k] = ival(r[f])
    b4 = hexval(r["infiniband.reserved"])
    if b4 is not None:
        v["fecn"], v["becn"], v["resv6"] = b4 >> 7, (b4 >> 6) & 1, b4 & 0x3F
    if r["infiniband.rdeth.eecnxt"]:
        v["rdeth"] = {"een": ival(r["infiniband.rdeth.eecnxt"])}
    if r["infiniband.deth.q_key"] or r["infiniband.deth.srcqp"]:
        v["deth"] = {"qkey": ival(r["infiniband.deth.q_key"]),
                     "sqp": ival(r["infiniband.deth.srcqp"])}
    if r["infiniband.atomiceth.swapdt"] or r["infiniband.atomiceth.cmpdt"]:
        v["atomiceth"] = {"va": ival(r["infiniband.reth.va"]),
                          "rkey": ival(r["infiniband.reth.r_key"]),
                          "swap_add": ival(r["infiniband.atomiceth.swapdt"]),
                          "compare": ival(r["infiniband.atomiceth.cmpdt"])}
    elif r["infiniband.reth.va"] or r["infiniband.reth.dmalen"]:
        v["reth"] = {"va": ival(r["infiniband.reth.va"]),
                     "rkey": ival(r["infiniband.reth.r_key"]),
                     "dma_len": ival(r["infiniband.reth.dmalen"])}
    if r["infiniband.aeth.syndrome"] or r["infiniband.aeth.msn"]:
        v["aeth"] = {"syndrome": ival(r["infiniband.aeth.syndrome"]),
                     "msn": ival(r["infiniband.aeth.msn"])}
    if r["infiniband.atomicacketh.origremdt"]:
        v["atomicacketh"] = {
            "orig": ival(r["infiniband.atomicacketh.origremdt"])}
    if r["infiniband.immdt"]:
        v["immdt"] = hexval(r["infiniband.immdt"])
    if r["infiniband.ieth"]:
        v["ieth"] = {"rkey": hexval(r["infiniband.ieth"])}
    if r["infiniband.invariant.crc"]:
        # tshark reads the 4 ICRC bytes big-endian; the schema's "icrc" is
        # the same bytes read little-endian.
        c = ival(r["infiniband.invariant.crc"])
        v["icrc"] = struct.unpack("<I", struct.pack(">I", c))[0]
    dl = ival(r["data.len"]) or 0
    if v.get("pad") is not None:
        v["payload_len"] = dl - v["pad"] if dl else 0
    return v


def aeth_detail(syn):
    e = {}
    top, low = syn >> 5, syn & 0x1F
    if top == 0:
        e = {"kind": "ACK", "credits": low}
    elif top == 1:
        e = {"kind": "RNR_NAK", "timer_code": low, "timer_ms": RNR_MS[low]}
    elif top == 3:
        e = {"kind": "NAK", "nak_code": low,
             "nak": NAK_NAMES[low] if low < 5 else "reserved-%d" % low}
    else:
        e = {"kind": "reserved"}
    return e


def same(exp, got):
    if isinstance(exp, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(exp, bool) and exp == got
    if isinstance(exp, float) or isinstance(got, float):
        return isinstance(got, (int, float)) and \
            abs(got - exp) <= 1e-9 * max(1.0, abs(exp))
    return exp == got


def addr_same(a, b):
    try:
        return ipaddress.ip_address(a) == ipaddress.ip_address(b)
    except ValueError:
        return False


def fmt(v):
    if isinstance(v, int) and not isinstance(v, bool) and v > 9:
        return "%d (0x%x)" % (v, v)
    if isinstance(v, str) and v.startswith("<"):
        return v
    return json.dumps(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uroce", required=True, help="path of the uroce binary")
    ap.add_argument("--count", type=int, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--tshark", default="tshark")
    ap.add_argument("--max-show", type=int, default=10)
    args = ap.parse_args()
    t0 = time.time()
    if not os.access(args.uroce, os.X_OK):
        print("%s: uroce binary %s is not executable" % (PROG, args.uroce))
        return 2
    global TSHARK
    TSHARK = args.tshark
    if shutil.which(args.tshark) is None:
        print("%s: tshark not found (apt-get install tshark)" % PROG)
        return 2
    os.makedirs(args.workdir, exist_ok=True)
    pcap = os.path.join(args.workdir, "gen.pcap")
    jsonl = os.path.join(args.workdir, "gen.jsonl")
    for p in (pcap, jsonl):
        if os.path.exists(p):
            os.unlink(p)

    cp = subprocess.run([args.uroce, "pktgen", "--random", str(args.count),
                         "--seed", str(args.seed), "--out", pcap,
                         "--expect", jsonl],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        timeout=120)
    if cp.returncode != 0 or not os.path.exists(pcap) or \
            not os.path.exists(jsonl):
        print("%s: uroce pktgen failed (%d): %s" % (
            PROG, cp.returncode, cp.stderr.decode(errors="replace")[-500:]))
        print("0 passed, %d failed" % args.count)
        return 1

    mism = []          # (source, frame, field, expected, got)
    bad_frames = set()
    global_fail = 0

    def bad(src, fr, field, e, g):
        mism.append((src, fr, field, e, g))
        if isinstance(fr, int):
            bad_frames.add(fr)

    exp = {}
    with open(jsonl) as f:
        for ln, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                o = json.loads(line)
            except ValueError as e:
                bad("expect", ln, "json", "a JSON object", str(e))
                global_fail += 1
                continue
            fr = o.get("frame")
            if fr in exp:
                bad("expect", fr, "frame", "once", "twice")
                global_fail += 1
            exp[fr] = o
    n = args.count
    if sorted(exp) != list(range(1, n + 1)):
        bad("expect", "-", "frames", "1..%d" % n,
            "%d records" % len(exp))
        global_fail += 1

    # ---- The pcap itself: ICRC recomputed here. ----
    frames = read_frames(pcap)
    if len(frames) != n:
        bad("pcap", "-", "frame count", n, len(frames))
        global_fail += 1
    for i, (fb, lt) in enumerate(frames, 1):
        l3 = l3_of(fb, lt)
        e = exp.get(i)
        if l3 is None or e is None:
            bad("pcap", i, "frame", "an IP frame with an expectation",
                "unparsable" if l3 is None else "no expectation")
            continue
        carried = struct.unpack("<I", l3[-4:])[0]
        mine = icrc_of_l3(l3)
        if carried != mine:
            bad("icrc", i, "icrc on the wire", mine, carried)
        if e.get("icrc") != carried:
            bad("icrc", i, "expect.icrc vs wire", carried, e.get("icrc"))

    # ---- tshark ----
    tmp = tempfile.mkdtemp(prefix="tshark_decode.")
    try:
        rows, n_decode_as = tshark_rows(pcap, tmp)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
        print("%s: %s" % (PROG, e))
        print("0 passed, %d failed" % n)
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    n_ts_fields = 0
    tshark_ts = {}
    for fr in range(1, n + 1):
        e = exp.get(fr)
        r = rows.get(fr)
        if e is None:
            continue
        if r is None:
            bad("tshark", fr, "frame", "decoded", "<missing>")
            continue
        try:
            tshark_ts[fr] = float(r["frame.time_epoch"])
        except ValueError:
            pass
        if not r["infiniband.bth.opcode"]:
            bad("tshark", fr, "protocol", "InfiniBand (RRoCE)",
                "not dissected as InfiniBand")
            continue
        v = tshark_view(r)
        if r["_ws.malformed"]:
            bad("tshark", fr, "_ws.malformed", "<absent>", "malformed packet")
        sev = r["_ws.expert.severity"]
        if sev:
            # Errors only (Wireshark's severity: 0x00800000 = error).
            levels = [ival(x) for x in sev.split(";") if x]
            msgs = r["_ws.expert.message"].split(";")
            for lev, msg in zip(levels, msgs):
                if lev is not None and lev >= 0x00800000:
                    bad("tshark", fr, "expert error", "<none>", msg)
        if v["ip"] == 4:
            if ival(r["ip.checksum.status"]) != 1:
                bad("tshark", fr, "ip.checksum.status", "1 (good)",
                    r["ip.checksum.status"])
            if ival(r["udp.checksum.status"]) not in (1, 3):
                bad("tshark", fr, "udp.checksum.status",
                    "1 (good) or 3 (none)", r["udp.checksum.status"])
        elif ival(r["udp.checksum.status"]) != 1:
            bad("tshark", fr, "udp.checksum.status", "1 (good)",
                r["udp.checksum.status"])
        for k, ev in e.items():
            if k in ("frame", "opname", "icrc_ok"):
                continue
            if k == "icrc" and e.get("opcode") == 0x81:
                continue  # tshark 4.0 does not know the CNP layout
            if k in ("src", "dst"):
                if not addr_same(ev, v.get(k)):
                    bad("tshark", fr, k, ev, v.get(k, "<absent>"))
                continue
            gv = v.get(k, "<absent>")
            if isinstance(ev, dict):
                if not isinstance(gv, dict):
                    bad("tshark", fr, k, ev, gv)
                    continue
                for kk, evv in ev.items():
                    n_ts_fields += 1
                    if not same(evv, gv.get(kk)):
                        bad("tshark", fr, k + "." + kk, evv,
                            gv.get(kk, "<absent>"))
            else:
                n_ts_fields += 1
                if not same(ev, gv):
                    bad("tshark", fr, k, ev, gv)
        # Headers tshark found that uroce did not mean to write.
        for h in ("rdeth", "deth", "reth", "atomiceth", "aeth",
                  "atomicacketh", "immdt", "ieth"):
            if h in v and h not in e:
                bad("tshark", fr, h, "<absent>", v[h])
        # The opcode's headers, per the IBA rules, against the expectation.
        hs = opcode_headers(e.get("opcode", -1))
        if hs is None:
            bad("expect", fr, "opcode", "an RC/UC/UD opcode or CNP",
                e.get("opcode"))
        else:
            for h in ("deth", "reth", "atomiceth", "aeth", "atomicacketh",
                      "immdt", "ieth"):
                if (h in hs) != (h in e):
                    bad("expect", fr, h,
                        "present" if h in hs else "<absent>",
                        "present" if h in e else "<absent>")

    # ---- uroce dump ----
    cp = subprocess.run([args.uroce, "dump", "--json", pcap],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        timeout=120)
    summary = None
    dump = {}
    if cp.returncode != 0:
        bad("dump", "-", "exit status", 0, cp.returncode)
        global_fail += 1
    for line in cp.stdout.decode(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            o = json.loads(line)
        except ValueError:
            bad("dump", "-", "output", "JSON lines", line[:100])
            global_fail += 1
            continue
        if "summary" in o and len(o) == 1:
            summary = o["summary"]
        elif o.get("frame") in dump:
            bad("dump", o.get("frame"), "frame", "once", "twice")
        else:
            dump[o.get("frame")] = o
    for fr in range(1, n + 1):
        e = exp.get(fr)
        d = dump.get(fr)
        if e is None:
            continue
        if d is None:
            bad("dump", fr, "frame", "printed", "<missing>")
            continue
        for k, ev in e.items():
            if k == "icrc_ok":
                continue  # checked below: must be true
            gv = d.get(k, "<absent>")
            if isinstance(ev, dict):
                if not isinstance(gv, dict):
                    bad("dump", fr, k, ev, gv)
                    continue
                for kk, evv in ev.items():
                    if not same(evv, gv.get(kk, "<absent>")):
                        bad("dump", fr, k + "." + kk, evv,
                            gv.get(kk, "<absent>"))
            elif not same(ev, gv):
                bad("dump", fr, k, ev, gv)
        if d.get("icrc_ok") is not True:
            bad("dump", fr, "icrc_ok", True, d.get("icrc_ok", "<absent>"))
        if d.get("icrc_expected") != d.get("icrc"):
            bad("dump", fr, "icrc_expected", d.get("icrc"),
                d.get("icrc_expected", "<absent>"))
        if "malformed" in d:
            bad("dump", fr, "malformed", "<absent>", d["malformed"])
        if fr in tshark_ts and (not isinstance(d.get("ts"), (int, float)) or
                                abs(d["ts"] - tshark_ts[fr]) > 1e-6):
            bad("dump", fr, "ts", tshark_ts[fr], d.get("ts", "<absent>"))
        if e.get("ip") == 6:
            for k in ("src", "dst"):
                t = ip6_text(int(ipaddress.IPv6Address(e[k])))
                if d.get(k) != t:
                    bad("dump", fr, k + " text", t, d.get(k))
        if "aeth" in e and isinstance(d.get("aeth"), dict):
            for kk, evv in aeth_detail(e["aeth"]["syndrome"]).items():
                if not same(evv, d["aeth"].get(kk, "<absent>")):
                    bad("dump", fr, "aeth." + kk, evv,
                        d["aeth"].get(kk, "<absent>"))
    extra = sorted(k for k in dump if k not in exp)
    if extra:
        bad("dump", extra[0], "frame", "<not in pktgen output>", "printed")
        global_fail += 1
    if summary is None:
        bad("dump", "summary", "summary", "a summary line", "<missing>")
        global_fail += 1
    else:
        by_op = {}
        for e in exp.values():
            by_op[e.get("opname")] = by_op.get(e.get("opname"), 0) + 1
        want = {"frames": n, "roce": n, "non_roce": 0, "malformed": 0,
                "bad_icrc": 0, "by_opcode": by_op}
        for k, wv in want.items():
            if summary.get(k) != wv:
                bad("dump", "summary", "summary." + k, wv,
                    summary.get(k, "<absent>"))
                global_fail += 1

    elapsed = time.time() - t0
    n_v6 = sum(1 for e in exp.values() if e.get("ip") == 6)
    ops = len(set(e.get("opcode") for e in exp.values()))
    print("%s: %d packets from uroce pktgen (seed %d; %d IPv6; %d distinct "
          "opcodes); %d fields compared with tshark (%d Decode-As ports); "
          "ICRC recomputed; uroce dump compared; %.1f s"
          % (PROG, n, args.seed, n_v6, ops, n_ts_fields, n_decode_as,
             elapsed))
    if mism:
        print("%s: %d mismatches; the first %d:"
              % (PROG, len(mism), min(len(mism), args.max_show)))
        for src, fr, field, e, g in mism[:args.max_show]:
            print("  [%s] frame %s: %s: expected %s, got %s"
                  % (src, fr, field, fmt(e), fmt(g)))
        shown = [m[1] for m in mism if isinstance(m[1], int)][:2]
        for fr in shown:
            if 1 <= fr <= len(frames):
                hx = frames[fr - 1][0].hex()
                print("  frame %d bytes: %s%s" % (fr, hx[:400],
                                                  "..." if len(hx) > 400
                                                  else ""))
    failed = len(bad_frames)
    passed = n - len([f for f in bad_frames if 1 <= f <= n])
    print("%s: %d packets, %d mismatches" % (PROG, n, len(mism)))
    print("%d passed, %d failed" % (passed, failed + global_fail))
    return 0 if not mism else 1


if __name__ == "__main__":
    sys.exit(main())
