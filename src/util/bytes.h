/* Byte-order helpers: every wire field is read and written through these
 * (memcpy plus bswap), never by casting to a packed struct. */
#ifndef UROCE_UTIL_BYTES_H
#define UROCE_UTIL_BYTES_H

#include <stdint.h>
#include <string.h>

static inline uint16_t get_be16(const uint8_t *p) {
  return (uint16_t)((p[0] << 8) | p[1]);
}
static inline uint32_t get_be24(const uint8_t *p) {
  return ((uint32_t)p[0] << 16) | ((uint32_t)p[1] << 8) | p[2];
}
static inline uint32_t get_be32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
static inline uint64_t get_be64(const uint8_t *p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
static inline uint32_t get_le32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v; /* x86 and arm64 Linux are little-endian; checked in CMake */
}
static inline void put_be16(uint8_t *p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}
static inline void put_be24(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 16);
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)v;
}
static inline void put_be32(uint8_t *p, uint32_t v) {
  v = __builtin_bswap32(v);
  memcpy(p, &v, 4);
}
static inline void put_be64(uint8_t *p, uint64_t v) {
  v = __builtin_bswap64(v);
  memcpy(p, &v, 8);
}
static inline void put_le32(uint8_t *p, uint32_t v) {
  memcpy(p, &v, 4);
}

#endif
