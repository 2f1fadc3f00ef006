#include "wire/gso.h"

#include <string.h>
#include <zlib.h>

#include "util/bytes.h"
#include "wire/hdr.h"

/* Smallest packet: a BTH and the ICRC. */
#define MIN_PKT (UROCE_BTH_LEN + UROCE_ICRC_LEN)

/* f's IP and UDP headers as they were for a packet of len bytes (BTH ..
 * ICRC) with identification ip_id: lengths and identification are
 * covered by the ICRC, the checksums are not (masked), so they stay. */
static void seg_hdrs(const struct uroce_frame *f, uint32_t len, uint16_t ip_id,
                     uint8_t *h) {
  size_t ihl = f->l3_hlen;
  uint16_t ulen = (uint16_t)(UROCE_UDP_HLEN + len);
  memcpy(h, f->l3, ihl + UROCE_UDP_HLEN);
  if (f->ipver == 4) {
    put_be16(h + 2, (uint16_t)(ihl + ulen));
    put_be16(h + 4, ip_id);
  } else {
    put_be16(h + 4, ulen);
  }
  put_be16(h + ihl + 4, ulen);
}

static uint32_t hdr_crc(const struct uroce_frame *f, uint32_t len,
                        uint16_t ip_id) {
  uint8_t h[60 + UROCE_UDP_HLEN];
  seg_hdrs(f, len, ip_id, h);
  return uroce_icrc_hdr(h, f->l3_hlen, h + f->l3_hlen);
}

uint32_t uroce_gso_seg_icrc(const struct uroce_frame *f, uint32_t off,
                            uint32_t len, uint16_t ip_id) {
  uint8_t h[60 + UROCE_UDP_HLEN];
  if (len < MIN_PKT || off > f->bth_len || len > f->bth_len - off ||
      f->l3_hlen > 60)
    return 0;
  seg_hdrs(f, len, ip_id, h);
  return uroce_icrc(h, f->l3_hlen, h + f->l3_hlen, f->bth + off,
                    len - UROCE_ICRC_LEN);
}

/* Whether a packet can start at b (n bytes left): a known opcode and
 * transport version 0, the two BTH fields a sender never gets wrong. */
static bool looks_like_bth(const uint8_t *b, uint32_t n) {
  return n >= MIN_PKT && uroce_opcode(b[0]) && (b[1] & 0x0F) == 0;
}

/* Whether cutting at every multiple of l leaves a packet start at each. */
static bool cuts_plausible(const struct uroce_frame *f, uint32_t l) {
  for (uint32_t o = l; o < f->bth_len; o += l)
    if (!looks_like_bth(f->bth + o, f->bth_len - o))
      return false;
  return true;
}

/* The segment size, or 0: see uroce_gso_split. crc runs over the masked
 * BTH and the bytes after it, 4 at a time; for a candidate l the ICRC of
 * the first packet is the header CRC for l combined with crc over l - 4
 * bytes, so no byte is read twice. */
static uint32_t find_seg_size(const struct uroce_frame *f) {
  const uint8_t *b = f->bth;
  uint32_t total = f->bth_len;
  const struct uroce_opcode_info *op = uroce_opcode(b[0]);
  if (!op || total % 4 || total < 2 * MIN_PKT)
    return 0;
  uint32_t lmin = op->length + UROCE_ICRC_LEN;
  uint8_t bth[UROCE_BTH_LEN];
  memcpy(bth, b, UROCE_BTH_LEN);
  bth[4] = 0xFF; /* FECN, BECN, resv6: masked */
  uint32_t crc = uroce_crc32(0, bth, UROCE_BTH_LEN);
  uint32_t done = UROCE_BTH_LEN; /* bytes crc covers */
  for (uint32_t l = lmin; l + MIN_PKT <= total; l += 4) {
    if (!cuts_plausible(f, l) || total - (total - 1) / l * l < MIN_PKT)
      continue;
    uint32_t body = l - UROCE_ICRC_LEN;
    crc = uroce_crc32(crc, b + done, body - done);
    done = body;
    uint32_t want = get_le32(b + body);
    uint32_t got =
        (uint32_t)crc32_combine(hdr_crc(f, l, f->ip_id), crc, (z_off_t)body);
    if (got == want)
      return l;
  }
  return 0;
}

static void check_seg(const struct uroce_frame *f, struct uroce_gso_seg *s,
                      uint16_t id, bool try_fixed, uint16_t base) {
  s->icrc = get_le32(f->bth + s->off + s->len - UROCE_ICRC_LEN);
  s->ip_id = id;
  s->icrc_expected = uroce_gso_seg_icrc(f, s->off, s->len, id);
  s->icrc_ok = s->icrc == s->icrc_expected;
  if (!s->icrc_ok && try_fixed && f->ipver == 4 && id != base &&
      uroce_gso_seg_icrc(f, s->off, s->len, base) == s->icrc) {
    s->ip_id = base;
    s->icrc_expected = s->icrc;
    s->icrc_ok = true;
  }
}

struct uroce_gso_split uroce_gso_split(const struct uroce_frame *f,
                                       struct uroce_gso_seg *segs) {
  struct uroce_gso_split r = {1, 0};
  segs[0] = (struct uroce_gso_seg){0, f->bth_len, f->ip_id, false, 0, 0};
  if (f->bth_len < MIN_PKT || f->l3_hlen > 60)
    return r;
  segs[0].icrc = uroce_frame_icrc_carried(f);
  segs[0].icrc_expected = uroce_frame_icrc(f);
  segs[0].icrc_ok = segs[0].icrc == segs[0].icrc_expected;
  if (segs[0].icrc_ok)
    return r;
  uint32_t l = find_seg_size(f);
  if (!l)
    return r;
  r.seg_size = l;
  r.nsegs = 0;
  for (uint32_t o = 0; o < f->bth_len && r.nsegs < UROCE_GSO_MAX_SEGS; o += l) {
    struct uroce_gso_seg *s = &segs[r.nsegs];
    s->off = o;
    s->len = f->bth_len - o < l ? f->bth_len - o : l;
    /* The identification wraps like the kernel's 16-bit counter. */
    check_seg(f, s, (uint16_t)(f->ip_id + r.nsegs), true, f->ip_id);
    r.nsegs++;
  }
  return r;
}
