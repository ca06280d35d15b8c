/* weir.h — the Weir guest ABI, version 1 (docs/ABI.md), for operators written in C.
 *
 * Header only, freestanding: it needs no libc, only the compiler's own <stdint.h> and
 * <stddef.h>. Build with clang for wasm32 (see docs/ABI.md, "Languages: C"):
 *
 *   clang --target=wasm32 -O2 -std=c11 -ffreestanding -nostdlib -mbulk-memory \
 *         -Wl,--no-entry -o count.wasm count.c
 *
 * What it gives:
 *   - WEIR_EXPORT(name): marks a function as the export `name` (docs/ABI.md §3);
 *   - the four imports of module `weir` (§4): weir_emit, weir_save_state, weir_fail, weir_log;
 *   - the batch layout (§5) as a reader (weir_batch_begin / weir_batch_next) and a writer
 *     (weir_batch_write_header / weir_record_write);
 *   - the init message (§6) as weir_init_message_parse.
 *
 * Integers in batches are little-endian and unaligned; every access here goes through
 * weir_load_* / weir_store_*, which compile to single unaligned wasm loads and stores.
 */
#ifndef WEIR_H
#define WEIR_H

#include <stddef.h>
#include <stdint.h>

/* The ABI version this header describes: what weir_abi_version must return. */
#define WEIR_ABI_VERSION 1

/* Marks a function as the module export `name`, e.g. WEIR_EXPORT(weir_process). */
#define WEIR_EXPORT(name) __attribute__((export_name(#name)))

/* Declares a function as the import `name` of module `weir`. */
#define WEIR_IMPORT(name) __attribute__((import_module("weir"), import_name(#name)))

/* ---- Imports (docs/ABI.md §4). The host copies the bytes during the call. ---------------- */

/* Appends one complete output batch (port 0). Only during weir_process and weir_finish. */
WEIR_IMPORT(emit) void weir_emit(const void *batch, uint32_t len);

/* Appends len bytes to the snapshot being taken. Only during weir_snapshot. */
WEIR_IMPORT(save_state) void weir_save_state(const void *bytes, uint32_t len);

/* Fails the current call with a UTF-8 message. Does not return. */
WEIR_IMPORT(fail) __attribute__((noreturn)) void weir_fail(const char *message, uint32_t len);

/* Writes a UTF-8 message to the host's log at one of the WEIR_LOG_* levels. */
WEIR_IMPORT(log) void weir_log(int32_t level, const char *message, uint32_t len);

enum {
  WEIR_LOG_ERROR = 0,
  WEIR_LOG_WARN = 1,
  WEIR_LOG_INFO = 2,
  WEIR_LOG_DEBUG = 3,
  WEIR_LOG_TRACE = 4,
};

/* Fails the current call with a string literal: WEIR_FAIL("count: out of memory"). */
#define WEIR_FAIL(literal) weir_fail((literal), (uint32_t)(sizeof(literal) - 1))

/* ---- Little-endian, unaligned loads and stores. ------------------------------------------- */

static inline uint32_t weir_load_u32(const uint8_t *p) {
  uint32_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

static inline uint64_t weir_load_u64(const uint8_t *p) {
  uint64_t v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

static inline void weir_store_u32(uint8_t *p, uint32_t v) { __builtin_memcpy(p, &v, sizeof v); }

static inline void weir_store_u64(uint8_t *p, uint64_t v) { __builtin_memcpy(p, &v, sizeof v); }

/* ---- Batches (docs/ABI.md §5). ------------------------------------------------------------ */

/* Bytes before the first record: record_count u32, port u32. */
#define WEIR_BATCH_HEADER_LEN 8u
/* Bytes of a record before its key: timestamp i64, key_len u32, value_len u32. */
#define WEIR_RECORD_HEADER_LEN 16u

/* One record of a batch; key and value point into the batch. */
typedef struct {
  int64_t timestamp;
  const uint8_t *key;
  uint32_t key_len;
  const uint8_t *value;
  uint32_t value_len;
} weir_record;

/* Walks the records of an input batch. */
typedef struct {
  const uint8_t *cursor; /* the next record */
  const uint8_t *end;    /* one past the batch */
  uint32_t remaining;    /* records not yet read */
  uint32_t port;         /* the input port the batch came from */
  uint32_t count;        /* records in the batch */
} weir_batch_reader;

/* Starts reading the batch at batch..batch+len. Returns 0, or -1 when it is shorter than its
 * header. */
static inline int weir_batch_begin(weir_batch_reader *r, const uint8_t *batch, uint32_t len) {
  if (len < WEIR_BATCH_HEADER_LEN) return -1;
  r->count = weir_load_u32(batch);
  r->remaining = r->count;
  r->port = weir_load_u32(batch + 4);
  r->cursor = batch + WEIR_BATCH_HEADER_LEN;
  r->end = batch + len;
  return 0;
}

/* Reads the next record into *out. Returns 1 for a record; 0 when all records were read and
 * the batch ended exactly there; -1 when the batch is malformed (a record runs past the end,
 * or bytes are left over after the last record). */
static inline int weir_batch_next(weir_batch_reader *r, weir_record *out) {
  if (r->remaining == 0) return r->cursor == r->end ? 0 : -1;
  uint64_t left = (uint64_t)(r->end - r->cursor);
  if (left < WEIR_RECORD_HEADER_LEN) return -1;
  uint64_t key_len = weir_load_u32(r->cursor + 8);
  uint64_t value_len = weir_load_u32(r->cursor + 12);
  if (WEIR_RECORD_HEADER_LEN + key_len + value_len > left) return -1;
  out->timestamp = (int64_t)weir_load_u64(r->cursor);
  out->key_len = (uint32_t)key_len;
  out->value_len = (uint32_t)value_len;
  out->key = r->cursor + WEIR_RECORD_HEADER_LEN;
  out->value = out->key + key_len;
  r->cursor = out->value + value_len;
  r->remaining--;
  return 1;
}

/* Writes an output batch header (port 0) for record_count records at dst. */
static inline void weir_batch_write_header(uint8_t *dst, uint32_t record_count) {
  weir_store_u32(dst, record_count);
  weir_store_u32(dst + 4, 0);
}

/* Bytes a record with these key and value lengths takes in a batch. */
static inline uint64_t weir_record_size(uint32_t key_len, uint32_t value_len) {
  return (uint64_t)WEIR_RECORD_HEADER_LEN + key_len + value_len;
}

/* Writes one record at dst (which must have weir_record_size bytes) and returns the byte
 * just past it. */
static inline uint8_t *weir_record_write(uint8_t *dst, int64_t timestamp, const uint8_t *key,
                                         uint32_t key_len, const uint8_t *value,
                                         uint32_t value_len) {
  weir_store_u64(dst, (uint64_t)timestamp);
  weir_store_u32(dst + 8, key_len);
  weir_store_u32(dst + 12, value_len);
  dst += WEIR_RECORD_HEADER_LEN;
  __builtin_memcpy(dst, key, key_len);
  dst += key_len;
  __builtin_memcpy(dst, value, value_len);
  return dst + value_len;
}

/* ---- The init message (docs/ABI.md §6). --------------------------------------------------- */

typedef struct {
  uint32_t subtask_index;
  uint32_t parallelism;
  const uint8_t *name; /* UTF-8, not NUL-terminated */
  uint32_t name_len;
  const uint8_t *config;
  uint32_t config_len;
} weir_init_message;

/* Parses the init message at msg..msg+len. Returns 0, or -1 when it is malformed. */
static inline int weir_init_message_parse(weir_init_message *m, const uint8_t *msg,
                                          uint32_t len) {
  uint64_t left = len;
  if (left < 12) return -1;
  m->subtask_index = weir_load_u32(msg);
  m->parallelism = weir_load_u32(msg + 4);
  m->name_len = weir_load_u32(msg + 8);
  left -= 12;
  if ((uint64_t)m->name_len + 4 > left) return -1;
  m->name = msg + 12;
  left -= (uint64_t)m->name_len + 4;
  m->config_len = weir_load_u32(m->name + m->name_len);
  if (m->config_len != left) return -1;
  m->config = m->name + m->name_len + 4;
  return 0;
}

#endif /* WEIR_H */
