//! weir.zig — the Weir guest ABI, version 1 (docs/ABI.md), for operators written in Zig.
//!
//! Freestanding: it needs nothing but Zig's standard library, and the module it is built into
//! imports only the four functions of module `weir`. Build with (docs/ABI.md, "Languages: Zig"):
//!
//!     zig build-exe count.zig -target wasm32-freestanding -fno-entry -rdynamic -O ReleaseSmall
//!
//! What it gives:
//!   - the imports of module `weir` (§4) as `emit`, `saveState`, `fail` and `log`, on slices;
//!   - `panic`, a panic handler that fails the call with the panic's message through `fail`
//!     (declare `pub const panic = weir.panic;` in the root file);
//!   - the batch layout (§5) as a reader (`BatchReader`) and a writer (`BatchWriter`).
//!
//! Exports are plain `export fn` declarations in the operator's own file (`weir_process`,
//! `weir_alloc`, …): their names are the export names.
//!
//! Integers in batches are little-endian and unaligned; every access goes through
//! `std.mem.readInt` / `std.mem.writeInt` on byte arrays, which compile to single wasm loads
//! and stores.
const std = @import("std");

/// The ABI version this file describes: what `weir_abi_version` must return.
pub const abi_version: i32 = 1;

/// The host's functions, as the module imports them (`weir.emit`, …). Use the wrappers below.
const host = struct {
    extern "weir" fn emit(ptr: [*]const u8, len: usize) void;
    extern "weir" fn save_state(ptr: [*]const u8, len: usize) void;
    extern "weir" fn fail(ptr: [*]const u8, len: usize) noreturn;
    extern "weir" fn log(level: i32, ptr: [*]const u8, len: usize) void;
};

/// Appends one complete output batch (port 0). Only during `weir_process` and `weir_finish`.
/// The host copies the bytes during the call.
pub fn emit(batch: []const u8) void {
    host.emit(batch.ptr, batch.len);
}

/// Appends `bytes` to the snapshot being taken. Only during `weir_snapshot`.
pub fn saveState(bytes: []const u8) void {
    host.save_state(bytes.ptr, bytes.len);
}

/// Fails the current call with a UTF-8 message. Does not return.
pub fn fail(message: []const u8) noreturn {
    host.fail(message.ptr, message.len);
}

/// The levels of `log`.
pub const Level = enum(i32) { err = 0, warn = 1, info = 2, debug = 3, trace = 4 };

/// Writes a UTF-8 message to the host's log.
pub fn log(level: Level, message: []const u8) void {
    host.log(@intFromEnum(level), message.ptr, message.len);
}

/// A panic handler for the root file (`pub const panic = weir.panic;`): a `@panic`, and in
/// the safe build modes a failed safety check, fails the call with its message instead of
/// trapping without one.
pub const panic = std.debug.FullPanic(failOnPanic);

fn failOnPanic(message: []const u8, first_trace_address: ?usize) noreturn {
    _ = first_trace_address;
    fail(message);
}

// ---- Batches (docs/ABI.md §5). ------------------------------------------------------------

/// Bytes before the first record: record_count u32, port u32.
pub const batch_header_len = 8;
/// Bytes of a record before its key: timestamp i64, key_len u32, value_len u32.
pub const record_header_len = 16;

/// One record of a batch; `key` and `value` point into the batch.
pub const Record = struct {
    timestamp: i64,
    key: []const u8,
    value: []const u8,
};

/// A batch that does not follow §5: shorter than its header, a record running past its end,
/// or bytes left over after the last record.
pub const MalformedBatch = error{MalformedBatch};

/// Walks the records of an input batch.
pub const BatchReader = struct {
    /// The whole batch.
    bytes: []const u8,
    /// The offset of the next record.
    at: usize,
    /// Records not yet read.
    remaining: u32,
    /// Records in the batch.
    count: u32,
    /// The input port the batch came from.
    port: u32,

    /// Starts reading `batch`.
    pub fn init(batch: []const u8) MalformedBatch!BatchReader {
        if (batch.len < batch_header_len) return error.MalformedBatch;
        const count = readU32(batch[0..4]);
        return .{
            .bytes = batch,
            .at = batch_header_len,
            .remaining = count,
            .count = count,
            .port = readU32(batch[4..8]),
        };
    }

    /// The next record, or `null` once every record was read and the batch ended there.
    pub fn next(self: *BatchReader) MalformedBatch!?Record {
        const left = self.bytes[self.at..];
        if (self.remaining == 0) {
            return if (left.len == 0) null else error.MalformedBatch;
        }
        if (left.len < record_header_len) return error.MalformedBatch;
        const key_len: u64 = readU32(left[8..12]);
        const value_len: u64 = readU32(left[12..16]);
        if (record_header_len + key_len + value_len > left.len) return error.MalformedBatch;
        const key_end = record_header_len + @as(usize, @intCast(key_len));
        const value_end = key_end + @as(usize, @intCast(value_len));
        self.at += value_end;
        self.remaining -= 1;
        return .{
            .timestamp = std.mem.readInt(i64, left[0..8], .little),
            .key = left[record_header_len..key_end],
            .value = left[key_end..value_end],
        };
    }
};

/// Builds an output batch (port 0) in memory from an allocator, reused from call to call.
pub const BatchWriter = struct {
    bytes: std.ArrayList(u8) = .empty,
    count: u32 = 0,

    /// Starts a new, empty batch, keeping the memory of the last one.
    pub fn reset(self: *BatchWriter, gpa: std.mem.Allocator) std.mem.Allocator.Error!void {
        self.bytes.clearRetainingCapacity();
        self.count = 0;
        try self.bytes.appendNTimes(gpa, 0, batch_header_len);
    }

    /// Appends one record.
    pub fn push(
        self: *BatchWriter,
        gpa: std.mem.Allocator,
        timestamp: i64,
        key: []const u8,
        value: []const u8,
    ) std.mem.Allocator.Error!void {
        if (key.len > std.math.maxInt(u32) or value.len > std.math.maxInt(u32))
            return error.OutOfMemory;
        const dst = try self.bytes.addManyAsSlice(gpa, record_header_len + key.len + value.len);
        std.mem.writeInt(i64, dst[0..8], timestamp, .little);
        writeU32(dst[8..12], @intCast(key.len));
        writeU32(dst[12..16], @intCast(value.len));
        @memcpy(dst[record_header_len..][0..key.len], key);
        @memcpy(dst[record_header_len + key.len ..], value);
        self.count += 1;
    }

    /// The batch: its header says how many records were pushed.
    pub fn finish(self: *BatchWriter) []const u8 {
        writeU32(self.bytes.items[0..4], self.count);
        writeU32(self.bytes.items[4..8], 0);
        return self.bytes.items;
    }
};

/// Reads a little-endian `u32` from 4 bytes at any alignment.
pub fn readU32(bytes: *const [4]u8) u32 {
    return std.mem.readInt(u32, bytes, .little);
}

/// Writes a little-endian `u32` to 4 bytes at any alignment.
pub fn writeU32(bytes: *[4]u8, value: u32) void {
    std.mem.writeInt(u32, bytes, value, .little);
}
