;; count.wat — a stateful keyed running count, written by hand against docs/ABI.md.
;;
;; For every input record the operator adds one to the count of the record's key and emits a
;; record with the same key and timestamp whose value is the updated count as decimal ASCII
;; text ("1", "2", ...). The counts survive checkpoints: weir_snapshot saves the table of
;; counts and weir_restore loads it back.
;;
;; Memory layout (one linear memory, exported as `memory`):
;;
;;   0      .. 16       unused, so that no buffer ever starts at address 0
;;   16     .. 48       scratch: the digits of a count, written backwards
;;   64     .. 80       scratch: the snapshot header, built by weir_snapshot
;;   1024   .. 1400     the fail messages (data segments below)
;;   65536  .. $table_end
;;                      the table of counts: entries packed one after another, each
;;                        0   4  key_len  u32
;;                        4   8  count    u64
;;                        12  .. key_len bytes of key
;;                      looked up by linear scan (fine for an example; a real operator
;;                      would hash)
;;   $table_end + len .. the buffer weir_alloc hands to the host (input batch or snapshot),
;;                      then right after it the output batch being built.
;;
;; Why the buffer starts `len` bytes past the end of the table: while weir_process reads
;; the input batch, new keys are appended to the table. A record of the input takes
;; 16 + key_len + value_len bytes and adds at most 12 + key_len bytes to the table, so the
;; table can grow by less than `len` bytes during the call and never reaches the buffer.
;; The output batch after the buffer is at most 2.25 * len + 8 bytes (each record's value
;; becomes at most 20 digits); weir_alloc makes room for 3 * len + 16.
;;
;; Snapshot format (little-endian):
;;   0   4  magic    "WCNT"
;;   4   4  version  1
;;   8   4  entries  number of table entries
;;   12  4  table_len
;;   16  .. the table bytes, exactly as laid out in memory above
(module
  ;; The host's imports (docs/ABI.md §4).
  (import "weir" "emit" (func $emit (param i32 i32)))
  (import "weir" "save_state" (func $save_state (param i32 i32)))
  (import "weir" "fail" (func $fail (param i32 i32)))

  ;; Two pages: page 0 for scratch and messages, page 1 for the start of the table.
  (memory (export "memory") 2)

  ;; Where the table starts, and where it ends (one past the last entry).
  (global $TABLE_BASE i32 (i32.const 65536))
  (global $table_end (mut i32) (i32.const 65536))
  ;; How many entries the table holds.
  (global $entries (mut i32) (i32.const 0))

  ;; The snapshot magic "WCNT", as a little-endian u32.
  (global $MAGIC i32 (i32.const 0x544e4357))

  ;; Fail messages: (offset, length) pairs are repeated where they are used.
  (data (i32.const 1024) "count: malformed input batch")                        ;; 28
  (data (i32.const 1056) "count: out of memory")                                ;; 20
  (data (i32.const 1088) "count: snapshot is shorter than its 16-byte header")  ;; 50
  (data (i32.const 1152) "count: not a count snapshot (bad magic)")             ;; 39
  (data (i32.const 1200) "count: unsupported count snapshot version")           ;; 41
  (data (i32.const 1248) "count: snapshot length does not match its header")    ;; 48
  (data (i32.const 1312) "count: snapshot entries are corrupt")                 ;; 35

  ;; The ABI version this module was written for.
  (func (export "weir_abi_version") (result i32)
    (i32.const 1))

  ;; Fails the current call with the message at ptr..ptr+len. `fail` does not return; the
  ;; `unreachable` only tells the validator so.
  (func $abort (param $ptr i32) (param $len i32)
    (call $fail (local.get $ptr) (local.get $len))
    (unreachable))

  ;; Grows the memory so that addresses below `end` exist. Returns 1 on success, 0 when
  ;; the memory cannot grow that far (past 4 GiB, or refused).
  (func $ensure (param $end i64) (result i32)
    (local $pages i64)
    (if (i64.gt_u (local.get $end) (i64.const 0x100000000))
      (then (return (i32.const 0))))
    ;; pages needed = ceil(end / 65536)
    (local.set $pages
      (i64.shr_u (i64.add (local.get $end) (i64.const 65535)) (i64.const 16)))
    (if (i64.gt_u (local.get $pages) (i64.extend_i32_u (memory.size)))
      (then
        (if (i32.eq
              (memory.grow
                (i32.sub (i32.wrap_i64 (local.get $pages)) (memory.size)))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 1))

  ;; Returns a buffer of `len` bytes for the host, placed `len` bytes past the end of the
  ;; table and followed by room for the output batch (see the layout above); 0 if the
  ;; memory cannot hold it. The host always consumes the buffer in its next call, so the
  ;; same region is reused every time.
  (func (export "weir_alloc") (param $len i32) (result i32)
    (local $base i64)
    (local.set $base
      (i64.add (i64.extend_i32_u (global.get $table_end)) (i64.extend_i32_u (local.get $len))))
    ;; end = base + len (the buffer) + 3 * len + 16 (the output)
    (if (i32.eqz
          (call $ensure
            (i64.add
              (i64.add (local.get $base) (i64.mul (i64.extend_i32_u (local.get $len)) (i64.const 4)))
              (i64.const 16))))
      (then (return (i32.const 0))))
    (i32.wrap_i64 (local.get $base)))

  ;; Whether the `len` bytes at `a` equal the `len` bytes at `b`: 1 or 0.
  (func $bytes_equal (param $a i32) (param $b i32) (param $len i32) (result i32)
    (local $i i32)
    (block $differ
      (loop $next
        (if (i32.ge_u (local.get $i) (local.get $len))
          (then (return (i32.const 1))))
        (br_if $differ
          (i32.ne
            (i32.load8_u (i32.add (local.get $a) (local.get $i)))
            (i32.load8_u (i32.add (local.get $b) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (i32.const 0))

  ;; Returns the table entry for the key at key..key+key_len, appending a new entry with
  ;; count 0 when the key is not in the table yet.
  (func $entry (param $key i32) (param $key_len i32) (result i32)
    (local $e i32)
    ;; Linear scan: entry e holds key_len at e, the key at e + 12.
    (local.set $e (global.get $TABLE_BASE))
    (block $absent
      (loop $next
        (br_if $absent (i32.ge_u (local.get $e) (global.get $table_end)))
        (if (i32.and
              (i32.eq (i32.load (local.get $e)) (local.get $key_len))
              (call $bytes_equal
                (i32.add (local.get $e) (i32.const 12)) (local.get $key) (local.get $key_len)))
          (then (return (local.get $e))))
        (local.set $e
          (i32.add (local.get $e) (i32.add (i32.const 12) (i32.load (local.get $e)))))
        (br $next)))
    ;; Not found: append an entry at the end of the table.
    (local.set $e (global.get $table_end))
    (if (i32.eqz
          (call $ensure
            (i64.add
              (i64.extend_i32_u (local.get $e))
              (i64.add (i64.const 12) (i64.extend_i32_u (local.get $key_len))))))
      (then (call $abort (i32.const 1056) (i32.const 20))))
    (i32.store (local.get $e) (local.get $key_len))
    (i64.store offset=4 (local.get $e) (i64.const 0))
    (memory.copy (i32.add (local.get $e) (i32.const 12)) (local.get $key) (local.get $key_len))
    (global.set $table_end
      (i32.add (local.get $e) (i32.add (i32.const 12) (local.get $key_len))))
    (global.set $entries (i32.add (global.get $entries) (i32.const 1)))
    (local.get $e))

  ;; Writes `value` as decimal ASCII digits at `dst` and returns how many bytes it wrote
  ;; (1 to 20). The digits are first produced backwards into the scratch area 16..48.
  (func $write_decimal (param $value i64) (param $dst i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 48))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i64.store8 (local.get $p)
        (i64.add (i64.const 48) (i64.rem_u (local.get $value) (i64.const 10))))
      (local.set $value (i64.div_u (local.get $value) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $value) (i64.const 0))))
    (memory.copy (local.get $dst) (local.get $p) (i32.sub (i32.const 48) (local.get $p)))
    (i32.sub (i32.const 48) (local.get $p)))

  ;; Counts every record of the input batch at ptr..ptr+len and emits one output batch
  ;; holding, for each input record in order, (key, updated count as text, timestamp).
  ;; An empty input emits nothing.
  (func (export "weir_process") (param $ptr i32) (param $len i32) (result i32)
    (local $n i32)        ;; records in the batch
    (local $i i32)        ;; records done
    (local $cursor i32)   ;; next input record
    (local $end i32)      ;; end of the input batch
    (local $out i32)      ;; start of the output batch
    (local $w i32)        ;; next output byte
    (local $key_len i32)
    (local $e i32)        ;; the key's table entry
    (local $count i64)
    (local $digits i32)
    (local.set $end (i32.add (local.get $ptr) (local.get $len)))
    (if (i32.lt_u (local.get $len) (i32.const 8))
      (then (call $abort (i32.const 1024) (i32.const 28))))
    (local.set $n (i32.load (local.get $ptr)))
    (local.set $cursor (i32.add (local.get $ptr) (i32.const 8)))
    (local.set $out (local.get $end))
    (local.set $w (i32.add (local.get $out) (i32.const 8)))
    (block $done
      (loop $record
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        ;; The record header (timestamp, key_len, value_len) and its bytes must fit in the
        ;; batch; the host sends well-formed batches, this only keeps a bug from reading on.
        (if (i64.gt_u
              (i64.add
                (i64.add (i64.extend_i32_u (local.get $cursor)) (i64.const 16))
                (i64.add
                  (i64.extend_i32_u (i32.load offset=8 (local.get $cursor)))
                  (i64.extend_i32_u (i32.load offset=12 (local.get $cursor)))))
              (i64.extend_i32_u (local.get $end)))
          (then (call $abort (i32.const 1024) (i32.const 28))))
        (local.set $key_len (i32.load offset=8 (local.get $cursor)))
        ;; Count the key.
        (local.set $e (call $entry (i32.add (local.get $cursor) (i32.const 16)) (local.get $key_len)))
        (local.set $count (i64.add (i64.load offset=4 (local.get $e)) (i64.const 1)))
        (i64.store offset=4 (local.get $e) (local.get $count))
        ;; Make room for the output record: header, key, at most 20 digits.
        (if (i32.eqz
              (call $ensure
                (i64.add
                  (i64.extend_i32_u (local.get $w))
                  (i64.add (i64.const 36) (i64.extend_i32_u (local.get $key_len))))))
          (then (call $abort (i32.const 1056) (i32.const 20))))
        ;; Output record: timestamp, key_len, value_len (filled in below), key, digits.
        (i64.store (local.get $w) (i64.load (local.get $cursor)))
        (i32.store offset=8 (local.get $w) (local.get $key_len))
        (memory.copy
          (i32.add (local.get $w) (i32.const 16))
          (i32.add (local.get $cursor) (i32.const 16))
          (local.get $key_len))
        (local.set $digits
          (call $write_decimal
            (local.get $count)
            (i32.add (local.get $w) (i32.add (i32.const 16) (local.get $key_len)))))
        (i32.store offset=12 (local.get $w) (local.get $digits))
        (local.set $w
          (i32.add (local.get $w)
            (i32.add (i32.const 16) (i32.add (local.get $key_len) (local.get $digits)))))
        ;; Next input record: skip its header, key and value.
        (local.set $cursor
          (i32.add (local.get $cursor)
            (i32.add (i32.const 16)
              (i32.add (local.get $key_len) (i32.load offset=12 (local.get $cursor))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $record)))
    ;; Bytes left over after the announced records make the batch malformed.
    (if (i32.ne (local.get $cursor) (local.get $end))
      (then (call $abort (i32.const 1024) (i32.const 28))))
    (if (i32.ne (local.get $n) (i32.const 0))
      (then
        ;; Output header: record count, port 0.
        (i32.store (local.get $out) (local.get $n))
        (i32.store offset=4 (local.get $out) (i32.const 0))
        (call $emit (local.get $out) (i32.sub (local.get $w) (local.get $out)))))
    (i32.const 0))

  ;; Saves the state: the 16-byte header, then the table bytes as they are in memory.
  (func (export "weir_snapshot") (param $checkpoint_id i64) (result i32)
    (local $table_len i32)
    (local.set $table_len (i32.sub (global.get $table_end) (global.get $TABLE_BASE)))
    (i32.store (i32.const 64) (global.get $MAGIC))
    (i32.store (i32.const 68) (i32.const 1))
    (i32.store (i32.const 72) (global.get $entries))
    (i32.store (i32.const 76) (local.get $table_len))
    (call $save_state (i32.const 64) (i32.const 16))
    (if (local.get $table_len)
      (then (call $save_state (global.get $TABLE_BASE) (local.get $table_len))))
    (i32.const 0))

  ;; Replaces the table with a snapshot's (ptr..ptr+len), after checking the header and
  ;; walking every entry; fails with a message on anything else. An empty state (len 0)
  ;; means "no counts yet".
  (func (export "weir_restore") (param $ptr i32) (param $len i32) (result i32)
    (local $table_len i32)
    (local $e i64)        ;; walks the snapshot's entries (64-bit: no overflow)
    (local $end i64)
    (local $k i32)        ;; entries seen
    (if (i32.eqz (local.get $len))
      (then
        (global.set $table_end (global.get $TABLE_BASE))
        (global.set $entries (i32.const 0))
        (return (i32.const 0))))
    (if (i32.lt_u (local.get $len) (i32.const 16))
      (then (call $abort (i32.const 1088) (i32.const 50))))
    (if (i32.ne (i32.load (local.get $ptr)) (global.get $MAGIC))
      (then (call $abort (i32.const 1152) (i32.const 39))))
    (if (i32.ne (i32.load offset=4 (local.get $ptr)) (i32.const 1))
      (then (call $abort (i32.const 1200) (i32.const 41))))
    (local.set $table_len (i32.load offset=12 (local.get $ptr)))
    (if (i32.ne (local.get $table_len) (i32.sub (local.get $len) (i32.const 16)))
      (then (call $abort (i32.const 1248) (i32.const 48))))
    ;; Every entry must fit, the last one must end exactly at the end, and their number
    ;; must be the header's.
    (local.set $e (i64.extend_i32_u (i32.add (local.get $ptr) (i32.const 16))))
    (local.set $end (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len))))
    (block $walked
      (loop $next
        (br_if $walked (i64.ge_u (local.get $e) (local.get $end)))
        (if (i64.gt_u (i64.add (local.get $e) (i64.const 12)) (local.get $end))
          (then (call $abort (i32.const 1312) (i32.const 35))))
        (local.set $e
          (i64.add (local.get $e)
            (i64.add (i64.const 12)
              (i64.extend_i32_u (i32.load (i32.wrap_i64 (local.get $e)))))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $next)))
    (if (i32.or
          (i64.ne (local.get $e) (local.get $end))
          (i32.ne (local.get $k) (i32.load offset=8 (local.get $ptr))))
      (then (call $abort (i32.const 1312) (i32.const 35))))
    ;; Copy the table into place (the snapshot lies above it; memory.copy allows overlap).
    (if (i32.eqz
          (call $ensure
            (i64.add (i64.extend_i32_u (global.get $TABLE_BASE)) (i64.extend_i32_u (local.get $table_len)))))
      (then (call $abort (i32.const 1056) (i32.const 20))))
    (memory.copy
      (global.get $TABLE_BASE) (i32.add (local.get $ptr) (i32.const 16)) (local.get $table_len))
    (global.set $table_end (i32.add (global.get $TABLE_BASE) (local.get $table_len)))
    (global.set $entries (local.get $k))
    (i32.const 0)))
