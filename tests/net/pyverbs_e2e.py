#!/usr/bin/python3
"""What rdma-core's own test suite checks of a device, checked here with
Debian's python3-pyverbs against uroce's drop-in (run under `uroce run`
by the launcher below, in a network namespace of the test's own), so CI
covers it without the suite: GIDs 0 and 1 the endpoint's address and
RoCE v2 through every query, a UD datagram's completion (GRH flag,
src_qp, network header type in sl as mlx5 reports it) and GRH, CQ
comp_vector bounds, CQ resize both ways, a context's cmd_fd, QP create
flags, memory windows (type 1 and 2, bind, invalidate), device memory
(zero-based regions over it) and XRC (domains by file, XRC SRQs, target
and initiator QPs, both post APIs, a foreign SRQ number NAKed).

  tests/net/pyverbs_e2e.py --uroce build/uroce
Exits 77 (skip) without pyverbs.
"""
import argparse
import errno
import os
import subprocess
import sys
import unittest


class Drop(unittest.TestCase):
    """Runs inside `uroce run`, where libibverbs is the drop-in."""

    @classmethod
    def setUpClass(cls):
        import pyverbs.device as d
        cls.d = d
        cls.ctx = d.Context(name="uroce0")
        cls.addr = os.environ["UROCE_ADDR"]

    def gid_bytes(self):
        import ipaddress
        return ipaddress.IPv6Address("::ffff:" + self.addr).packed

    def test_gids_0_and_1_are_the_address(self):
        import pyverbs.enums as e
        want = self.gid_bytes()
        port = self.ctx.query_port(1)
        self.assertGreaterEqual(port.gid_tbl_len, 2)
        self.assertEqual(bytes(16), bytes.fromhex(
            self.ctx.query_gid(1, 2).gid.replace(":", "")))  # empty
        for i in (0, 1):
            g = self.ctx.query_gid(1, i)
            self.assertEqual(bytes.fromhex(g.gid.replace(":", "")), want)
            self.assertEqual(self.ctx.query_gid_type(1, i),
                             e.IBV_GID_TYPE_SYSFS_ROCE_V2)
            x = self.ctx.query_gid_ex(port_num=1, gid_index=i)
            self.assertEqual(x.gid_type, e.IBV_GID_TYPE_ROCE_V2)
            self.assertEqual(x.gid_index, i)
        table = self.ctx.query_gid_table(2)
        self.assertEqual(sorted(t.gid_index for t in table), [0, 1])

    def test_comp_vector_bounds(self):
        from pyverbs.cq import CQ
        from pyverbs.pyverbs_error import PyverbsRDMAError
        n = self.ctx.num_comp_vectors
        self.assertGreaterEqual(n, 1)
        CQ(self.ctx, 10, None, None, n - 1).close()
        with self.assertRaises(PyverbsRDMAError) as ex:
            CQ(self.ctx, 10, None, None, n)
        self.assertEqual(ex.exception.error_code, errno.EINVAL)

    def test_cmd_fd_is_open(self):
        fd = self.ctx.cmd_fd
        self.assertGreaterEqual(fd, 0)
        os.fstat(fd)  # raises if not open
        # the device node `uroce run` made, a character device
        self.assertEqual(os.readlink("/proc/self/fd/%d" % fd),
                         "/dev/infiniband/uverbs0")
        import stat
        self.assertTrue(stat.S_ISCHR(os.fstat(fd).st_mode))

    def traffic_pair(self, cq_depth=64):
        """Two UD QPs on one PD, RTS."""
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.pd import PD
        from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
        pd = PD(self.ctx)
        cq = CQ(self.ctx, cq_depth)
        qps = []
        for _ in range(2):
            init = QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                              cap=QPCap(max_send_wr=32, max_recv_wr=32))
            qp = QP(pd, init)
            a = QPAttr(qp_state=e.IBV_QPS_INIT)
            a.qkey = 0x1234
            a.pkey_index = 0
            a.port_num = 1
            qp.to_init(a)
            a = QPAttr(qp_state=e.IBV_QPS_RTR)
            qp.to_rtr(a)
            a = QPAttr(qp_state=e.IBV_QPS_RTS)
            a.sq_psn = 0
            qp.to_rts(a)
            qps.append(qp)
        return pd, cq, qps

    def poll(self, cq, n):
        import time
        got, end = [], time.time() + 10
        while len(got) < n and time.time() < end:
            k, wcs = cq.poll(n - len(got))
            got += wcs[:k] if k > 0 else []
        self.assertEqual(len(got), n, "completions")
        return got

    def test_ud_completion_as_mlx5_reports_it(self):
        import pyverbs.enums as e
        from pyverbs.addr import AH, AHAttr, GlobalRoute
        from pyverbs.mr import MR
        from pyverbs.wr import SGE, RecvWR, SendWR
        pd, cq, (a, b) = self.traffic_pair()
        size = 256
        rmr = MR(pd, 40 + size, e.IBV_ACCESS_LOCAL_WRITE)
        smr = MR(pd, size, e.IBV_ACCESS_LOCAL_WRITE)
        smr.write(bytes(range(256)), size)
        b.post_recv(RecvWR(wr_id=7, num_sge=1,
                           sg=[SGE(rmr.buf, 40 + size, rmr.lkey)]))
        for sgid in (0, 1):
            gr = GlobalRoute(dgid=self.ctx.query_gid(1, sgid),
                             sgid_index=sgid)
            ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
            if sgid:
                b.post_recv(RecvWR(wr_id=7, num_sge=1,
                                   sg=[SGE(rmr.buf, 40 + size, rmr.lkey)]))
            wr = SendWR(wr_id=1, num_sge=1, sg=[SGE(smr.buf, size, smr.lkey)])
            wr.set_wr_ud(ah, b.qp_num, 0x1234)
            a.post_send(wr)
            wcs = self.poll(cq, 2)
            recv = [w for w in wcs if w.opcode == e.IBV_WC_RECV]
            self.assertEqual(len(recv), 1)
            w = recv[0]
            self.assertEqual(w.status, e.IBV_WC_SUCCESS)
            self.assertEqual(w.byte_len, 40 + size)
            self.assertEqual(w.src_qp, a.qp_num)
            self.assertTrue(w.wc_flags & e.IBV_WC_GRH)
            self.assertEqual(w.sl, 2)  # IPv4: mlx5's L3 header type
            data = rmr.read(40 + size, 0)
            ip = data[20:40]  # the IPv4 header in the GRH's last 20 bytes
            self.assertEqual(ip[0], 0x45)
            self.assertEqual(ip[12:16], self.gid_bytes()[12:])
            self.assertEqual(ip[16:20], self.gid_bytes()[12:])
            self.assertEqual(data[40:], bytes(range(256)))

    def test_cq_resize_both_ways(self):
        import pyverbs.enums as e
        from pyverbs.addr import AH, AHAttr, GlobalRoute
        from pyverbs.mr import MR
        from pyverbs.pyverbs_error import PyverbsRDMAError
        from pyverbs.wr import SGE, SendWR
        pd, cq, (a, b) = self.traffic_pair(cq_depth=3)
        cq.resize(1)
        self.assertGreaterEqual(cq.cqe, 1)
        cq.resize(20)
        self.assertGreaterEqual(cq.cqe, 20)
        smr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        gr = GlobalRoute(dgid=self.ctx.query_gid(1, 1), sgid_index=1)
        ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
        for i in range(6):  # to a QP with no receive posted: dropped
            wr = SendWR(wr_id=i, num_sge=1, sg=[SGE(smr.buf, 64, smr.lkey)])
            wr.set_wr_ud(ah, b.qp_num, 0x1234)
            a.post_send(wr)
        with self.assertRaises(PyverbsRDMAError) as ex:
            cq.resize(2)  # 6 completions wait
        self.assertEqual(ex.exception.error_code, errno.EINVAL)
        wcs = self.poll(cq, 6)  # none lost across the resizes
        self.assertEqual(sorted(w.wr_id for w in wcs), list(range(6)))
        cq.resize(2)

    def test_odp_caps_and_registration(self):
        import pyverbs.enums as e
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        caps = self.ctx.query_device_ex().odp_caps
        self.assertTrue(caps.general_caps & e.IBV_ODP_SUPPORT)
        self.assertFalse(caps.general_caps & e.IBV_ODP_SUPPORT_IMPLICIT)
        want = e.IBV_ODP_SUPPORT_SEND | e.IBV_ODP_SUPPORT_RECV | \
            e.IBV_ODP_SUPPORT_WRITE | e.IBV_ODP_SUPPORT_READ
        self.assertEqual(caps.rc_odp_caps & want, want)
        pd = PD(self.ctx)
        MR(pd, 4096, e.IBV_ACCESS_ON_DEMAND | e.IBV_ACCESS_LOCAL_WRITE).close()

    def test_rereg_keeps_keys_and_checks_access(self):
        import pyverbs.enums as e
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsRDMAError
        pd, pd2 = PD(self.ctx), PD(self.ctx)
        mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
        keys = (mr.lkey, mr.rkey)
        mr.rereg(flags=e.IBV_REREG_MR_CHANGE_ACCESS, pd=None, addr=0,
                 length=0, access=e.IBV_ACCESS_LOCAL_WRITE |
                 e.IBV_ACCESS_REMOTE_WRITE)
        mr.rereg(flags=e.IBV_REREG_MR_CHANGE_PD, pd=pd2, addr=0, length=0,
                 access=0)
        self.assertEqual((mr.lkey, mr.rkey), keys)
        with self.assertRaises(PyverbsRDMAError):  # remote write, no local
            mr.rereg(flags=e.IBV_REREG_MR_CHANGE_ACCESS, pd=None, addr=0,
                     length=0, access=e.IBV_ACCESS_REMOTE_WRITE)
        mr.rereg(flags=e.IBV_REREG_MR_CHANGE_PD, pd=pd, addr=0, length=0,
                 access=0)
        mr.close()

    def test_reset_cleans_the_qps_completions(self):
        import pyverbs.enums as e
        from pyverbs.addr import AH, AHAttr, GlobalRoute
        from pyverbs.mr import MR
        from pyverbs.qp import QPAttr
        from pyverbs.wr import SGE, SendWR
        import time
        pd, cq, (a, b) = self.traffic_pair()
        smr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        gr = GlobalRoute(dgid=self.ctx.query_gid(1, 1), sgid_index=1)
        ah = AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))
        for qp, n in ((a, 3), (b, 2)):
            for i in range(n):
                wr = SendWR(wr_id=qp.qp_num, num_sge=1,
                            sg=[SGE(smr.buf, 64, smr.lkey)])
                wr.set_wr_ud(ah, 0x99, 0x1234)
                qp.post_send(wr)
        time.sleep(0.2)  # all five sent and completed
        a.modify(QPAttr(qp_state=e.IBV_QPS_RESET), e.IBV_QP_STATE)
        wcs = self.poll(cq, 2)
        self.assertEqual({w.qp_num for w in wcs}, {b.qp_num})
        self.assertEqual(cq.poll(1)[0], 0)

    def test_parent_domain(self):
        import pyverbs.enums as e
        from pyverbs.cq import CqInitAttrEx, CQEX
        from pyverbs.pd import PD, ParentDomain, ParentDomainInitAttr
        from pyverbs.qp import QP, QPCap, QPInitAttr
        pd = PD(self.ctx)
        parent = ParentDomain(self.ctx, attr=ParentDomainInitAttr(pd=pd))
        cq = CQEX(self.ctx, CqInitAttrEx(
            cqe=16, wc_flags=0, comp_mask=e.IBV_CQ_INIT_ATTR_MASK_PD,
            parent_domain=parent))
        qp = QP(parent, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                   cap=QPCap()))
        qp.close()
        cq.close()
        parent.close()
        pd.close()

    def test_create_flags(self):
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsRDMAError
        from pyverbs.qp import QP, QPCap, QPInitAttrEx
        pd = PD(self.ctx)
        cq = CQ(self.ctx, 8)
        mask = e.IBV_QP_INIT_ATTR_PD | e.IBV_QP_INIT_ATTR_CREATE_FLAGS
        QP(self.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                  pd=pd, cap=QPCap(), comp_mask=mask,
                                  create_flags=0)).close()
        with self.assertRaises(PyverbsRDMAError) as ex:
            QP(self.ctx, QPInitAttrEx(
                qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, pd=pd, cap=QPCap(),
                comp_mask=mask,
                create_flags=e.IBV_QP_CREATE_SCATTER_FCS))
        self.assertEqual(ex.exception.error_code, errno.EOPNOTSUPP)

    def rc_pair(self, pd, cq, access):
        """Two RC QPs of pd, each connected to the other, RTS."""
        import pyverbs.enums as e
        from pyverbs.qp import QP, QPCap, QPInitAttr
        qps = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                                 cap=QPCap(max_send_wr=16, max_recv_wr=16)))
               for _ in range(2)]
        self.to_rts(qps[0], qps[1], access)
        self.to_rts(qps[1], qps[0], access)
        return qps

    def to_rts(self, qp, peer, access):
        """qp to RTS, connected to peer on this device."""
        import pyverbs.enums as e
        from pyverbs.addr import AHAttr, GlobalRoute
        from pyverbs.qp import QPAttr
        a = QPAttr(qp_state=e.IBV_QPS_INIT)
        a.qp_access_flags = access
        a.port_num = 1
        a.pkey_index = 0
        gr = GlobalRoute(dgid=self.ctx.query_gid(1, 1), sgid_index=1)
        a.ah_attr = AHAttr(gr=gr, is_global=1, port_num=1)
        a.dest_qp_num = peer.qp_num
        a.path_mtu = e.IBV_MTU_1024
        a.rq_psn = a.sq_psn = 0
        a.max_dest_rd_atomic = a.max_rd_atomic = 1
        a.min_rnr_timer = 1
        a.timeout, a.retry_cnt, a.rnr_retry = 14, 7, 7
        qp.to_rts(a)

    def post_one(self, qp, cq, wr):
        qp.post_send(wr)
        return self.poll(cq, 1)[0]

    def test_memory_windows(self):
        """Type 2 bound by a work request, type 1 by ibv_bind_mw: an RDMA
        WRITE through either lands inside its window; invalidated (type
        2) or unbound (type 1), its key opens nothing; a third type is
        refused; a bound region cannot be deregistered."""
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.mr import MR, MW, MWBind, MWBindInfo
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsRDMAError
        from pyverbs.wr import SGE, SendWR
        pd, cq = PD(self.ctx), CQ(self.ctx, 32)
        rw = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE
        target = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_MW_BIND)
        src = MR(pd, 8192, e.IBV_ACCESS_LOCAL_WRITE)
        src.write(b"w" * 8192, 8192)
        for mw_type in (e.IBV_MW_TYPE_2, e.IBV_MW_TYPE_1):
            a, b = self.rc_pair(pd, cq, rw)
            mw = MW(pd, mw_type)
            info = MWBindInfo(target, target.buf + 4096, 1024, rw)
            if mw_type == e.IBV_MW_TYPE_2:
                wr = SendWR(opcode=e.IBV_WR_BIND_MW)
                wr.set_bind_wr(mw, info)
                rkey = wr.rkey
                w = self.post_one(b, cq, wr)
            else:
                b.bind_mw(mw, MWBind(info, e.IBV_SEND_SIGNALED))
                rkey = mw.rkey
                w = self.poll(cq, 1)[0]
            self.assertEqual((w.status, w.opcode),
                             (e.IBV_WC_SUCCESS, e.IBV_WC_BIND_MW))
            with self.assertRaises(PyverbsRDMAError) as ex:
                target.close()
            self.assertEqual(ex.exception.error_code, errno.EBUSY)
            wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                        sg=[SGE(src.buf, 1024, src.lkey)])
            wr.set_wr_rdma(rkey, target.buf + 4096)
            self.assertEqual(self.post_one(a, cq, wr).status,
                             e.IBV_WC_SUCCESS)
            self.assertEqual(target.read(1024, 4096), b"w" * 1024)
            self.assertEqual(target.read(4, 4092), bytes(4))  # not before
            if mw_type == e.IBV_MW_TYPE_2:
                inv = SendWR(opcode=e.IBV_WR_LOCAL_INV)
                inv.imm_data = rkey  # invalidate_rkey shares the union
                w = self.post_one(b, cq, inv)
                self.assertEqual(w.opcode, e.IBV_WC_LOCAL_INV)
            else:
                b.bind_mw(mw, MWBind(MWBindInfo(target, target.buf, 0, 0),
                                     e.IBV_SEND_SIGNALED))
                w = self.poll(cq, 1)[0]
            self.assertEqual(w.status, e.IBV_WC_SUCCESS)
            wr.set_wr_rdma(rkey, target.buf + 4096)
            self.assertEqual(self.post_one(a, cq, wr).status,
                             e.IBV_WC_REM_ACCESS_ERR)
            for qp in (a, b):
                qp.close()
            mw.close()
        with self.assertRaises(PyverbsRDMAError):
            MW(pd, 3)

    def test_device_memory(self):
        """Device memory (host memory here): allocated within max_dm_size,
        copied in and out in aligned words only, a zero-based region over
        part of it that a WRITE from a peer fills at offset 0, and a region
        larger than it refused."""
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.mr import DMMR, MR
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsRDMAError
        from pyverbs.wr import SGE, SendWR
        d = self.d
        top = self.ctx.query_device_ex().max_dm_size
        self.assertGreater(top, 0)
        with self.assertRaises(PyverbsRDMAError):
            d.DM(self.ctx, d.AllocDmAttr(length=top + 1))
        dm = d.DM(self.ctx, d.AllocDmAttr(length=4096))
        dm.copy_to_dm(8, b"abcdefgh", 8)
        self.assertEqual(dm.copy_from_dm(8, 8), b"abcdefgh")
        for off, n in ((3, 4), (4, 3), (4096, 4), (0, 4100)):
            with self.assertRaises(PyverbsRDMAError):
                dm.copy_to_dm(off, b"x" * n, n)
            with self.assertRaises(PyverbsRDMAError):
                dm.copy_from_dm(off, n)
        pd, cq = PD(self.ctx), CQ(self.ctx, 8)
        zb = (e.IBV_ACCESS_ZERO_BASED | e.IBV_ACCESS_LOCAL_WRITE |
              e.IBV_ACCESS_REMOTE_WRITE)
        with self.assertRaises(PyverbsRDMAError):
            DMMR(pd, 4100, zb, dm, 0)
        dmmr = DMMR(pd, 2048, zb, dm, 1024)  # bytes 1024.. of dm at 0..
        a, b = self.rc_pair(pd, cq, e.IBV_ACCESS_LOCAL_WRITE |
                            e.IBV_ACCESS_REMOTE_WRITE)
        src = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
        src.write(b"z" * 64, 64)
        wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                    sg=[SGE(src.buf, 64, src.lkey)])
        wr.set_wr_rdma(dmmr.rkey, 16)
        self.assertEqual(self.post_one(a, cq, wr).status, e.IBV_WC_SUCCESS)
        self.assertEqual(dm.copy_from_dm(1024 + 16, 64), b"z" * 64)
        self.assertEqual(dm.copy_from_dm(1024 + 12, 4), bytes(4))
        wr.set_wr_rdma(dmmr.rkey, 2048 - 32)  # past its end
        self.assertEqual(self.post_one(a, cq, wr).status,
                         e.IBV_WC_REM_ACCESS_ERR)
        for qp in (a, b):
            qp.close()
        dm.close()  # (pyverbs deregisters its regions first)

    def xrc_end(self, pd, cq, xrcd, tgt_access):
        """An XRC initiator (send ops: the ibv_wr_* API) and a target QP
        of xrcd, connected to each other, RTS."""
        import pyverbs.enums as e
        from pyverbs.qp import QP, QPCap, QPInitAttrEx, QPEx
        tgt = QP(self.ctx, QPInitAttrEx(qp_type=e.IBV_QPT_XRC_RECV,
                                        comp_mask=e.IBV_QP_INIT_ATTR_XRCD,
                                        xrcd=xrcd))
        ini = QPEx(self.ctx, QPInitAttrEx(
            qp_type=e.IBV_QPT_XRC_SEND, pd=pd, scq=cq, sq_sig_all=1,
            cap=QPCap(max_send_wr=16, max_recv_wr=0, max_recv_sge=0),
            send_ops_flags=e.IBV_QP_EX_WITH_SEND,
            comp_mask=e.IBV_QP_INIT_ATTR_PD |
            e.IBV_QP_INIT_ATTR_SEND_OPS_FLAGS))
        self.to_rts(tgt, ini, tgt_access)
        self.to_rts(ini, tgt, 0)
        return ini, tgt

    def test_xrc(self):
        """XRC: domains by file (O_CREAT, O_EXCL, shared by inode), two
        XRC SRQs behind one target QP, each SEND landing in the SRQ its
        work request names (the legacy and the ibv_wr_* API), completions
        on the SRQ's CQ with the target QP's number; an SRQ of another
        domain NAKed. (pyverbs closes an object's dependants before it,
        so EBUSY for objects in use is tested in the engine's tests.)"""
        import tempfile
        import pyverbs.enums as e
        from pyverbs.cq import CQ
        from pyverbs.mr import MR
        from pyverbs.pd import PD
        from pyverbs.pyverbs_error import PyverbsRDMAError
        from pyverbs.srq import SRQ, SrqInitAttrEx
        from pyverbs.wr import RecvWR, SendWR, SGE
        from pyverbs.xrcd import XRCD, XRCDInitAttr
        self.assertTrue(self.ctx.query_device().device_cap_flags &
                        e.IBV_DEVICE_XRC)
        mask = e.IBV_XRCD_INIT_ATTR_FD | e.IBV_XRCD_INIT_ATTR_OFLAGS
        tmp = tempfile.NamedTemporaryFile()
        fd = os.open(tmp.name, os.O_RDONLY)
        for oflags in (0, os.O_EXCL):  # no domain yet: O_CREAT needed
            with self.assertRaises(PyverbsRDMAError) as ex:
                XRCD(self.ctx, XRCDInitAttr(mask, oflags, fd))
            self.assertEqual(ex.exception.error_code, errno.EINVAL)
        xrcd = XRCD(self.ctx, XRCDInitAttr(mask, os.O_CREAT, fd))
        with self.assertRaises(PyverbsRDMAError) as ex:  # exists now
            XRCD(self.ctx, XRCDInitAttr(mask, os.O_CREAT | os.O_EXCL, fd))
        self.assertEqual(ex.exception.error_code, errno.EINVAL)
        again = XRCD(self.ctx, XRCDInitAttr(mask, 0, fd))  # the same one
        other = XRCD(self.ctx, XRCDInitAttr(mask, os.O_CREAT, -1))
        pd, cq, scq = PD(self.ctx), CQ(self.ctx, 64), CQ(self.ctx, 64)
        size = 3000
        mr = MR(pd, 4 * size, e.IBV_ACCESS_LOCAL_WRITE)

        def srq(d):
            a = SrqInitAttrEx(max_wr=8)
            a.srq_type = e.IBV_SRQT_XRC
            a.pd, a.xrcd, a.cq = pd, d, cq
            a.comp_mask = e.IBV_SRQ_INIT_ATTR_TYPE | e.IBV_SRQ_INIT_ATTR_PD | \
                e.IBV_SRQ_INIT_ATTR_CQ | e.IBV_SRQ_INIT_ATTR_XRCD
            return SRQ(self.ctx, a)
        s1, s2, s3 = srq(xrcd), srq(again), srq(other)
        nums = [s.get_srq_num() for s in (s1, s2, s3)]
        self.assertEqual(len(set(nums)), 3)
        ini, tgt = self.xrc_end(pd, scq, xrcd, e.IBV_ACCESS_LOCAL_WRITE)
        self.assertEqual(tgt.qp_type, e.IBV_QPT_XRC_RECV)
        for i, s in enumerate((s1, s2)):
            s.post_recv(RecvWR(wr_id=10 + i, num_sge=1,
                               sg=[SGE(mr.buf + i * size, size, mr.lkey)]))
        # s2 by the legacy API, s1 by the ibv_wr_* one
        mr.write(b"B" * size, size, 2 * size)
        wr = SendWR(wr_id=1, num_sge=1,
                    sg=[SGE(mr.buf + 2 * size, size, mr.lkey)])
        wr.set_qp_type_xrc(nums[1])
        ini.post_send(wr)
        mr.write(b"A" * size, size, 3 * size)
        ini.wr_start()
        ini.wr_id = 2
        ini.wr_flags = e.IBV_SEND_SIGNALED
        ini.wr_send()
        ini.wr_set_sge(SGE(mr.buf + 3 * size, size, mr.lkey))
        ini.wr_set_xrc_srqn(nums[0])
        ini.wr_complete()
        sent = self.poll(scq, 2)
        self.assertEqual([(w.wr_id, w.status) for w in sent],
                         [(1, e.IBV_WC_SUCCESS), (2, e.IBV_WC_SUCCESS)])
        got = self.poll(cq, 2)
        self.assertEqual([w.wr_id for w in got], [11, 10])
        for w in got:
            self.assertEqual(w.status, e.IBV_WC_SUCCESS)
            self.assertEqual(w.opcode, e.IBV_WC_RECV)
            self.assertEqual(w.byte_len, size)
            self.assertEqual(w.qp_num, tgt.qp_num)
            self.assertEqual(w.src_qp, ini.qp_num)
        self.assertEqual(mr.read(size, 0), b"A" * size)
        self.assertEqual(mr.read(size, size), b"B" * size)
        # An SRQ of another domain: NAK invalid request, nothing received.
        s3.post_recv(RecvWR(wr_id=30, num_sge=1,
                            sg=[SGE(mr.buf, size, mr.lkey)]))
        wr = SendWR(wr_id=3, num_sge=1, sg=[SGE(mr.buf, 8, mr.lkey)])
        wr.set_qp_type_xrc(nums[2])
        ini.post_send(wr)
        bad = self.poll(scq, 1)[0]
        self.assertEqual(bad.status, e.IBV_WC_REM_INV_REQ_ERR)
        self.assertEqual(cq.poll(4)[0], 0)
        for o in (ini, tgt, s1, s2, s3, again, xrcd, other, mr, cq, scq, pd):
            o.close()
        os.close(fd)


def main():
    if os.environ.get("UROCE_PYVERBS_INNER"):
        sys.argv = sys.argv[:1]
        unittest.main(verbosity=2)
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uroce", required=True)
    a = ap.parse_args()
    try:
        import pyverbs  # noqa: F401
    except ImportError:
        print("pyverbs missing (apt install python3-pyverbs): skip")
        return 77
    ns = "uroce-pyv-%d" % os.getpid()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"],
                       check=True)
        env = dict(os.environ, UROCE_PYVERBS_INNER="1")
        p = subprocess.run(["ip", "netns", "exec", ns, a.uroce, "run",
                            "--addr", "127.0.0.2", "--", "/usr/bin/python3",
                            os.path.abspath(__file__)], env=env, timeout=120)
        return p.returncode
    finally:
        subprocess.run(["ip", "netns", "del", ns])


if __name__ == "__main__":
    sys.exit(main())
