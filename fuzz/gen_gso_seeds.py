#!/usr/bin/python3
"""Writes fuzz/corpus/inspect seeds holding UDP GSO super-frames (several
RoCEv2 packets under one IP/UDP header, each packet's ICRC computed over
the headers it would have had alone: its own lengths, identification
base + i), so that the fuzzer starts inside the GSO splitter. The ICRC is
computed here independently of uroce (zlib's CRC-32 over the masked
headers). With --pcap FILE it also writes the frames as a pcap, which
`uroce dump --strict` must read with every ICRC exact.

Seed format (fuzz/fuzz_inspect.c): one selector byte (bits 0-1 link type,
0 = Ethernet; bits 2-5 the inspector mode), then the frame."""
import argparse
import hashlib
import os
import struct
import zlib


def icrc(ip, udp, body):
    """body: BTH .. payload .. pad (no ICRC)."""
    ip = bytearray(ip)
    udp = bytearray(udp)
    b = bytearray(body)
    if ip[0] >> 4 == 4:
        ip[1] = 0xFF
        ip[8] = 0xFF
        ip[10] = ip[11] = 0xFF
    else:
        ip[0] |= 0x0F
        ip[1] = ip[2] = ip[3] = 0xFF
        ip[7] = 0xFF
    udp[6] = udp[7] = 0xFF
    b[4] = 0xFF
    return zlib.crc32(b"\xff" * 8 + bytes(ip) + bytes(udp) + bytes(b))


def hdrs(ipver, ulen, ip_id):
    udp = struct.pack(">HHHH", 0xC001, 4791, ulen, 0)
    if ipver == 4:
        ip = struct.pack(">BBHHHBBH4s4s", 0x45, 2, 20 + ulen, ip_id, 0x4000,
                         64, 17, 0, bytes([10, 0, 0, 1]),
                         bytes([10, 0, 0, 2]))
    else:
        ip = struct.pack(">IHBB16s16s", 0x60000000, ulen, 17, 64,
                         bytes(15) + b"\x01", bytes(15) + b"\x02")
    return ip, udp


def bth(opcode, qpn, psn, pad=0):
    return struct.pack(">BBHII", opcode, pad << 4, 0xFFFF, qpn, psn)


def super_frame(ipver, bodies, base_id=0):
    """Ethernet frame of one datagram holding every body with its ICRC."""
    pkts = b""
    for i, body in enumerate(bodies):
        ip, udp = hdrs(ipver, 8 + len(body) + 4, (base_id + i) & 0xFFFF)
        pkts += body + struct.pack("<I", icrc(ip, udp, body))
    ip, udp = hdrs(ipver, 8 + len(pkts), base_id)
    eth = b"\x02" * 6 + b"\x04" * 6 + (b"\x08\x00" if ipver == 4
                                       else b"\x86\xdd")
    return eth + ip + udp + pkts


def frames():
    out = []
    # ACKs (RC_ACKNOWLEDGE, AETH): the smallest packets, 20 bytes each.
    acks = [bth(0x11, 0x33, 50 + i) + struct.pack(">I", (0x1F << 24) | i)
            for i in range(8)]
    out.append(super_frame(4, acks, 0xFFFD))
    # WRITE MIDDLEs of 256 bytes and a shorter LAST, IPv6.
    mid = [bth(0x07, 0x11, 100 + i) + bytes(range(256)) for i in range(3)]
    out.append(super_frame(6, mid + [bth(0x08, 0x11, 103) + bytes(64)]))
    # A FIRST with its RETH, then one MIDDLE (shorter: ends the send).
    reth = struct.pack(">QII", 0x7F0000001000, 0x1234, 512)
    out.append(super_frame(4, [bth(0x06, 0x22, 7) + reth + bytes(256),
                               bth(0x07, 0x22, 8) + bytes(256)]))
    # SEND_ONLYs of 13 bytes (pad 3) to three QPs.
    out.append(super_frame(4, [bth(0x04, 0x40 + i % 3, 9 + i, 3) +
                               bytes(16) for i in range(5)], 7))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "inspect"))
    ap.add_argument("--pcap", help="also write the frames as a pcap")
    a = ap.parse_args()
    fr = frames()
    for i, f in enumerate(fr):
        for sel in (0x00, 0x0C | 0x80, 0x24):  # modes: text, conv+json, filter
            seed = bytes([sel]) + f
            name = hashlib.sha1(seed).hexdigest()[:16]
            with open(os.path.join(a.corpus, name), "wb") as o:
                o.write(seed)
    if a.pcap:
        with open(a.pcap, "wb") as o:
            o.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144,
                                1))
            for i, f in enumerate(fr):
                o.write(struct.pack("<IIII", 1700000000 + i, 0, len(f),
                                    len(f)))
                o.write(f)


if __name__ == "__main__":
    main()
