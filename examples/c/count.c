/* count.c — a stateful keyed running count, written in C against docs/ABI.md.
 *
 * For every input record the operator adds one to the count of the record's key and emits a
 * record with the same key and timestamp whose value is the updated count as decimal ASCII
 * text ("1", "2", ...); the input value is ignored. This output is the cross-language contract
 * of the `count` examples (examples/rust/count, examples/wat/count.wat, examples/assemblyscript):
 * for the same input they emit exactly the same records.
 *
 * State. The counts live in one contiguous table of entries in insertion order, laid out as in
 * examples/wat/count.wat:
 *
 *     0   4  key_len  u32
 *     4   8  count    u64
 *     12  .. key_len bytes of key
 *
 * and an open-addressing hash index of entry offsets to find a key. A snapshot is a 16-byte
 * header followed by the table bytes, in the format of count.wat (so the two modules can
 * restore each other's snapshots):
 *
 *     0   4  magic      "WCNT"
 *     4   4  version    1
 *     8   4  entries    number of table entries
 *     12  4  table_len  bytes of table that follow
 *
 * Memory. No libc: a bump allocator hands out memory above __heap_base (the end of the
 * module's data and stack, placed by wasm-ld) and grows the linear memory as needed. Nothing
 * is freed: buffers that outgrow their capacity are replaced by one twice as large, so the
 * memory wasted is bounded by what is in use.
 */
#include "weir.h"

/* ---- Allocation. -------------------------------------------------------------------------- */

/* The first byte past the module's data and stack, defined by wasm-ld. */
extern uint8_t __heap_base;

/* The next free byte of the heap; 0 until the first allocation. */
static uintptr_t heap_next;

#define PAGE_SIZE 65536u

/* Returns size bytes of zeroed memory, 8-byte aligned, or NULL when the memory cannot grow. */
static void *heap_alloc(uint64_t size) {
  if (heap_next == 0) heap_next = ((uintptr_t)&__heap_base + 7u) & ~(uintptr_t)7u;
  uint64_t start = heap_next;
  uint64_t end = (start + size + 7u) & ~(uint64_t)7u;
  if (end > 0xFFFFFFFFull) return NULL;
  uint64_t have = (uint64_t)__builtin_wasm_memory_size(0) * PAGE_SIZE;
  if (end > have) {
    uint64_t pages = (end - have + PAGE_SIZE - 1) / PAGE_SIZE;
    if (__builtin_wasm_memory_grow(0, (uintptr_t)pages) == (uintptr_t)-1) return NULL;
  }
  heap_next = (uintptr_t)end;
  return (void *)(uintptr_t)start;
}

/* A growable byte buffer. */
typedef struct {
  uint8_t *data;
  uint32_t cap;
} buffer;

/* Makes b hold at least need bytes, keeping its first keep bytes when it moves. Returns 0, or
 * -1 when the memory cannot grow that far. */
static int reserve(buffer *b, uint64_t need, uint32_t keep) {
  if (need <= b->cap) return 0;
  uint64_t cap = b->cap < 256 ? 256 : (uint64_t)b->cap * 2;
  if (cap < need) cap = need;
  if (cap > 0xFFFFFFFFull) return -1;
  uint8_t *data = heap_alloc(cap);
  if (data == NULL) return -1;
  if (keep != 0) __builtin_memcpy(data, b->data, keep);
  b->data = data;
  b->cap = (uint32_t)cap;
  return 0;
}

/* ---- State. ------------------------------------------------------------------------------- */

#define ENTRY_HEADER_LEN 12u
#define SNAPSHOT_HEADER_LEN 16u
#define SNAPSHOT_MAGIC 0x544e4357u /* "WCNT", little-endian */
#define SNAPSHOT_VERSION 1u

/* The entries, packed in insertion order (layout above). */
static buffer table;
/* Bytes of table in use. */
static uint32_t table_len;
/* Number of entries in table. */
static uint32_t entries;

/* The hash index: slot_count slots (a power of two, or 0), each 0 for empty or the offset of
 * an entry in table plus one. Kept at most half full. */
static uint32_t *slots;
static uint32_t slot_count;

/* The buffer weir_alloc hands to the host, reused for every call. */
static buffer host_buffer;
/* The output batch being built by weir_process. */
static buffer output;

/* FNV-1a, 32-bit. */
static uint32_t hash(const uint8_t *key, uint32_t len) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < len; i++) h = (h ^ key[i]) * 16777619u;
  return h;
}

static int bytes_equal(const uint8_t *a, const uint8_t *b, uint32_t len) {
  for (uint32_t i = 0; i < len; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* Finds the slot holding key, or the empty slot where it belongs. slot_count must be > 0. */
static uint32_t *find_slot(const uint8_t *key, uint32_t key_len) {
  uint32_t mask = slot_count - 1;
  for (uint32_t i = hash(key, key_len) & mask;; i = (i + 1) & mask) {
    uint32_t slot = slots[i];
    if (slot == 0) return &slots[i];
    const uint8_t *entry = table.data + (slot - 1);
    if (weir_load_u32(entry) == key_len && bytes_equal(entry + ENTRY_HEADER_LEN, key, key_len))
      return &slots[i];
  }
}

/* Rebuilds the index with room for at least `wanted` entries. Returns 0, or -1 when out of
 * memory. */
static int rebuild_index(uint32_t wanted) {
  uint64_t count = 64;
  while (count < (uint64_t)wanted * 2) count *= 2;
  if (count * 4 > 0xFFFFFFFFull) return -1;
  uint32_t *fresh = heap_alloc(count * 4);
  if (fresh == NULL) return -1;
  slots = fresh;
  slot_count = (uint32_t)count;
  for (uint32_t at = 0; at < table_len;) {
    uint32_t key_len = weir_load_u32(table.data + at);
    *find_slot(table.data + at + ENTRY_HEADER_LEN, key_len) = at + 1;
    at += ENTRY_HEADER_LEN + key_len;
  }
  return 0;
}

/* Returns the table offset of key's entry, appending one with count 0 when the key is new;
 * fails the call when out of memory. */
static uint32_t entry_for(const uint8_t *key, uint32_t key_len) {
  if (((uint64_t)entries + 1) * 2 > slot_count && rebuild_index(entries + 1) != 0)
    WEIR_FAIL("count: out of memory");
  uint32_t *slot = find_slot(key, key_len);
  if (*slot != 0) return *slot - 1;
  uint32_t at = table_len;
  if (reserve(&table, (uint64_t)at + ENTRY_HEADER_LEN + key_len, table_len) != 0)
    WEIR_FAIL("count: out of memory");
  weir_store_u32(table.data + at, key_len);
  weir_store_u64(table.data + at + 4, 0);
  __builtin_memcpy(table.data + at + ENTRY_HEADER_LEN, key, key_len);
  table_len = at + ENTRY_HEADER_LEN + key_len;
  entries++;
  *slot = at + 1;
  return at;
}

/* Writes value as decimal ASCII at dst (room for 20 bytes) and returns how many it wrote. */
static uint32_t write_decimal(uint64_t value, uint8_t *dst) {
  uint8_t digits[20];
  uint32_t n = 0;
  do {
    digits[n++] = (uint8_t)('0' + value % 10);
    value /= 10;
  } while (value != 0);
  for (uint32_t i = 0; i < n; i++) dst[i] = digits[n - 1 - i];
  return n;
}

/* ---- The ABI's exports. ------------------------------------------------------------------- */

WEIR_EXPORT(weir_abi_version) int32_t weir_abi_version(void) { return WEIR_ABI_VERSION; }

WEIR_EXPORT(weir_alloc) uint8_t *weir_alloc(uint32_t len) {
  if (reserve(&host_buffer, len == 0 ? 1 : len, 0) != 0) return NULL;
  return host_buffer.data;
}

WEIR_EXPORT(weir_process) int32_t weir_process(const uint8_t *batch, uint32_t len) {
  weir_batch_reader reader;
  if (weir_batch_begin(&reader, batch, len) != 0) WEIR_FAIL("count: malformed input batch");
  uint64_t written = WEIR_BATCH_HEADER_LEN;
  weir_record record;
  int status;
  while ((status = weir_batch_next(&reader, &record)) == 1) {
    uint32_t at = entry_for(record.key, record.key_len);
    uint64_t count = weir_load_u64(table.data + at + 4) + 1;
    weir_store_u64(table.data + at + 4, count);

    /* The output record: header, key, at most 20 digits. */
    if (reserve(&output, written + weir_record_size(record.key_len, 20), (uint32_t)written) != 0)
      WEIR_FAIL("count: out of memory");
    uint8_t text[20];
    uint32_t digits = write_decimal(count, text);
    written = (uint64_t)(weir_record_write(output.data + written, record.timestamp, record.key,
                                           record.key_len, text, digits) -
                         output.data);
  }
  if (status != 0) WEIR_FAIL("count: malformed input batch");
  if (reader.count != 0) {
    weir_batch_write_header(output.data, reader.count);
    weir_emit(output.data, (uint32_t)written);
  }
  return 0;
}

WEIR_EXPORT(weir_snapshot) int32_t weir_snapshot(int64_t checkpoint_id) {
  (void)checkpoint_id;
  uint8_t header[SNAPSHOT_HEADER_LEN];
  weir_store_u32(header, SNAPSHOT_MAGIC);
  weir_store_u32(header + 4, SNAPSHOT_VERSION);
  weir_store_u32(header + 8, entries);
  weir_store_u32(header + 12, table_len);
  weir_save_state(header, SNAPSHOT_HEADER_LEN);
  if (table_len != 0) weir_save_state(table.data, table_len);
  return 0;
}

WEIR_EXPORT(weir_restore) int32_t weir_restore(const uint8_t *state, uint32_t len) {
  if (len == 0) {
    table_len = 0;
    entries = 0;
    if (rebuild_index(0) != 0) WEIR_FAIL("count: out of memory");
    return 0;
  }
  if (len < SNAPSHOT_HEADER_LEN) WEIR_FAIL("count: snapshot is shorter than its 16-byte header");
  if (weir_load_u32(state) != SNAPSHOT_MAGIC) WEIR_FAIL("count: not a count snapshot (bad magic)");
  if (weir_load_u32(state + 4) != SNAPSHOT_VERSION)
    WEIR_FAIL("count: unsupported count snapshot version");
  uint32_t new_len = weir_load_u32(state + 12);
  if (new_len != len - SNAPSHOT_HEADER_LEN)
    WEIR_FAIL("count: snapshot length does not match its header");
  const uint8_t *bytes = state + SNAPSHOT_HEADER_LEN;

  /* Every entry must fit, the last must end exactly at the end, and their number must be
   * the header's. */
  uint32_t seen = 0;
  uint64_t at = 0;
  while (at < new_len) {
    if (at + ENTRY_HEADER_LEN > new_len) WEIR_FAIL("count: snapshot entries are corrupt");
    at += ENTRY_HEADER_LEN + (uint64_t)weir_load_u32(bytes + at);
    seen++;
  }
  if (at != new_len || seen != weir_load_u32(state + 8))
    WEIR_FAIL("count: snapshot entries are corrupt");

  if (reserve(&table, new_len, 0) != 0) WEIR_FAIL("count: out of memory");
  __builtin_memcpy(table.data, bytes, new_len);
  table_len = new_len;
  entries = seen;
  if (rebuild_index(entries) != 0) WEIR_FAIL("count: out of memory");
  /* A key listed twice would make the index and the table disagree. */
  uint32_t indexed = 0;
  for (uint32_t i = 0; i < slot_count; i++) indexed += slots[i] != 0;
  if (indexed != entries) WEIR_FAIL("count: snapshot entries are corrupt");
  return 0;
}
