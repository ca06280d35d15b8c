//! count.zig — a stateful keyed running count, written in Zig against docs/ABI.md.
//!
//! For every input record the operator adds one to the count of the record's key and emits a
//! record with the same key and timestamp whose value is the updated count as decimal ASCII
//! text ("1", "2", ...); the input value is ignored. This output is the cross-language contract
//! of the `count` examples (examples/rust/count, examples/wat/count.wat, examples/c/count.c,
//! examples/assemblyscript): for the same input they emit exactly the same records.
//!
//! State. The counts live in one contiguous table of entries in insertion order, laid out as in
//! examples/wat/count.wat:
//!
//!     0   4  key_len  u32
//!     4   8  count    u64
//!     12  .. key_len bytes of key
//!
//! and an open-addressing hash index of entry offsets to find a key. A snapshot is a 16-byte
//! header followed by the table bytes, in the format of count.wat (so the WAT, C,
//! AssemblyScript and Zig counts restore each other's snapshots):
//!
//!     0   4  magic      "WCNT"
//!     4   4  version    1
//!     8   4  entries    number of table entries
//!     12  4  table_len  bytes of table that follow
//!
//! Memory comes from `std.heap.wasm_allocator`, which grows the linear memory as needed and
//! keeps its free lists in globals and memory: with its snapshot exports the operator runs
//! checkpointed either way, through `weir_snapshot`/`weir_restore` or as an image (§14).
const std = @import("std");
const weir = @import("weir.zig");

/// Panics fail the call with their message (`weir.fail`).
pub const panic = weir.panic;

const gpa = std.heap.wasm_allocator;

const entry_header_len = 12;
const snapshot_header_len = 16;
const snapshot_magic: u32 = 0x544e4357; // "WCNT", little-endian
const snapshot_version: u32 = 1;

/// Why a call fails; `message` is what the host reports.
const Error = error{
    OutOfMemory,
    MalformedBatch,
    ShortSnapshot,
    BadMagic,
    BadVersion,
    BadLength,
    CorruptEntries,
};

fn message(err: Error) []const u8 {
    return switch (err) {
        error.OutOfMemory => "count: out of memory",
        error.MalformedBatch => "count: malformed input batch",
        error.ShortSnapshot => "count: snapshot is shorter than its 16-byte header",
        error.BadMagic => "count: not a count snapshot (bad magic)",
        error.BadVersion => "count: unsupported count snapshot version",
        error.BadLength => "count: snapshot length does not match its header",
        error.CorruptEntries => "count: snapshot entries are corrupt",
    };
}

// ---- State. -------------------------------------------------------------------------------

/// The entries, packed in insertion order (layout above).
var table: std.ArrayList(u8) = .empty;
/// Number of entries in `table`.
var entries: u32 = 0;
/// The hash index: a power-of-two number of slots (or none), each 0 for empty or the offset
/// of an entry in `table` plus one. Kept at most half full.
var slots: []u32 = &.{};

/// The buffer `weir_alloc` hands to the host, reused for every call.
var host_buffer: []u8 = &.{};
/// The output batch being built by `weir_process`.
var output: weir.BatchWriter = .{};

fn keyLen(at: usize) u32 {
    return weir.readU32(table.items[at..][0..4]);
}

fn keyOf(at: usize) []const u8 {
    return table.items[at + entry_header_len ..][0..keyLen(at)];
}

/// The slot holding `key`, or the empty slot where it belongs. There must be slots.
fn findSlot(key: []const u8) *u32 {
    const mask = slots.len - 1;
    var i = std.hash.Fnv1a_32.hash(key) & mask;
    while (true) : (i = (i + 1) & mask) {
        const slot = slots[i];
        if (slot == 0 or std.mem.eql(u8, keyOf(slot - 1), key)) return &slots[i];
    }
}

/// Rebuilds the index with room for at least `wanted` entries.
fn rebuildIndex(wanted: u32) Error!void {
    var count: usize = 64;
    while (count < @as(u64, wanted) * 2) count = std.math.mul(usize, count, 2) catch
        return error.OutOfMemory;
    const fresh = try gpa.alloc(u32, count);
    @memset(fresh, 0);
    gpa.free(slots);
    slots = fresh;
    var at: usize = 0;
    while (at < table.items.len) : (at += entry_header_len + keyLen(at)) {
        findSlot(keyOf(at)).* = @intCast(at + 1);
    }
}

/// The table offset of `key`'s entry, appending one with count 0 when the key is new.
fn entryFor(key: []const u8) Error!usize {
    if ((@as(u64, entries) + 1) * 2 > slots.len) try rebuildIndex(entries + 1);
    const slot = findSlot(key);
    if (slot.* != 0) return slot.* - 1;
    const at = table.items.len;
    if (at + entry_header_len + key.len >= std.math.maxInt(u32)) return error.OutOfMemory;
    const entry = try table.addManyAsSlice(gpa, entry_header_len + key.len);
    weir.writeU32(entry[0..4], @intCast(key.len));
    std.mem.writeInt(u64, entry[4..12], 0, .little);
    @memcpy(entry[entry_header_len..], key);
    entries += 1;
    slot.* = @intCast(at + 1);
    return at;
}

fn process(batch: []const u8) Error!void {
    var reader = try weir.BatchReader.init(batch);
    try output.reset(gpa);
    while (try reader.next()) |record| {
        const at = try entryFor(record.key);
        const counter = table.items[at + 4 ..][0..8];
        const count = std.mem.readInt(u64, counter, .little) + 1;
        std.mem.writeInt(u64, counter, count, .little);
        var text: [20]u8 = undefined;
        const digits = std.fmt.printInt(&text, count, 10, .lower, .{});
        try output.push(gpa, record.timestamp, record.key, text[0..digits]);
    }
    if (reader.count != 0) weir.emit(output.finish());
}

fn restore(state: []const u8) Error!void {
    if (state.len == 0) {
        table.clearRetainingCapacity();
        entries = 0;
        return rebuildIndex(0);
    }
    if (state.len < snapshot_header_len) return error.ShortSnapshot;
    if (weir.readU32(state[0..4]) != snapshot_magic) return error.BadMagic;
    if (weir.readU32(state[4..8]) != snapshot_version) return error.BadVersion;
    const bytes = state[snapshot_header_len..];
    if (weir.readU32(state[12..16]) != bytes.len) return error.BadLength;

    // Every entry must fit, the last must end exactly at the end, and their number must be
    // the header's.
    var seen: u32 = 0;
    var at: u64 = 0;
    while (at < bytes.len) : (seen += 1) {
        if (at + entry_header_len > bytes.len) return error.CorruptEntries;
        at += entry_header_len + @as(u64, weir.readU32(bytes[@intCast(at)..][0..4]));
    }
    if (at != bytes.len or seen != weir.readU32(state[8..12])) return error.CorruptEntries;

    table.clearRetainingCapacity();
    try table.appendSlice(gpa, bytes);
    entries = seen;
    try rebuildIndex(entries);
    // A key listed twice would make the index and the table disagree.
    var indexed: u32 = 0;
    for (slots) |slot| indexed += @intFromBool(slot != 0);
    if (indexed != entries) return error.CorruptEntries;
}

// ---- The ABI's exports. -------------------------------------------------------------------

export fn weir_abi_version() i32 {
    return weir.abi_version;
}

export fn weir_alloc(len: usize) ?[*]u8 {
    const need = @max(len, 1);
    if (host_buffer.len < need) {
        const fresh = gpa.alloc(u8, @max(need, host_buffer.len * 2)) catch return null;
        gpa.free(host_buffer);
        host_buffer = fresh;
    }
    return host_buffer.ptr;
}

export fn weir_process(ptr: [*]const u8, len: usize) i32 {
    process(ptr[0..len]) catch |err| weir.fail(message(err));
    return 0;
}

export fn weir_snapshot(checkpoint_id: i64) i32 {
    _ = checkpoint_id;
    var header: [snapshot_header_len]u8 = undefined;
    weir.writeU32(header[0..4], snapshot_magic);
    weir.writeU32(header[4..8], snapshot_version);
    weir.writeU32(header[8..12], entries);
    weir.writeU32(header[12..16], @intCast(table.items.len));
    weir.saveState(&header);
    if (table.items.len != 0) weir.saveState(table.items);
    return 0;
}

export fn weir_restore(ptr: [*]const u8, len: usize) i32 {
    restore(ptr[0..len]) catch |err| weir.fail(message(err));
    return 0;
}
