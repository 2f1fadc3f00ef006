#!/usr/bin/python3
"""Interop test: RoCEv2 packets built by scapy, decoded by `uroce dump --json`.

Draws random RoCEv2 packets with scapy (Ether / IPv4 or IPv6 / UDP 4791 /
scapy.contrib.roce.BTH / extension headers packed with struct / payload /
pad / ICRC), including a share of deliberately malformed packets, packets
whose ICRC is broken after it was computed (they must be reported bad) and
packets whose ICRC-masked fields (TTL, ECN, flow label, UDP checksum, FECN,
BECN) were changed after it was computed (they must stay good). Writes them
with a few non-RoCE frames to WORKDIR/scapy.pcap, runs `uroce dump --json`
and compares every reported field with what was built. A subset is also
written with the other link types the dump reads (pcapng, raw IP, IPv4,
IPv6, Linux SLL and SLL2) and checked the same way.

The ICRC is computed here independently (by the rules docs/dump.md states),
and the result is cross-checked against scapy's own ICRC on every IPv4 packet
(Debian's scapy 2.5.0 computes it for IPv4 only).

Run with Debian's /usr/bin/python3 (it sees python3-scapy). Exit status 0
when everything matches, 1 on any mismatch, 2 on a usage or setup error.
"""

import argparse
import copy
import decimal
import ipaddress
import json
import logging
import os
import random
import struct
import subprocess
import sys
import time
import zlib

logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
logging.getLogger("scapy").setLevel(logging.ERROR)
try:
    from scapy.config import conf
    conf.verb = 0
    from scapy.compat import raw
    from scapy.layers.l2 import ARP, CookedLinux, CookedLinuxV2, Dot1Q, Ether
    from scapy.layers.inet import ICMP, IP, TCP, UDP, IPOption_NOP, \
        IPOption_Router_Alert
    from scapy.layers.inet6 import IPv6, ICMPv6EchoRequest
    from scapy.packet import Raw
    from scapy.utils import PcapWriter, RawPcapReader, RawPcapNgReader, \
        wrpcap
    from scapy.contrib.roce import BTH, GRH, _bth_opcodes
except ImportError as e:  # pragma: no cover
    print("scapy_roundtrip: cannot import scapy (%s); run with Debian's "
          "/usr/bin/python3 and install python3-scapy" % e)
    sys.exit(2)

ROCE_PORT = 4791
PROG = "scapy_roundtrip"

# --------------------------------------------------------------------------
# The opcode table, written from the IBA rules (not from uroce).

HDR_ORDER = ["rdeth", "deth", "xrceth", "reth", "atomiceth", "aeth",
             "atomicacketh", "immdt", "ieth", "cnp"]
HDR_LEN = {"rdeth": 4, "deth": 8, "xrceth": 4, "reth": 16, "atomiceth": 28,
           "aeth": 4, "atomicacketh": 8, "immdt": 4, "ieth": 4, "cnp": 16}

# (offset from the transport base, name, headers, carries payload, request)
_BASE_OPS = [
    (0x00, "SEND_FIRST", [], True, True),
    (0x01, "SEND_MIDDLE", [], True, True),
    (0x02, "SEND_LAST", [], True, True),
    (0x03, "SEND_LAST_WITH_IMMEDIATE", ["immdt"], True, True),
    (0x04, "SEND_ONLY", [], True, True),
    (0x05, "SEND_ONLY_WITH_IMMEDIATE", ["immdt"], True, True),
    (0x06, "RDMA_WRITE_FIRST", ["reth"], True, True),
    (0x07, "RDMA_WRITE_MIDDLE", [], True, True),
    (0x08, "RDMA_WRITE_LAST", [], True, True),
    (0x09, "RDMA_WRITE_LAST_WITH_IMMEDIATE", ["immdt"], True, True),
    (0x0A, "RDMA_WRITE_ONLY", ["reth"], True, True),
    (0x0B, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", ["reth", "immdt"], True, True),
    (0x0C, "RDMA_READ_REQUEST", ["reth"], False, True),
    (0x0D, "RDMA_READ_RESPONSE_FIRST", ["aeth"], True, False),
    (0x0E, "RDMA_READ_RESPONSE_MIDDLE", [], True, False),
    (0x0F, "RDMA_READ_RESPONSE_LAST", ["aeth"], True, False),
    (0x10, "RDMA_READ_RESPONSE_ONLY", ["aeth"], True, False),
    (0x11, "ACKNOWLEDGE", ["aeth"], False, False),
    (0x12, "ATOMIC_ACKNOWLEDGE", ["aeth", "atomicacketh"], False, False),
    (0x13, "COMPARE_SWAP", ["atomiceth"], False, True),
    (0x14, "FETCH_ADD", ["atomiceth"], False, True),
]


def build_opcode_table():
    """opcode -> (name, [headers in wire order], has_payload)."""
    t = {}

    def add(code, name, hdrs, payload):
        hdrs = sorted(set(hdrs), key=HDR_ORDER.index)
        t[code] = (name, hdrs, payload)

    for off, name, hdrs, pay, _ in _BASE_OPS:
        add(0x00 + off, "RC_" + name, hdrs, pay)
        if off <= 0x0B:
            add(0x20 + off, "UC_" + name, hdrs, pay)
    add(0x16, "RC_SEND_LAST_WITH_INVALIDATE", ["ieth"], True)
    add(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", ["ieth"], True)
    for off, name, hdrs, pay, req in _BASE_OPS:
        add(0x40 + off, "RD_" + name,
            hdrs + ["rdeth"] + (["deth"] if req else []), pay)
    add(0x55, "RD_RESYNC", ["rdeth", "deth"], False)
    # XRC: RC's opcodes from 0xA0; every request (not its responses)
    # carries the XRCETH, the target's XRC SRQ number.
    for off, name, hdrs, pay, req in _BASE_OPS:
        add(0xA0 + off, "XRC_" + name, hdrs + (["xrceth"] if req else []), pay)
    add(0xB6, "XRC_SEND_LAST_WITH_INVALIDATE", ["xrceth", "ieth"], True)
    add(0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE", ["xrceth", "ieth"], True)
    add(0x64, "UD_SEND_ONLY", ["deth"], True)
    add(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", ["deth", "immdt"], True)
    add(0x81, "CNP", ["cnp"], False)
    return t


OPS = build_opcode_table()
# uroce's own multipath opcodes (0xC0 + an RC opcode, in the block IBA
# leaves to manufacturers; docs/transport.md) decode as such, not as
# reserved: test_inspect checks them. This test draws IBA's.
UROCE_MP_OPCODES = set(range(0xC0, 0xCC)) | {0xD1, 0xD6, 0xD7}
RESERVED_OPCODES = [c for c in range(256)
                    if c not in OPS and c not in UROCE_MP_OPCODES]

NAK_NAMES = ["PSN-sequence-error", "invalid-request", "remote-access-error",
             "remote-operational-error", "invalid-RD-request"]
# IBA table 45: RNR NAK timer codes, in milliseconds (code 0 = 655.36 ms).
RNR_MS = [655.36, 0.01, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.24,
          0.32, 0.48, 0.64, 0.96, 1.28, 1.92, 2.56, 3.84, 5.12, 7.68, 10.24,
          15.36, 20.48, 30.72, 40.96, 61.44, 81.92, 122.88, 163.84, 245.76,
          327.68, 491.52]


def check_names_against_scapy():
    """Our opcode names must be spelled as scapy spells them."""
    bad = []
    for code, name in _bth_opcodes.items():
        if code not in OPS or OPS[code][0] != name:
            bad.append("0x%02x scapy=%s ours=%s"
                       % (code, name, OPS.get(code, ("-",))[0]))
    return bad

# --------------------------------------------------------------------------
# ICRC, written from the rules in docs/dump.md (independent of scapy's and uroce's).


def icrc_of_l3(l3):
    """ICRC of an IP packet (IP header .. ICRC, nothing after): CRC-32 of
    8 bytes of ones + masked IP header + UDP header with checksum ones + BTH
    with byte 4 ones + the rest up to the ICRC. Returns the value whose
    little-endian bytes go on the wire."""
    if l3[0] >> 4 == 4:
        hl = (l3[0] & 15) * 4
        ip = bytearray(l3[:hl])
        ip[1] = 0xFF            # TOS
        ip[8] = 0xFF            # TTL
        ip[10:12] = b"\xff\xff"  # header checksum
    else:
        hl = 40
        ip = bytearray(l3[:40])
        ip[0] |= 0x0F           # traffic class (high nibble)
        ip[1:4] = b"\xff\xff\xff"  # traffic class (low nibble), flow label
        ip[7] = 0xFF            # hop limit
    udp = bytearray(l3[hl:hl + 8])
    udp[6:8] = b"\xff\xff"
    rest = bytearray(l3[hl + 8:len(l3) - 4])
    rest[4] = 0xFF              # FECN, BECN, resv6
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(rest))


def bswap32(v):
    return struct.unpack("<I", struct.pack(">I", v))[0]

# --------------------------------------------------------------------------
# IPv6 address text: compressed the way Python's ipaddress writes it
# (Python 3.11: lowercase hex, longest run of two or more zero groups
# becomes "::", the first such run on a tie, no dotted quad). Written out
# here so the expectation does not move with the interpreter version.


def ip6_text(a):
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

# --------------------------------------------------------------------------
# Random values.


class Gen:
    def __init__(self, rng, args):
        self.r = rng
        self.args = args

    def bits(self, n):
        return self.r.getrandbits(n)

    def edgy(self, n):
        """n-bit value, with extra weight on the edges."""
        x = self.r.random()
        if x < 0.06:
            return 0
        if x < 0.12:
            return (1 << n) - 1
        if x < 0.16:
            return 1 << (n - 1)
        if x < 0.20:
            return (1 << (n - 1)) - 1
        if x < 0.30:
            return self.r.randrange(0, 256)
        return self.bits(n)

    def flag(self, p=0.5):
        return 1 if self.r.random() < p else 0

    def ip4(self):
        return "%d.%d.%d.%d" % tuple(self.r.randrange(256) for _ in range(4))

    def ip6(self, mapped_ok=True):
        x = self.r.random()
        if x < 0.40:
            return self.bits(128)
        if x < 0.80:  # many zero groups, to exercise "::" placement
            a = 0
            for _ in range(8):
                a <<= 16
                y = self.r.random()
                if y < 0.45:
                    pass
                elif y < 0.7:
                    a |= self.r.randrange(1, 16)
                else:
                    a |= self.r.randrange(1, 0x10000)
            return a
        if x < 0.93:
            return (0xFD00 << 112) | self.bits(112)
        special = [0, 1, 1 << 112, (0xFE80 << 112) | 1,
                   (0x20010DB8 << 96) | 1,
                   int(ipaddress.IPv6Address("1:0:0:2:0:0:0:3")),
                   int(ipaddress.IPv6Address("0:0:1:0:0:1:0:0")),
                   int(ipaddress.IPv6Address("1:0:1:0:1:0:1:0")),
                   int(ipaddress.IPv6Address("1:2:3:4:5:6:7:0")),
                   # IPv4-compatible (first 96 bits zero): inet_ntop would
                   # write a dotted quad here, Python does not.
                   int(ipaddress.IPv6Address("::102:304")),
                   int(ipaddress.IPv6Address("::c0a8:101"))]
        if mapped_ok and self.args.mapped:
            # IPv4-mapped in a real IPv6 header.
            special.append((0xFFFF << 32) | self.bits(32))
        return self.r.choice(special)

    def payload_len(self):
        x = self.r.random()
        if x < 0.25:
            return self.r.randrange(0, 8)
        if x < 0.70:
            return self.r.randrange(0, 80)
        if x < 0.90:
            return self.r.randrange(0, 600)
        return self.r.choice([256, 512, 1024, 2048, 4096,
                              self.r.randrange(0, 4097)])

    def syndrome(self):
        kind = self.r.choice(["ACK", "ACK", "RNR_NAK", "NAK", "NAK",
                              "reserved"])
        if kind == "ACK":
            return self.r.choice([0x1F, 0x00, self.r.randrange(32)])
        if kind == "RNR_NAK":
            return 0x20 | self.r.randrange(32)
        if kind == "NAK":
            return 0x60 | (self.r.randrange(5) if self.r.random() < 0.8
                           else self.r.randrange(5, 32))
        syn = 0x40 | self.r.randrange(32)
        if self.args.aeth_bit7 and self.r.random() < 0.5:
            syn = 0x80 | self.r.randrange(128)
        return syn

    def hdr_values(self, h):
        if h == "rdeth":
            return {"een": self.edgy(24)}
        if h == "xrceth":
            return {"srqn": self.edgy(24)}
        if h == "deth":
            return {"qkey": self.r.choice([self.edgy(32), 0x80010000,
                                           0x11111111]),
                    "sqp": self.r.choice([self.edgy(24), 1])}
        if h == "reth":
            return {"va": self.edgy(64), "rkey": self.edgy(32),
                    "dma_len": self.r.choice([self.edgy(32),
                                              self.r.randrange(0, 1 << 20)])}
        if h == "atomiceth":
            return {"va": self.edgy(64) & ~7, "rkey": self.edgy(32),
                    "swap_add": self.edgy(64), "compare": self.edgy(64)}
        if h == "aeth":
            return {"syndrome": self.syndrome(), "msn": self.edgy(24)}
        if h == "atomicacketh":
            return {"orig": self.edgy(64)}
        if h == "immdt":
            return self.edgy(32)
        if h == "ieth":
            return {"rkey": self.edgy(32)}
        if h == "cnp":
            return bytes(16) if self.r.random() < 0.8 else \
                bytes(self.r.randrange(256) for _ in range(16))
        raise AssertionError(h)


def hdr_bytes(h, v):
    if h == "rdeth":
        return struct.pack(">I", v["een"])  # 8 reserved bits, then EEC
    if h == "deth":
        return struct.pack(">II", v["qkey"], v["sqp"])  # resv8 + SrcQP
    if h == "xrceth":
        return struct.pack(">I", v["srqn"])  # 8 reserved bits, XRC SRQ
    if h == "reth":
        return struct.pack(">QII", v["va"], v["rkey"], v["dma_len"])
    if h == "atomiceth":
        return struct.pack(">QIQQ", v["va"], v["rkey"], v["swap_add"],
                           v["compare"])
    if h == "aeth":
        return struct.pack(">I", (v["syndrome"] << 24) | v["msn"])
    if h == "atomicacketh":
        return struct.pack(">Q", v["orig"])
    if h == "immdt":
        return struct.pack(">I", v)
    if h == "ieth":
        return struct.pack(">I", v["rkey"])
    if h == "cnp":
        return v
    raise AssertionError(h)


def aeth_expect(v):
    syn = v["syndrome"]
    e = {"syndrome": syn, "msn": v["msn"]}
    top = syn >> 5
    low = syn & 0x1F
    if top == 0:
        e["kind"] = "ACK"
        e["credits"] = low
    elif top == 1:
        e["kind"] = "RNR_NAK"
        e["timer_code"] = low
        e["timer_ms"] = RNR_MS[low]
    elif top == 3:
        e["kind"] = "NAK"
        e["nak_code"] = low
        e["nak"] = NAK_NAMES[low] if low < 5 else "reserved-%d" % low
    else:
        e["kind"] = "reserved"
    return e

# --------------------------------------------------------------------------
# Packet specs: a dict that says everything about one frame; build() turns
# it into bytes with scapy, expect() into the record dump must print.

BTH_FIELDS = ["opcode", "se", "mig", "pad", "tver", "pkey", "fecn", "becn",
              "resv6", "dqpn", "ackreq", "resv7", "psn"]


def new_spec(g, opcode, ipver):
    r = g.r
    s = {"ipver": ipver, "vlan": None, "trailer": b"",
         "smac": "02:00:%02x:%02x:%02x:%02x" % tuple(
             r.randrange(256) for _ in range(4)),
         "dmac": "02:01:%02x:%02x:%02x:%02x" % tuple(
             r.randrange(256) for _ in range(4)),
         "sport": (0xC000 | g.bits(14)) if r.random() < 0.6
         else r.choice([r.randrange(65536), 53, 4791, 0, 65535]),
         "dport": ROCE_PORT,
         "tclass": g.bits(8) if r.random() < 0.6
         else r.choice([0, 0x02, 0x03, 0x68, 0x6A, 0x6B]),
         "ttl": r.choice([64, 255, 1, 0, r.randrange(256)]),
         "udp_chksum": None, "short": None, "malformed": None,
         "verdict": "ok", "mutation": None}
    if ipver == 4:
        s["src"], s["dst"] = g.ip4(), g.ip4()
        s["ip_id"] = g.bits(16)
        s["ip_flags"] = r.choice([0, 2, 2, 2])  # DF mostly
        s["ip_options"] = None
        if r.random() < 0.04:
            s["ip_options"] = r.choice(["ra", "nop4"])
        s["udp_chksum"] = 0 if r.random() < 0.5 else None
    else:
        s["src"], s["dst"] = g.ip6(), g.ip6()
        s["flow_label"] = r.choice([0, g.bits(20), g.bits(20), 0xFFFFF])
    if r.random() < args_global.vlan_share:
        s["vlan"] = (r.randrange(8), r.randrange(1, 4095))
    if r.random() < 0.05:
        s["trailer"] = bytes(r.randrange(1, 9))  # Ethernet padding / FCS
    s.update({"opcode": opcode, "se": g.flag(0.3), "mig": g.flag(0.3),
              "tver": 0,
              "pkey": 0xFFFF if r.random() < 0.5 else g.bits(16),
              "fecn": g.flag(0.2), "becn": g.flag(0.2),
              "resv6": 0 if r.random() < 0.8 else g.bits(6),
              "dqpn": g.edgy(24), "ackreq": g.flag(0.4),
              "resv7": 0 if r.random() < 0.85 else g.bits(7),
              "psn": r.choice([g.edgy(24), g.bits(24), 0xFFFFFF, 0])})
    name, hdrs, has_payload = OPS[opcode]
    s["hdrs"] = {h: g.hdr_values(h) for h in hdrs}
    n = g.payload_len() if has_payload else 0
    s["payload"] = bytes(r.randrange(256) for _ in range(n))
    s["pad"] = (-n) & 3
    s["padbytes"] = bytes(s["pad"])
    return s


def body_bytes(s):
    """Extension headers + payload + pad (everything between BTH and ICRC)."""
    b = b"".join(hdr_bytes(h, s["hdrs"][h])
                 for h in HDR_ORDER if h in s["hdrs"])
    return b + s["payload"] + s["padbytes"]


def l2l3_layers(s):
    if s["ipver"] == 4:
        opts = []
        if s.get("ip_options") == "ra":
            opts = [IPOption_Router_Alert()]
        elif s.get("ip_options") == "nop4":
            opts = [IPOption_NOP()] * 4
        ip = IP(src=s["src"], dst=s["dst"], tos=s["tclass"], ttl=s["ttl"],
                id=s["ip_id"], flags=s["ip_flags"], options=opts)
    else:
        ip = IPv6(src=str(ipaddress.IPv6Address(s["src"])),
                  dst=str(ipaddress.IPv6Address(s["dst"])), tc=s["tclass"],
                  fl=s["flow_label"], hlim=s["ttl"])
    return ip


def build_l3(s, icrc_value):
    """IP packet bytes (no L2). icrc_value None: let scapy compute it (IPv4)
    or compute it here (IPv6); else put this value (our convention: the
    little-endian word on the wire)."""
    ip = l2l3_layers(s)
    udp = UDP(sport=s["sport"], dport=s["dport"], chksum=s["udp_chksum"])
    if s["short"] is not None:
        return raw(ip / udp / Raw(s["short"]))
    scapy_icrc = None if icrc_value is None else bswap32(icrc_value)
    if icrc_value is None and s["ipver"] == 6:
        scapy_icrc = 0
    bth = BTH(opcode=s["opcode"], solicited=s["se"], migreq=s["mig"],
              padcount=s["pad"], version=s["tver"], pkey=s["pkey"],
              fecn=s["fecn"], becn=s["becn"], resv6=s["resv6"],
              dqpn=s["dqpn"], ackreq=s["ackreq"], resv7=s["resv7"],
              psn=s["psn"], icrc=scapy_icrc)
    body = body_bytes(s) if "body" not in s else s["body"]
    pkt = ip / udp / bth
    if body:
        pkt = pkt / Raw(body)
    b = raw(pkt)
    if icrc_value is None and s["ipver"] == 6:
        mine = icrc_of_l3(b)
        pkt[BTH].icrc = bswap32(mine)  # "/" copied the layers
        b = raw(pkt)
        assert struct.unpack("<I", b[-4:])[0] == mine
    return b


def wrap_l2(s, l3):
    if s["ipver"] == 4:
        et = 0x0800
    else:
        et = 0x86DD
    e = Ether(src=s["smac"], dst=s["dmac"])
    if s["vlan"]:
        e = e / Dot1Q(prio=s["vlan"][0], vlan=s["vlan"][1], type=et)
    else:
        e.type = et
    return raw(e) + l3 + s["trailer"]


def expect(s, l3):
    """The record `uroce dump --json` must print for this frame (without
    "frame" and "ts"), and the set of keys that must be absent."""
    if s["ipver"] == 6:
        for a in (s["src"], s["dst"]):
            if a >> 32 != 0xFFFF and \
                    ip6_text(a) != ipaddress.IPv6Address(a).compressed:
                raise AssertionError("ip6_text(%x) = %s, ipaddress says %s"
                                     % (a, ip6_text(a),
                                        ipaddress.IPv6Address(a).compressed))
    e = {"ip": s["ipver"],
         "src": s["src"] if s["ipver"] == 4 else ip6_text(s["src"]),
         "dst": s["dst"] if s["ipver"] == 4 else ip6_text(s["dst"]),
         "sport": s["sport"], "dport": s["dport"], "tclass": s["tclass"],
         "ecn": s["tclass"] & 3, "ttl": s["ttl"]}
    absent = set()
    if s["ipver"] == 4:
        e["ip_id"] = s["ip_id"]
        absent.add("flow_label")
    else:
        e["flow_label"] = s["flow_label"]
        absent.add("ip_id")
    udp_len = len(l3) - ((l3[0] & 15) * 4 if s["ipver"] == 4 else 40) - 8
    if s["short"] is None or len(s["short"]) >= 12:
        for f in BTH_FIELDS:
            e[f] = s[f]
        if s["opcode"] in OPS:
            e["opname"] = OPS[s["opcode"]][0]
    if udp_len >= 16:
        carried = struct.unpack("<I", l3[-4:])[0]
        computed = icrc_of_l3(l3)
        e["icrc"] = carried
        e["icrc_expected"] = computed
        e["icrc_ok"] = carried == computed
        want_ok = s["verdict"] == "ok"
        if e["icrc_ok"] != want_ok:  # our own construction went wrong
            raise AssertionError("frame spec %r: verdict %s but computed "
                                 "icrc_ok %s" % (s.get("mutation"),
                                                 s["verdict"], e["icrc_ok"]))
    else:
        absent |= {"icrc", "icrc_expected", "icrc_ok"}
    if s["malformed"]:
        e["malformed"] = True  # any reason string
        return e, absent
    absent.add("malformed")
    hdrs = s["hdrs"]
    for h in HDR_ORDER:
        if h == "cnp":
            continue
        if h not in hdrs:
            absent.add(h)
            continue
        v = hdrs[h]
        if h == "aeth":
            e[h] = aeth_expect(v)
        elif h == "deth":
            e[h] = {"qkey": v["qkey"], "sqp": v["sqp"]}
        else:
            e[h] = v
    e["payload_len"] = len(s["payload"])
    return e, absent

# --------------------------------------------------------------------------
# Malformed packets.


def make_malformed(g, kind, ipver):
    r = g.r
    if kind == "tver":
        s = new_spec(g, r.choice(sorted(OPS)), ipver)
        s["tver"] = r.randrange(1, 16)
    elif kind == "reserved_opcode":
        s = new_spec(g, 0x04, ipver)
        s["opcode"] = r.choice(RESERVED_OPCODES)
        s["hdrs"] = {}
        s["payload"] = bytes(r.randrange(256)
                             for _ in range(4 * r.randrange(0, 9)))
        s["pad"] = 0
        s["padbytes"] = b""
    elif kind == "short_nobth":
        s = new_spec(g, 0x04, ipver)
        s["short"] = bytes(r.randrange(256) for _ in range(r.randrange(12)))
    elif kind == "short_noicrc":
        s = new_spec(g, r.choice(sorted(OPS)), ipver)
        # A BTH and up to 3 more bytes: no room for the ICRC.
        tmp = BTH(opcode=s["opcode"], solicited=s["se"], migreq=s["mig"],
                  padcount=s["pad"], version=s["tver"], pkey=s["pkey"],
                  fecn=s["fecn"], becn=s["becn"], resv6=s["resv6"],
                  dqpn=s["dqpn"], ackreq=s["ackreq"], resv7=s["resv7"],
                  psn=s["psn"], icrc=0)
        s["short"] = raw(tmp)[:12] + bytes(r.randrange(4))
    elif kind == "cut_headers":
        code = r.choice([c for c in OPS if OPS[c][1]])
        s = new_spec(g, code, ipver)
        full = body_bytes(s)
        hlen = sum(HDR_LEN[h] for h in s["hdrs"])
        k = 4 * r.randrange(0, hlen // 4)   # whole words, fewer than needed
        s["body"] = full[:k]
        s["pad"] = 0
    elif kind == "pad_too_large":
        code = r.choice(sorted(OPS))
        s = new_spec(g, code, ipver)
        s["payload"] = b""
        s["padbytes"] = b""
        s["pad"] = r.randrange(1, 4)
    elif kind == "unaligned":
        code = r.choice([c for c in OPS if OPS[c][2]])
        s = new_spec(g, code, ipver)
        n = r.randrange(1, 200)
        if n % 4 == 0:
            n += r.randrange(1, 4)
        s["payload"] = bytes(r.randrange(256) for _ in range(n))
        s["pad"] = 0
        s["padbytes"] = b""
    elif kind == "extra_payload":
        code = r.choice([c for c in OPS if not OPS[c][2]])
        s = new_spec(g, code, ipver)
        s["payload"] = bytes(r.randrange(256)
                             for _ in range(4 * r.randrange(1, 5)))
        s["pad"] = 0
        s["padbytes"] = b""
    else:
        raise AssertionError(kind)
    s["malformed"] = kind
    return s


MALFORMED_KINDS = ["tver", "reserved_opcode", "short_nobth", "short_noicrc",
                   "cut_headers", "pad_too_large", "unaligned",
                   "extra_payload"]

# --------------------------------------------------------------------------
# Mutations applied after the ICRC was computed.


def mutate_covered(g, s):
    """Change one ICRC-covered thing in spec s (in place); returns a name."""
    r = g.r
    choices = ["psn", "dqpn", "pkey", "se", "mig", "ackreq", "resv7",
               "src", "dst", "sport"]
    if s["payload"]:
        choices += ["payload"] * 4
    if s["hdrs"]:
        choices += ["hdr"] * 3
    if s["pad"]:
        choices.append("padbyte")
    if s["ipver"] == 4:
        choices += ["ip_id", "ip_df"]
    what = r.choice(choices)
    if what in ("psn", "dqpn"):
        s[what] ^= 1 << r.randrange(24)
    elif what == "pkey":
        s[what] ^= 1 << r.randrange(16)
    elif what in ("se", "mig", "ackreq"):
        s[what] ^= 1
    elif what == "resv7":
        s[what] ^= 1 << r.randrange(7)
    elif what in ("src", "dst"):
        if s["ipver"] == 4:
            a = int(ipaddress.IPv4Address(s[what])) ^ (1 << r.randrange(32))
            s[what] = str(ipaddress.IPv4Address(a))
        else:
            s[what] ^= 1 << r.randrange(128)
    elif what == "sport":
        s[what] ^= 1 << r.randrange(16)
    elif what == "payload":
        p = bytearray(s["payload"])
        i = r.randrange(len(p))
        p[i] ^= 1 << r.randrange(8)
        s["payload"] = bytes(p)
    elif what == "padbyte":
        p = bytearray(s["padbytes"])
        p[r.randrange(len(p))] = r.randrange(1, 256)
        s["padbytes"] = bytes(p)
    elif what == "hdr":
        h = r.choice(sorted(s["hdrs"]))
        v = s["hdrs"][h]
        if h == "immdt":
            s["hdrs"][h] = v ^ (1 << r.randrange(32))
        elif h == "cnp":
            p = bytearray(v)
            p[r.randrange(16)] ^= 1 << r.randrange(8)
            s["hdrs"][h] = bytes(p)
        else:
            k = r.choice(sorted(v))
            width = {"een": 24, "srqn": 24, "qkey": 32, "sqp": 24, "va": 64, "rkey": 32,
                     "dma_len": 32, "swap_add": 64, "compare": 64,
                     "syndrome": 8, "msn": 24, "orig": 64}[k]
            if k == "syndrome" and not args_global.aeth_bit7:
                width = 7  # keep the reserved bit 7 clear
            v[k] ^= 1 << r.randrange(width)
        what = "hdr:" + h
    elif what == "ip_id":
        s["ip_id"] ^= 1 << r.randrange(16)
    elif what == "ip_df":
        s["ip_flags"] ^= 2
    return what


def mutate_masked(g, s):
    """Change ICRC-masked fields (in place); the ICRC must stay good."""
    r = g.r
    done = []
    choices = ["ttl", "tclass", "ecn", "udp_chksum", "fecn", "becn", "resv6"]
    if s["ipver"] == 6:
        choices += ["flow_label"] * 2
    for what in r.sample(choices, r.randrange(1, 4)):
        if what == "ttl":
            s["ttl"] = (s["ttl"] - 1) & 0xFF if r.random() < 0.7 \
                else r.randrange(256)
        elif what == "tclass":
            s["tclass"] = r.randrange(256)
        elif what == "ecn":
            s["tclass"] = (s["tclass"] & ~3) | 3  # CE marking
        elif what == "udp_chksum":
            s["udp_chksum"] = r.randrange(65536)
        elif what in ("fecn", "becn"):
            s[what] ^= 1
        elif what == "resv6":
            s["resv6"] = r.randrange(64)
        elif what == "flow_label":
            s["flow_label"] = r.randrange(1 << 20)
        done.append(what)
    return "+".join(done)

# --------------------------------------------------------------------------
# Non-RoCE frames.


def non_roce_frames(g):
    r = g.r
    m1, m2 = "02:aa:00:00:00:01", "02:aa:00:00:00:02"
    pl = Raw(bytes(r.randrange(256) for _ in range(24)))
    frames = [
        Ether(src=m1, dst=m2) / IP(src="10.1.0.1", dst="10.1.0.2") /
        UDP(sport=ROCE_PORT, dport=9999) / pl,      # RoCE port as source
        Ether(src=m1, dst=m2) / IP(src="10.1.0.1", dst="10.1.0.2") /
        UDP(sport=33000, dport=4792) / pl,
        Ether(src=m1, dst=m2) / IP(src="10.1.0.1", dst="10.1.0.2") /
        UDP(sport=33000, dport=53) / pl,
        Ether(src=m1, dst=m2) / IP(src="10.1.0.1", dst="10.1.0.2") /
        TCP(sport=33000, dport=ROCE_PORT) / pl,     # TCP to 4791
        Ether(src=m1, dst="ff:ff:ff:ff:ff:ff") / ARP(hwsrc=m1,
                                                     psrc="10.1.0.1",
                                                     pdst="10.1.0.2"),
        Ether(src=m1, dst=m2) / IP(src="10.1.0.1", dst="10.1.0.2") / ICMP(),
        Ether(src=m1, dst=m2) / IPv6(src="fd00::1", dst="fd00::2") /
        UDP(sport=ROCE_PORT, dport=4790) / pl,
        Ether(src=m1, dst=m2) / IPv6(src="fd00::1", dst="fd00::2") /
        ICMPv6EchoRequest(),
        # RoCE v1 (EtherType 0x8915, GRH + BTH): not UDP, so not RoCEv2.
        Ether(src=m1, dst=m2, type=0x8915) / GRH() /
        BTH(opcode=4, icrc=0) / Raw(b"abcd"),
        Ether(src=m1, dst="01:80:c2:00:00:0e", type=0x88CC) /
        Raw(bytes(46)),
    ]
    return [raw(f) for f in frames]

# --------------------------------------------------------------------------
# Running uroce and comparing.


def run_dump(uroce, path):
    try:
        cp = subprocess.run([uroce, "dump", "--json", path],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, None, "cannot run %s dump: %s" % (uroce, e)
    err = None
    if cp.returncode != 0:
        err = "uroce dump exited %d: %s" % (
            cp.returncode, cp.stderr.decode(errors="replace").strip()[:500])
    recs, summary = [], None
    for ln, line in enumerate(cp.stdout.decode(errors="replace")
                              .splitlines(), 1):
        if not line.strip():
            continue
        try:
            o = json.loads(line)
        except ValueError as e:
            return None, None, "line %d of dump output is not JSON (%s): %r" \
                % (ln, e, line[:200])
        if isinstance(o, dict) and "summary" in o and len(o) == 1:
            summary = o["summary"]
        else:
            recs.append(o)
    return recs, summary, err


def same(exp, got):
    if isinstance(exp, bool) or isinstance(got, bool):
        return isinstance(got, bool) and isinstance(exp, bool) and exp == got
    if isinstance(exp, float):
        return isinstance(got, (int, float)) and \
            abs(got - exp) <= 1e-9 * max(1.0, abs(exp))
    if isinstance(exp, int):
        return isinstance(got, int) and not isinstance(got, bool) and \
            got == exp
    return exp == got


def compare_record(exp, absent, got, out, tag):
    """Appends (field, expected, got) for every difference to out."""
    for k, v in exp.items():
        if k == "malformed":
            if not isinstance(got.get(k), str) or not got.get(k):
                out.append((tag + k, "a reason string", got.get(k, "<absent>")))
            continue
        if k not in got:
            out.append((tag + k, v, "<absent>"))
            continue
        if isinstance(v, dict):
            if not isinstance(got[k], dict):
                out.append((tag + k, v, got[k]))
                continue
            for kk, vv in v.items():
                if kk not in got[k]:
                    out.append((tag + k + "." + kk, vv, "<absent>"))
                elif not same(vv, got[k][kk]):
                    out.append((tag + k + "." + kk, vv, got[k][kk]))
            for kk in got[k]:
                if kk not in v:
                    out.append((tag + k + "." + kk, "<absent>", got[k][kk]))
        elif k in ("src", "dst"):
            # Addresses are compared as values: "::1.2.3.4" and "::102:304"
            # are the same IPv6 address, and RFC 5952 allows either text.
            try:
                ok = ipaddress.ip_address(v) == ipaddress.ip_address(got[k])
            except ValueError:
                ok = False
            if not ok:
                out.append((tag + k, v, got[k]))
        elif not same(v, got[k]):
            out.append((tag + k, v, got[k]))
    for k in absent:
        if k in got:
            out.append((tag + k, "<absent>", got[k]))


def fmt(v):
    if isinstance(v, int) and not isinstance(v, bool) and v > 9:
        return "%d (0x%x)" % (v, v)
    if isinstance(v, str) and v.startswith("<"):
        return v
    return json.dumps(v)


class Checker:
    def __init__(self):
        self.checks = 0          # packet records compared, all files
        self.failed_ids = set()  # packets (by number) with a mismatch
        self.other_failures = 0
        self.mismatches = []   # (where, frame, field, expected, got)
        self.hexdumps = {}     # (file, frame) -> hex
        self.total_mismatches = 0

    def add(self, where, frame, field, exp, got, frame_hex=None):
        self.total_mismatches += 1
        self.mismatches.append((where, frame, field, exp, got))
        if frame_hex is not None and len(self.hexdumps) < 4:
            self.hexdumps.setdefault((where, frame), frame_hex)


def check_file(chk, where, uroce, path, frames, meta, ids, summary_exp):
    """frames: list of frame bytes in file order; meta[i]: None for a
    non-RoCE frame, else (expected record, absent keys, ts); ids[i]: the
    packet's number (the same packet may be in several files)."""
    recs, summary, err = run_dump(uroce, path)
    if err:
        chk.add(where, "-", "dump", "exit 0 and JSON lines", err)
        chk.other_failures += 1
        if recs is None:
            chk.failed_ids |= set(x for x in ids if x is not None)
            return
    by_frame = {}
    for o in recs:
        fr = o.get("frame")
        if not isinstance(fr, int) or isinstance(fr, bool):
            chk.add(where, "?", "frame", "an integer", fr)
            chk.other_failures += 1
            continue
        if fr in by_frame:
            chk.add(where, fr, "frame", "reported once", "reported again")
            chk.other_failures += 1
            continue
        by_frame[fr] = o
    for i, m in enumerate(meta):
        fr = i + 1
        if m is None:
            if fr in by_frame:
                chk.add(where, fr, "frame", "<not printed: non-RoCE>",
                        "printed")
                chk.other_failures += 1
            continue
        chk.checks += 1
        exp, absent, ts = m
        got = by_frame.get(fr)
        diffs = []
        if got is None:
            diffs.append(("frame", "printed", "<missing>"))
        else:
            if not isinstance(got.get("ts"), (int, float)) or \
                    abs(got["ts"] - ts) > 1.5e-6:
                diffs.append(("ts", ts, got.get("ts", "<absent>")))
            compare_record(exp, absent, got, diffs, "")
        if diffs:
            chk.failed_ids.add(ids[i])
            for f, e, gv in diffs:
                chk.add(where, fr, f, e, gv, frames[i].hex())
    if summary is None:
        chk.add(where, "-", "summary", "a final summary line", "<missing>")
        chk.other_failures += 1
        return
    diffs = []
    for k in ("frames", "roce", "non_roce", "malformed", "bad_icrc"):
        if not same(summary_exp[k], summary.get(k)):
            diffs.append(("summary." + k, summary_exp[k],
                          summary.get(k, "<absent>")))
    bo = summary.get("by_opcode")
    if not isinstance(bo, dict):
        diffs.append(("summary.by_opcode", "an object", bo))
    else:
        exp_bo = summary_exp["by_opcode"]
        alt_bo = summary_exp["by_opcode_all"]
        if bo != exp_bo and bo != alt_bo:
            keys = sorted(set(bo) | set(exp_bo))
            for k in keys:
                if bo.get(k, 0) != exp_bo.get(k, 0):
                    diffs.append(("summary.by_opcode." + k, exp_bo.get(k, 0),
                                  bo.get(k, "<absent>")))
    for f, e, gv in diffs:
        chk.add(where, "summary", f, e, gv)
    if diffs:
        chk.other_failures += 1


def summary_expectation(meta, specs):
    n_frames = len(meta)
    roce = [i for i, m in enumerate(meta) if m is not None]
    malformed = sum(1 for i in roce if specs[i]["malformed"])
    bad = sum(1 for i in roce if meta[i][0].get("icrc_ok") is False)
    by_op, by_op_all = {}, {}
    for i in roce:
        s = specs[i]
        if s["short"] is not None and len(s["short"]) < 12:
            continue
        if s["opcode"] not in OPS:
            continue
        name = OPS[s["opcode"]][0]
        by_op_all[name] = by_op_all.get(name, 0) + 1
        if not s["malformed"]:
            by_op[name] = by_op.get(name, 0) + 1
    return {"frames": n_frames, "roce": len(roce),
            "non_roce": n_frames - len(roce), "malformed": malformed,
            "bad_icrc": bad, "by_opcode": by_op, "by_opcode_all": by_op_all}

# --------------------------------------------------------------------------


def l3_start(frame):
    off = 14
    et = struct.unpack(">H", frame[12:14])[0]
    if et == 0x8100:
        off = 18
    return off


def write_and_verify(path, frames, times, linktype, ng=False):
    """Writes frames (bytes) with the given µs timestamps; reads the file
    back to make sure it holds exactly those bytes and times."""
    if ng:
        from scapy.utils import RawPcapNgWriter
        w = RawPcapNgWriter(path)
        w.linktype = linktype
        w.write_header(frames[0])
        for b, us in zip(frames, times):
            w.write_packet(b, sec=decimal.Decimal(us) / 1000000)
        w.close()
        rd = RawPcapNgReader(path)
    else:
        w = PcapWriter(path, linktype=linktype, sync=False)
        w.write_header(frames[0])
        for b, us in zip(frames, times):
            w.write_packet(b, sec=us // 1000000, usec=us % 1000000)
        w.close()
        rd = RawPcapReader(path)
    back = list(rd)
    rd.close()
    if len(back) != len(frames):
        raise AssertionError("%s: wrote %d frames, read back %d"
                             % (path, len(frames), len(back)))
    for i, (b, _md) in enumerate(back):
        if b != frames[i]:
            raise AssertionError("%s frame %d: bytes differ on read-back"
                                 % (path, i + 1))


args_global = None


def main():
    global args_global
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uroce", required=True, help="path of the uroce binary")
    ap.add_argument("--count", type=int, default=2000,
                    help="minimum number of RoCE packets (default 2000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--vlan-share", type=float, default=0.03,
                    help="share of frames with an 802.1Q tag (default 0.03)")
    ap.add_argument("--no-mapped", dest="mapped", action="store_false",
                    help="no IPv4-mapped addresses (::ffff:a.b.c.d) in IPv6 "
                         "headers")
    ap.add_argument("--no-aeth-bit7", dest="aeth_bit7", action="store_false",
                    help="never draw AETH syndromes with the reserved bit 7 "
                         "set (by default some are; their kind is reserved, "
                         "as rxe reads the top three bits)")
    ap.add_argument("--no-linktypes", dest="linktypes", action="store_false",
                    help="skip the pcapng/raw/SLL/SLL2 files")
    ap.add_argument("--max-show", type=int, default=10)
    args = ap.parse_args()
    args_global = args
    t0 = time.time()
    if not os.access(args.uroce, os.X_OK):
        print("%s: uroce binary %s is not executable" % (PROG, args.uroce))
        return 2
    os.makedirs(args.workdir, exist_ok=True)

    bad_names = check_names_against_scapy()
    if bad_names:
        print("%s: opcode names differ from scapy's: %s"
              % (PROG, "; ".join(bad_names)))
        return 2

    rng = random.Random(args.seed)
    g = Gen(rng, args)
    n = max(args.count, 1)

    # Plan: every opcode twice (IPv4 and IPv6) first, then random ones.
    plan = []
    for code in sorted(OPS):
        plan.append(("ok", code, 4))
        plan.append(("ok", code, 6))
    for kind in MALFORMED_KINDS:
        plan.append(("malformed:" + kind, None, 4))
        plan.append(("malformed:" + kind, None, 6))
    common = [c for c in OPS if c < 0x40 or c > 0x55]  # RC, UC, UD, CNP
    rd = [c for c in OPS if 0x40 <= c <= 0x55]
    while len(plan) < n:
        ipver = 4 if rng.random() < 0.5 else 6
        x = rng.random()
        if x < 0.06:
            plan.append(("malformed:" + rng.choice(MALFORMED_KINDS), None,
                         ipver))
        else:
            code = rng.choice(rd) if rng.random() < 0.08 \
                else rng.choice(common)
            plan.append(("ok", code, ipver))
    # Deterministic shuffle, keeping the full-coverage part.
    rng.shuffle(plan)

    specs, l3s = [], []
    n_corrupt = n_masked = n_scapy_cross = 0
    for kind, code, ipver in plan:
        if kind == "ok":
            s = new_spec(g, code, ipver)
        else:
            s = make_malformed(g, kind.split(":", 1)[1], ipver)
        l3 = build_l3(s, None)
        if ipver == 4 and s["short"] is None:
            # scapy computed this ICRC; ours must agree.
            n_scapy_cross += 1
            mine = icrc_of_l3(l3)
            theirs = struct.unpack("<I", l3[-4:])[0]
            if mine != theirs:
                print("%s: SELF-CHECK FAILED: scapy ICRC 0x%08x, ours 0x%08x "
                      "for %s" % (PROG, theirs, mine, l3.hex()))
                return 1
        if not s["malformed"] and s["short"] is None:
            x = rng.random()
            if x < 0.10:
                n_corrupt += 1
                good = struct.unpack("<I", l3[-4:])[0]
                s2 = copy.deepcopy(s)
                if rng.random() < 0.3:
                    bad = good ^ (1 << rng.randrange(32))
                    s2["mutation"] = "icrc-bit"
                    l3 = build_l3(s2, bad)
                else:
                    s2["mutation"] = "covered:" + mutate_covered(g, s2)
                    l3 = build_l3(s2, good)
                s2["verdict"] = "bad"
                s = s2
            elif x < 0.22:
                n_masked += 1
                good = struct.unpack("<I", l3[-4:])[0]
                s2 = copy.deepcopy(s)
                s2["mutation"] = "masked:" + mutate_masked(g, s2)
                l3 = build_l3(s2, good)
                if icrc_of_l3(l3) != good:
                    print("%s: SELF-CHECK FAILED: masked change %s moved the "
                          "ICRC" % (PROG, s2["mutation"]))
                    return 1
                s = s2
        specs.append(s)
        l3s.append(l3)

    # Interleave non-RoCE frames.
    others = non_roce_frames(g)
    extra = max(len(others), n // 100)
    items = [("roce", i) for i in range(len(specs))]
    for j in range(extra):
        items.insert(rng.randrange(len(items) + 1), ("other",
                                                     j % len(others)))
    frames, meta, fspecs, times, pids = [], [], [], [], []
    us = 1700000000 * 1000000 + rng.randrange(10 ** 6)
    for typ, i in items:
        us += rng.randrange(1, 5000)
        times.append(us)
        if typ == "other":
            frames.append(others[i])
            meta.append(None)
            fspecs.append(None)
            pids.append(None)
            continue
        s = specs[i]
        fb = wrap_l2(s, l3s[i])
        exp, absent = expect(s, l3s[i])
        frames.append(fb)
        meta.append((exp, absent, us / 1e6))
        fspecs.append(s)
        pids.append(i)

    path = os.path.join(args.workdir, "scapy.pcap")
    # Written with scapy's wrpcap; each Ether() re-dissection keeps the
    # exact bytes (checked on read-back below).
    pkts = []
    for b, t in zip(frames, times):
        p = Ether(b)
        p.time = decimal.Decimal(t) / 1000000
        pkts.append(p)
    wrpcap(path, pkts)
    rd = RawPcapReader(path)
    back = list(rd)
    rd.close()
    for i, (b, md) in enumerate(back):
        t = md.sec * 1000000 + md.usec
        if b != frames[i] or t != times[i]:
            # Fall back to writing raw bytes (same scapy writer underneath).
            write_and_verify(path, frames, times, 1)
            break
    t_built = time.time() - t0

    chk = Checker()
    sm = summary_expectation(meta, fspecs)
    check_file(chk, "scapy.pcap", args.uroce, path, frames, meta, pids, sm)

    # The same packets in the other link types the dump reads.
    nlt = 0
    if args.linktypes:
        sub = [i for i, m in enumerate(meta) if m is not None][:300]
        sub_other = [i for i, m in enumerate(meta) if m is None][:2]
        idx = sorted(sub + sub_other)
        variants = [("scapy.pcapng", 1, True, "eth"),
                    ("scapy_raw.pcap", 101, False, "raw"),
                    ("scapy_sll.pcap", 113, False, "sll"),
                    ("scapy_sll2.pcap", 276, False, "sll2"),
                    ("scapy_ipv4.pcap", 228, False, "ipv4"),
                    ("scapy_ipv6.pcap", 229, False, "ipv6")]
        for fname, lt, ng, how in variants:
            fr2, meta2, sp2, tm2, id2 = [], [], [], [], []
            for i in idx:
                s = fspecs[i]
                if how == "eth":
                    b = frames[i]
                else:
                    if s is None:
                        if how in ("ipv4", "ipv6"):
                            continue
                        b0 = frames[i]
                        et = struct.unpack(">H", b0[12:14])[0]
                        l3 = b0[14:]
                    else:
                        if how == "ipv4" and s["ipver"] != 4:
                            continue
                        if how == "ipv6" and s["ipver"] != 6:
                            continue
                        et = 0x0800 if s["ipver"] == 4 else 0x86DD
                        l3 = frames[i][l3_start(frames[i]):]
                    if how in ("raw", "ipv4", "ipv6"):
                        b = l3
                    elif how == "sll":
                        b = raw(CookedLinux(pkttype=0, lladdrtype=1,
                                            lladdrlen=6,
                                            src=b"\x02\x00\x00\x00\x00\x07"
                                            b"\x00\x00", proto=et)) + l3
                    else:
                        b = raw(CookedLinuxV2(proto=et, ifindex=3,
                                              pkttype=0, lladdrtype=1,
                                              lladdrlen=6,
                                              src=b"\x02\x00\x00\x00\x00"
                                              b"\x07\x00\x00")) + l3
                fr2.append(b)
                meta2.append(meta[i])
                sp2.append(s)
                tm2.append(times[i])
                id2.append(pids[i])
            p2 = os.path.join(args.workdir, fname)
            write_and_verify(p2, fr2, tm2, lt, ng)
            sm2 = summary_expectation(meta2, sp2)
            check_file(chk, fname, args.uroce, p2, fr2, meta2, id2, sm2)
            nlt += 1

    elapsed = time.time() - t0
    n_mal = sum(1 for s in specs if s["malformed"])
    n_v6 = sum(1 for s in specs if s["ipver"] == 6)
    print("%s: %d RoCE packets (%d IPv6, %d malformed, %d ICRC broken, "
          "%d masked fields changed) + %d non-RoCE frames in %s; "
          "%d ICRCs cross-checked with scapy; %d other link-type files; "
          "built in %.1f s, total %.1f s"
          % (PROG, len(specs), n_v6, n_mal, n_corrupt, n_masked,
             extra, path, n_scapy_cross, nlt, t_built, elapsed))
    if chk.mismatches:
        print("%s: %d mismatches; the first %d:"
              % (PROG, chk.total_mismatches,
                 min(args.max_show, len(chk.mismatches))))
        for where, fr, field, e, gv in chk.mismatches[:args.max_show]:
            print("  %s frame %s: %s: expected %s, uroce says %s"
                  % (where, fr, field, fmt(e), fmt(gv)))
        for (where, fr), hx in list(chk.hexdumps.items())[:3]:
            print("  %s frame %s bytes: %s%s" % (where, fr, hx[:400],
                                                 "..." if len(hx) > 400
                                                 else ""))
    failed = len(chk.failed_ids) + chk.other_failures
    print("%s: %d packets (%d records compared over %d files), %d mismatches"
          % (PROG, len(specs), chk.checks, 1 + nlt, chk.total_mismatches))
    print("%d passed, %d failed" % (len(specs) - len(chk.failed_ids), failed))
    return 0 if failed == 0 and chk.total_mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
