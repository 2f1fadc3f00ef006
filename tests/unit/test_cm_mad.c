/* CM MADs (src/wire/cm_mad.c): every message survives build and parse,
 * fields sit at the IBA's byte offsets, and malformed input is refused
 * without reading past the buffer. */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "wire/cm_mad.h"

static const uint16_t attrs[] = {
    UROCE_CM_REQ,  UROCE_CM_MRA,      UROCE_CM_REJ,
    UROCE_CM_REP,  UROCE_CM_RTU,      UROCE_CM_DREQ,
    UROCE_CM_DREP, UROCE_CM_SIDR_REQ, UROCE_CM_SIDR_REP};

/* Random values within each field's width. */
static void random_msg(uint64_t *rng, uint16_t attr, struct uroce_cm_msg *m) {
  memset(m, 0, sizeof(*m));
  m->attr_id = attr;
  m->method = UROCE_MAD_METHOD_SEND;
  m->tid = t_rand(rng);
  m->local_id = (uint32_t)t_rand(rng);
  m->remote_id = (uint32_t)t_rand(rng);
  m->service_id = t_rand(rng);
  m->ca_guid = t_rand(rng);
  m->qkey = (uint32_t)t_rand(rng);
  m->qpn = (uint32_t)t_rand(rng) & 0xFFFFFF;
  m->psn = (uint32_t)t_rand(rng) & 0xFFFFFF;
  uint64_t r = t_rand(rng);
  m->resp_res = (uint8_t)r;
  m->init_depth = (uint8_t)(r >> 8);
  m->remote_cm_timeout = (r >> 16) & 31;
  m->local_cm_timeout = (r >> 21) & 31;
  m->max_cm_retries = (r >> 26) & 15;
  m->transport = (r >> 30) & 3;
  m->retry_count = (r >> 32) & 7;
  m->rnr_retry = (r >> 35) & 7;
  m->srq = (r >> 38) & 1;
  m->e2e_fc = (r >> 39) & 1;
  m->mtu = (r >> 40) & 15;
  m->pkey = (uint16_t)(r >> 44);
  r = t_rand(rng);
  m->slid = (uint16_t)r;
  m->dlid = (uint16_t)(r >> 16);
  m->flow_label = (uint32_t)(r >> 32) & 0xFFFFF;
  m->tclass = (uint8_t)(r >> 52);
  r = t_rand(rng);
  m->hop_limit = (uint8_t)r;
  m->sl = (r >> 8) & 15;
  m->subnet_local = (r >> 12) & 1;
  m->ack_timeout = (r >> 13) & 31;
  m->target_ack_delay = (r >> 18) & 31;
  m->failover = (r >> 23) & 3;
  m->msg = (r >> 25) & 3;
  m->service_timeout = (r >> 27) & 31;
  m->reason = (uint16_t)(r >> 32);
  m->ari_len = (r >> 48) % 73;
  m->status = (uint8_t)(r >> 56);
  for (int i = 0; i < 16; i++) {
    m->sgid[i] = (uint8_t)t_rand(rng);
    m->dgid[i] = (uint8_t)t_rand(rng);
  }
  for (int i = 0; i < 72; i++)
    m->ari[i] = (uint8_t)t_rand(rng);
  m->priv_len = (uint8_t)uroce_cm_priv_len(attr);
  for (int i = 0; i < m->priv_len; i++)
    m->priv[i] = (uint8_t)t_rand(rng);
}

#define SAME(f) CHECK_EQ(a->f, b->f)
/* The fields attr carries agree. */
static void check_same(const struct uroce_cm_msg *a,
                       const struct uroce_cm_msg *b) {
  SAME(attr_id);
  SAME(tid);
  SAME(local_id);
  SAME(priv_len);
  CHECK(!memcmp(a->priv, b->priv, a->priv_len));
  switch (a->attr_id) {
  case UROCE_CM_REQ:
    SAME(service_id);
    SAME(ca_guid);
    SAME(qkey);
    SAME(qpn);
    SAME(psn);
    SAME(resp_res);
    SAME(init_depth);
    SAME(remote_cm_timeout);
    SAME(transport);
    SAME(e2e_fc);
    SAME(local_cm_timeout);
    SAME(retry_count);
    SAME(pkey);
    SAME(mtu);
    SAME(rnr_retry);
    SAME(max_cm_retries);
    SAME(srq);
    SAME(slid);
    SAME(dlid);
    SAME(flow_label);
    SAME(tclass);
    SAME(hop_limit);
    SAME(sl);
    SAME(subnet_local);
    SAME(ack_timeout);
    CHECK(!memcmp(a->sgid, b->sgid, 16) && !memcmp(a->dgid, b->dgid, 16));
    break;
  case UROCE_CM_REP:
    SAME(remote_id);
    SAME(qkey);
    SAME(qpn);
    SAME(psn);
    SAME(resp_res);
    SAME(init_depth);
    SAME(target_ack_delay);
    SAME(failover);
    SAME(e2e_fc);
    SAME(rnr_retry);
    SAME(srq);
    SAME(ca_guid);
    break;
  case UROCE_CM_REJ:
    SAME(remote_id);
    SAME(msg);
    SAME(reason);
    SAME(ari_len);
    CHECK(!memcmp(a->ari, b->ari, a->ari_len));
    break;
  case UROCE_CM_MRA:
    SAME(remote_id);
    SAME(msg);
    SAME(service_timeout);
    break;
  case UROCE_CM_DREQ:
    SAME(remote_id);
    SAME(qpn);
    break;
  case UROCE_CM_RTU:
  case UROCE_CM_DREP:
    SAME(remote_id);
    break;
  case UROCE_CM_SIDR_REQ:
    SAME(pkey);
    SAME(service_id);
    break;
  case UROCE_CM_SIDR_REP:
    SAME(status);
    SAME(qpn);
    SAME(service_id);
    SAME(qkey);
    break;
  }
}

static void test_roundtrip(void) {
  uint64_t rng = 0x5eed;
  for (int it = 0; it < 2000; it++) {
    uint16_t attr = attrs[it % 9];
    struct uroce_cm_msg a, b;
    uint8_t mad[UROCE_MAD_LEN];
    random_msg(&rng, attr, &a);
    CHECK_EQ(uroce_cm_build(&a, mad), 0);
    CHECK_EQ(uroce_cm_parse(mad, sizeof(mad), &b), 0);
    check_same(&a, &b);
    /* What the private data leaves is zero. */
    char line[512];
    size_t n = uroce_cm_describe(&b, line, sizeof(line));
    CHECK(n > 0 && n < sizeof(line));
    CHECK(!strncmp(line, "CM ", 3));
  }
}

/* Byte offsets from the IBA (vol 1, 12.6), counted from the MAD's start
 * (the CM message follows the 24-byte MAD header). */
static void test_offsets(void) {
  struct uroce_cm_msg m;
  uint8_t b[UROCE_MAD_LEN];
  memset(&m, 0, sizeof(m));
  m.attr_id = UROCE_CM_REQ;
  m.tid = 0x0102030405060708ull;
  m.local_id = 0xA1A2A3A4;
  m.service_id = 0x0000000001060000ull | 7174;
  m.qpn = 0x123456;
  m.psn = 0xABCDEF;
  m.qkey = 0x11223344;
  m.pkey = 0xFFFF;
  m.mtu = 3;
  m.rnr_retry = 7;
  m.retry_count = 5;
  m.sgid[15] = 0x51;
  m.dgid[15] = 0x52;
  m.priv_len = 2;
  m.priv[0] = 0xEE;
  m.priv[1] = 0xEF;
  CHECK_EQ(uroce_cm_build(&m, b), 0);
  CHECK_EQ(b[0], 1);    /* base version */
  CHECK_EQ(b[1], 0x07); /* class: CM */
  CHECK_EQ(b[2], 2);    /* class version */
  CHECK_EQ(b[3], 0x03); /* Send */
  CHECK_EQ(b[8], 0x01);
  CHECK_EQ(b[15], 0x08);              /* TID */
  CHECK(b[16] == 0 && b[17] == 0x10); /* attribute: REQ */
  CHECK(b[24] == 0xA1 && b[27] == 0xA4);
  CHECK(b[32] == 0 && b[33] == 0 && b[34] == 0 && b[35] == 0);
  CHECK(b[36] == 0x01 && b[37] == 0x06 && b[38] == 0x1C &&
        b[39] == 0x06);                  /* service ID, port 7174 */
  CHECK(b[52] == 0x11 && b[55] == 0x44); /* Q_Key */
  CHECK(b[56] == 0x12 && b[57] == 0x34 && b[58] == 0x56); /* QPN */
  CHECK(b[68] == 0xAB && b[69] == 0xCD && b[70] == 0xEF); /* PSN */
  CHECK_EQ(b[71] & 7, 5);                                 /* retry count */
  CHECK(b[72] == 0xFF && b[73] == 0xFF);                  /* P_Key */
  CHECK_EQ(b[74], 0x37);                                  /* MTU | RNR */
  CHECK_EQ(b[80 + 15], 0x51);                             /* local GID */
  CHECK_EQ(b[96 + 15], 0x52);                             /* remote GID */
  CHECK(b[164] == 0xEE && b[165] == 0xEF);                /* private data */

  memset(&m, 0, sizeof(m));
  m.attr_id = UROCE_CM_REP;
  m.local_id = 1;
  m.remote_id = 2;
  m.qpn = 0x654321;
  m.psn = 0x0F0E0D;
  m.resp_res = 4;
  m.init_depth = 3;
  m.rnr_retry = 6;
  m.priv_len = 1;
  m.priv[0] = 0x99;
  CHECK_EQ(uroce_cm_build(&m, b), 0);
  CHECK_EQ(b[17], 0x13);
  CHECK(b[31] == 2 && b[36] == 0x65 && b[38] == 0x21); /* remote ID, QPN */
  CHECK(b[44] == 0x0F && b[46] == 0x0D);               /* PSN */
  CHECK(b[48] == 4 && b[49] == 3);
  CHECK_EQ(b[51] >> 5, 6);
  CHECK_EQ(b[60], 0x99);
}

static void test_bad(void) {
  uint8_t b[UROCE_MAD_LEN + 1];
  struct uroce_cm_msg m;
  memset(&m, 0, sizeof(m));
  m.attr_id = UROCE_CM_RTU;
  CHECK_EQ(uroce_cm_build(&m, b), 0);
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), 0);
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN - 1, &m), -1);
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN + 1, &m), -1);
  CHECK_EQ(uroce_cm_parse(NULL, UROCE_MAD_LEN, &m), -1);
  b[1] = 0x81; /* another class */
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), -1);
  b[1] = 0x07;
  b[2] = 1; /* class version 1 */
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), -1);
  b[2] = 2;
  b[17] = 0x19; /* not a CM message */
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), -1);
  CHECK(uroce_cm_attr_name(0x19) == NULL);
  /* Private data longer than the message's field is refused. */
  memset(&m, 0, sizeof(m));
  m.attr_id = UROCE_CM_REQ;
  m.priv_len = 93;
  CHECK_EQ(uroce_cm_build(&m, b), -1);
  m.attr_id = 0x42;
  m.priv_len = 0;
  CHECK_EQ(uroce_cm_build(&m, b), -1);
  /* A REJ claiming more ARI than the field holds is clipped. */
  memset(&m, 0, sizeof(m));
  m.attr_id = UROCE_CM_REJ;
  CHECK_EQ(uroce_cm_build(&m, b), 0);
  b[24 + 9] = 0xFE; /* ARI length 127 */
  CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), 0);
  CHECK(m.ari_len <= 72);
  /* Random MADs with a CM header: parse and describe stay in bounds. */
  uint64_t rng = 7;
  for (int it = 0; it < 20000; it++) {
    for (int i = 0; i < UROCE_MAD_LEN; i++)
      b[i] = (uint8_t)t_rand(&rng);
    b[0] = 1, b[1] = 7, b[2] = 2, b[16] = 0;
    b[17] = (uint8_t)(0x10 + it % 9);
    CHECK_EQ(uroce_cm_parse(b, UROCE_MAD_LEN, &m), 0);
    char small[16];
    uroce_cm_describe(&m, small, sizeof(small));
    CHECK(strlen(small) < sizeof(small));
  }
}

int main(void) {
  T_RUN(test_roundtrip);
  T_RUN(test_offsets);
  T_RUN(test_bad);
  return T_DONE();
}
