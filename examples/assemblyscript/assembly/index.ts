// count — a stateful keyed running count, written in AssemblyScript against docs/ABI.md.
//
// For every input record the operator adds one to the count of the record's key and emits a
// record with the same key and timestamp whose value is the updated count as decimal ASCII
// text ("1", "2", ...); the input value is ignored. This output is the cross-language contract
// of the `count` examples (examples/rust/count, examples/wat/count.wat, examples/c/count.c):
// for the same input they emit exactly the same records.
//
// State: one contiguous table of entries in insertion order, laid out as in count.wat
//
//     0   4  key_len  u32
//     4   8  count    u64
//     12  .. key_len bytes of key
//
// plus an open-addressing hash index of entry offsets to find a key. A snapshot is a 16-byte
// header ("WCNT", version 1, entries, table_len) followed by the table bytes: the format of
// count.wat and count.c, so the three modules restore each other's snapshots.
//
// Memory: raw linear memory through `load`/`store` and the stub runtime's `heap.alloc` /
// `heap.realloc`, no managed objects. Failures are AssemblyScript `throw`s, which the compiler
// turns into a call of the `env.abort` import; the host reports them as guest failures naming
// the message, this file and the line (docs/ABI.md §4).

// ---- The host's imports (docs/ABI.md §4). ---------------------------------------------------

@external("weir", "emit")
declare function emit(ptr: usize, len: usize): void;

@external("weir", "save_state")
declare function save_state(ptr: usize, len: usize): void;

// ---- State. ---------------------------------------------------------------------------------

const ENTRY_HEADER_LEN: u32 = 12;
const SNAPSHOT_HEADER_LEN: u32 = 16;
const SNAPSHOT_MAGIC: u32 = 0x544e4357; // "WCNT", little-endian
const SNAPSHOT_VERSION: u32 = 1;
const BATCH_HEADER_LEN: u32 = 8;
const RECORD_HEADER_LEN: u32 = 16;

// The entries, packed in insertion order (layout above): where, how many bytes are in use and
// how many fit.
let table: usize = 0;
let tableLen: u32 = 0;
let tableCap: u32 = 0;
// Number of entries in the table.
let entries: u32 = 0;

// The hash index: slotCount u32 slots (a power of two, or 0), each 0 for empty or an entry's
// offset in the table plus one. Kept at most half full.
let slots: usize = 0;
let slotCount: u32 = 0;

// The buffer weir_alloc hands to the host, reused for every call.
let hostBuffer: usize = 0;
let hostBufferCap: u32 = 0;

// The output batch being built by weir_process.
let output: usize = 0;
let outputCap: u32 = 0;

// The capacity to grow a buffer of `cap` bytes to so that it holds `need`.
function grown(cap: u32, need: u64): u32 {
  let next: u64 = cap < 256 ? 256 : <u64>cap * 2;
  if (next < need) next = need;
  if (next > 0xffffffff) throw new Error("count: out of memory");
  return <u32>next;
}

// Makes the table hold at least `need` bytes, keeping its contents.
function reserveTable(need: u64): void {
  if (need <= <u64>tableCap) return;
  tableCap = grown(tableCap, need);
  table = table == 0 ? heap.alloc(tableCap) : heap.realloc(table, tableCap);
}

// Makes the output buffer hold at least `need` bytes, keeping its contents.
function reserveOutput(need: u64): void {
  if (need <= <u64>outputCap) return;
  outputCap = grown(outputCap, need);
  output = output == 0 ? heap.alloc(outputCap) : heap.realloc(output, outputCap);
}

// FNV-1a, 32-bit.
function hash(key: usize, len: u32): u32 {
  let h: u32 = 2166136261;
  for (let i: u32 = 0; i < len; i++) h = (h ^ load<u8>(key + i)) * 16777619;
  return h;
}

// The address of the slot holding the key, or of the empty slot where it belongs.
function findSlot(key: usize, keyLen: u32): usize {
  const mask = slotCount - 1;
  let i = hash(key, keyLen) & mask;
  while (true) {
    const at = slots + (<usize>i << 2);
    const slot = load<u32>(at);
    if (slot == 0) return at;
    const entry = table + slot - 1;
    if (load<u32>(entry) == keyLen && memory.compare(entry + ENTRY_HEADER_LEN, key, keyLen) == 0) {
      return at;
    }
    i = (i + 1) & mask;
  }
}

// Rebuilds the index with room for at least `wanted` entries.
function rebuildIndex(wanted: u32): void {
  let count: u64 = 64;
  while (count < <u64>wanted * 2) count *= 2;
  if (count * 4 > 0xffffffff) throw new Error("count: out of memory");
  slotCount = <u32>count;
  if (slots != 0) heap.free(slots);
  slots = heap.alloc(<usize>count * 4);
  memory.fill(slots, 0, <usize>count * 4);
  let at: u32 = 0;
  while (at < tableLen) {
    const keyLen = load<u32>(table + at);
    store<u32>(findSlot(table + at + ENTRY_HEADER_LEN, keyLen), at + 1);
    at += ENTRY_HEADER_LEN + keyLen;
  }
}

// The table offset of the key's entry, appending one with count 0 when the key is new.
function entryFor(key: usize, keyLen: u32): u32 {
  if ((<u64>entries + 1) * 2 > <u64>slotCount) rebuildIndex(entries + 1);
  const slot = findSlot(key, keyLen);
  const found = load<u32>(slot);
  if (found != 0) return found - 1;
  const at = tableLen;
  reserveTable(<u64>at + ENTRY_HEADER_LEN + keyLen);
  store<u32>(table + at, keyLen);
  store<u64>(table + at, 0, 4);
  memory.copy(table + at + ENTRY_HEADER_LEN, key, keyLen);
  tableLen = at + ENTRY_HEADER_LEN + keyLen;
  entries++;
  store<u32>(slot, at + 1);
  return at;
}

// Writes `value` as decimal ASCII at `dst` (room for 20 bytes); returns how many bytes.
function writeDecimal(value: u64, dst: usize): u32 {
  let digits: u32 = 1;
  for (let rest = value / 10; rest != 0; rest /= 10) digits++;
  for (let i = digits; i > 0; i--) {
    store<u8>(dst + i - 1, <u8>(48 + value % 10));
    value /= 10;
  }
  return digits;
}

// ---- The ABI's exports (docs/ABI.md §3). ----------------------------------------------------

export function weir_abi_version(): i32 {
  return 1;
}

export function weir_alloc(len: u32): usize {
  if (len > hostBufferCap || hostBuffer == 0) {
    // The host is done with the previous buffer: it always consumes one in the next call.
    if (hostBuffer != 0) heap.free(hostBuffer);
    hostBufferCap = grown(hostBufferCap, len);
    hostBuffer = heap.alloc(hostBufferCap);
  }
  return hostBuffer;
}

export function weir_process(ptr: usize, len: u32): i32 {
  if (len < BATCH_HEADER_LEN) throw new Error("count: malformed input batch");
  const count = load<u32>(ptr);
  const end = <u64>ptr + len;
  let cursor: usize = ptr + BATCH_HEADER_LEN;
  let written: u64 = BATCH_HEADER_LEN;
  for (let i: u32 = 0; i < count; i++) {
    if (<u64>cursor + RECORD_HEADER_LEN > end) throw new Error("count: malformed input batch");
    const keyLen = load<u32>(cursor, 8);
    const valueLen = load<u32>(cursor, 12);
    if (<u64>cursor + RECORD_HEADER_LEN + keyLen + valueLen > end) {
      throw new Error("count: malformed input batch");
    }
    const key = cursor + RECORD_HEADER_LEN;
    // entryFor may move the table: read `table` only after it returns.
    const at = entryFor(key, keyLen);
    const entry = table + at;
    const n = load<u64>(entry, 4) + 1;
    store<u64>(entry, n, 4);

    // The output record: timestamp, key_len, value_len, key, at most 20 digits.
    reserveOutput(written + RECORD_HEADER_LEN + keyLen + 20);
    const out = output + <usize>written;
    store<i64>(out, load<i64>(cursor));
    store<u32>(out, keyLen, 8);
    memory.copy(out + RECORD_HEADER_LEN, key, keyLen);
    const digits = writeDecimal(n, out + RECORD_HEADER_LEN + keyLen);
    store<u32>(out, digits, 12);
    written += RECORD_HEADER_LEN + keyLen + digits;

    cursor = key + keyLen + valueLen;
  }
  if (<u64>cursor != end) throw new Error("count: malformed input batch");
  if (count != 0) {
    store<u32>(output, count);
    store<u32>(output, 0, 4);
    emit(output, <usize>written);
  }
  return 0;
}

export function weir_snapshot(checkpoint_id: i64): i32 {
  const header = memory.data(SNAPSHOT_HEADER_LEN);
  store<u32>(header, SNAPSHOT_MAGIC);
  store<u32>(header, SNAPSHOT_VERSION, 4);
  store<u32>(header, entries, 8);
  store<u32>(header, tableLen, 12);
  save_state(header, SNAPSHOT_HEADER_LEN);
  if (tableLen != 0) save_state(table, tableLen);
  return 0;
}

export function weir_restore(ptr: usize, len: u32): i32 {
  if (len == 0) {
    tableLen = 0;
    entries = 0;
    rebuildIndex(0);
    return 0;
  }
  if (len < SNAPSHOT_HEADER_LEN) {
    throw new Error("count: snapshot is shorter than its 16-byte header");
  }
  if (load<u32>(ptr) != SNAPSHOT_MAGIC) throw new Error("count: not a count snapshot (bad magic)");
  if (load<u32>(ptr, 4) != SNAPSHOT_VERSION) {
    throw new Error("count: unsupported count snapshot version");
  }
  const newLen = load<u32>(ptr, 12);
  if (newLen != len - SNAPSHOT_HEADER_LEN) {
    throw new Error("count: snapshot length does not match its header");
  }
  const bytes = ptr + SNAPSHOT_HEADER_LEN;

  // Every entry must fit, the last must end exactly at the end, and their number must be the
  // header's.
  let seen: u32 = 0;
  let at: u64 = 0;
  while (at < <u64>newLen) {
    if (at + ENTRY_HEADER_LEN > <u64>newLen) throw new Error("count: snapshot entries are corrupt");
    at += ENTRY_HEADER_LEN + <u64>load<u32>(bytes + <usize>at);
    seen++;
  }
  if (at != <u64>newLen || seen != load<u32>(ptr, 8)) {
    throw new Error("count: snapshot entries are corrupt");
  }

  reserveTable(newLen);
  memory.copy(table, bytes, newLen);
  tableLen = newLen;
  entries = seen;
  rebuildIndex(entries);
  // A key listed twice would leave fewer keys indexed than entries.
  let indexed: u32 = 0;
  for (let i: u32 = 0; i < slotCount; i++) {
    if (load<u32>(slots + (<usize>i << 2)) != 0) indexed++;
  }
  if (indexed != entries) throw new Error("count: snapshot entries are corrupt");
  return 0;
}
