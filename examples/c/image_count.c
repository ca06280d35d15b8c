/* image_count.c — the keyed running count in C with the C library and no snapshot code.
 *
 * Same contract as count.c (docs/ABI.md §12): for every input record, add one to the count of
 * its key and emit a record with the same key and timestamp whose value is the new count as
 * decimal text. Unlike count.c it is written the way ordinary C is: wasi-libc's malloc,
 * realloc, memcpy and memcmp, state in heap-allocated structures reached from global pointers,
 * and a constructor that sets the state up. It exports neither weir_snapshot nor
 * weir_restore: Weir checkpoints it as an image of its memory and globals (docs/ABI.md §14),
 * which must restore malloc's heap and the constructor's work without running the constructor
 * again. Built by build-libc.sh:
 *
 *   clang --target=wasm32-wasi --sysroot=/usr/share/wasi-sysroot -mexec-model=reactor -O2 \
 *         -o image_count.wasm image_count.c
 *
 * The reactor model exports `_initialize`, which runs the C constructors once, when the host
 * instantiates the module (docs/ABI.md §1). The module imports nothing but `weir.emit` and
 * `weir.fail`: it uses no part of the C library that needs WASI.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "weir.h"

/* One key and its count; keys are copies on the heap. */
typedef struct {
  uint8_t *key;
  uint32_t key_len;
  uint64_t count;
} entry;

/* The state: an open-addressing table of entries (NULL key: empty), at most half full. */
static entry *table;
static uint32_t capacity;
static uint32_t used;

/* The buffer handed to the host by weir_alloc, and the output batch being built. */
static uint8_t *input;
static uint32_t input_cap;
static uint8_t *output;
static uint64_t output_cap;

/* Set by the constructor: restoring an image must not run it again (it would empty the
 * table), so the counts it keeps prove that the host did not. */
__attribute__((constructor)) static void set_up(void) {
  capacity = 64;
  table = calloc(capacity, sizeof(entry));
  if (!table) WEIR_FAIL("image_count: out of memory");
}

/* FNV-1a, 32-bit. */
static uint32_t hash(const uint8_t *key, uint32_t len) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < len; i++) h = (h ^ key[i]) * 16777619u;
  return h;
}

/* The slot of `key`, or the empty slot where it belongs. */
static entry *slot_for(entry *slots, uint32_t cap, const uint8_t *key, uint32_t len) {
  uint32_t i = hash(key, len) & (cap - 1);
  while (slots[i].key && !(slots[i].key_len == len && memcmp(slots[i].key, key, len) == 0)) {
    i = (i + 1) & (cap - 1);
  }
  return &slots[i];
}

/* Doubles the table, moving every entry. */
static void grow(void) {
  uint32_t bigger = capacity * 2;
  entry *slots = calloc(bigger, sizeof(entry));
  if (!slots) WEIR_FAIL("image_count: out of memory");
  for (uint32_t i = 0; i < capacity; i++) {
    if (table[i].key) *slot_for(slots, bigger, table[i].key, table[i].key_len) = table[i];
  }
  free(table);
  table = slots;
  capacity = bigger;
}

/* The new count of `key`. */
static uint64_t add(const uint8_t *key, uint32_t len) {
  if ((used + 1) * 2 > capacity) grow();
  entry *e = slot_for(table, capacity, key, len);
  if (!e->key) {
    e->key = malloc(len ? len : 1);
    if (!e->key) WEIR_FAIL("image_count: out of memory");
    memcpy(e->key, key, len);
    e->key_len = len;
    used++;
  }
  return ++e->count;
}

WEIR_EXPORT(weir_abi_version) int32_t weir_abi_version(void) { return WEIR_ABI_VERSION; }

WEIR_EXPORT(weir_alloc) uint8_t *weir_alloc(uint32_t len) {
  if (len > input_cap) {
    free(input);
    input = malloc(len);
    if (!input) return 0;
    input_cap = len;
  }
  return input ? input : (input = malloc(1));
}

WEIR_EXPORT(weir_process) int32_t weir_process(const uint8_t *batch, uint32_t len) {
  weir_batch_reader r;
  if (weir_batch_begin(&r, batch, len) != 0) WEIR_FAIL("image_count: malformed input batch");
  /* At most 20 digits of count per record. */
  uint64_t need = WEIR_BATCH_HEADER_LEN + (uint64_t)len + 20ull * r.count;
  if (need > output_cap) {
    free(output);
    output = malloc(need);
    if (!output) WEIR_FAIL("image_count: out of memory");
    output_cap = need;
  }
  uint8_t *out = output + WEIR_BATCH_HEADER_LEN;
  weir_record rec;
  int more;
  while ((more = weir_batch_next(&r, &rec)) == 1) {
    uint64_t n = add(rec.key, rec.key_len);
    uint8_t digits[20];
    uint32_t at = sizeof digits;
    do {
      digits[--at] = (uint8_t)('0' + n % 10);
      n /= 10;
    } while (n);
    out = weir_record_write(out, rec.timestamp, rec.key, rec.key_len, digits + at,
                            (uint32_t)(sizeof digits - at));
  }
  if (more < 0) WEIR_FAIL("image_count: malformed input batch");
  weir_batch_write_header(output, r.count);
  weir_emit(output, (uint32_t)(out - output));
  return 0;
}
