//! Tests of event time in the wasm layer (`docs/ABI.md` §15): timers the host keeps and fires
//! in order, in batches and rounds; watermark notices; side outputs; and the failures of each
//! import, through small WAT guests.

use std::time::Duration;

use weir_abi::{Batch, BatchBuilder, TimeDomain, Timers};

use super::*;

/// A guest exercising every time import. `weir_process` looks at the first record of its
/// batch: a value of 2 bytes deletes the event timer (timestamp, key), 1 byte sets a
/// processing-time timer, any other length an event-time timer; then the whole batch goes to
/// the side output `side`. `weir_on_timers` emits the fired timers as they came (port set to
/// 0); `weir_on_watermark` emits one record whose timestamp is `current_time(0)`.
const TIMERS: &str = r#"(module
  (import "weir" "emit" (func $emit (param i32 i32)))
  (import "weir" "emit_to" (func $emit_to (param i32 i32 i32 i32)))
  (import "weir" "timer_set" (func $timer_set (param i32 i64 i32 i32)))
  (import "weir" "timer_delete" (func $timer_delete (param i32 i64 i32 i32)))
  (import "weir" "current_time" (func $current_time (param i32) (result i64)))
  (memory (export "memory") 2)
  (data (i32.const 0) "side")
  (data (i32.const 64) "\01\00\00\00\00\00\00\00")
  (func (export "weir_abi_version") (result i32) (i32.const 1))
  (func (export "weir_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weir_process") (param $p i32) (param $l i32) (result i32)
    (local $ts i64) (local $klen i32) (local $vlen i32)
    (local.set $ts (i64.load offset=8 (local.get $p)))
    (local.set $klen (i32.load offset=16 (local.get $p)))
    (local.set $vlen (i32.load offset=20 (local.get $p)))
    (if (i32.eq (local.get $vlen) (i32.const 2))
      (then (call $timer_delete (i32.const 0) (local.get $ts)
              (i32.add (local.get $p) (i32.const 24)) (local.get $klen)))
      (else (call $timer_set (i32.eq (local.get $vlen) (i32.const 1)) (local.get $ts)
              (i32.add (local.get $p) (i32.const 24)) (local.get $klen))))
    (call $emit_to (i32.const 0) (i32.const 4) (local.get $p) (local.get $l))
    (i32.const 0))
  (func (export "weir_on_timers") (param $p i32) (param $l i32) (result i32)
    (i32.store offset=4 (local.get $p) (i32.const 0))
    (call $emit (local.get $p) (local.get $l))
    (i32.const 0))
  (func (export "weir_on_watermark") (param $w i64) (result i32)
    (i64.store (i32.const 72) (call $current_time (i32.const 0)))
    (i64.store (i32.const 80) (i64.const 0))
    (call $emit (i32.const 64) (i32.const 24))
    (i32.const 0)))"#;

fn limits() -> GuestLimits {
    GuestLimits {
        call_timeout: Duration::from_secs(5),
        ..GuestLimits::default()
    }
}

fn load_with(source: &str, limits: GuestLimits) -> Result<OperatorModule, ModuleError> {
    let options = LoadOptions {
        limits,
        ..LoadOptions::default()
    };
    let source = ModuleSource::bytes("time.wat", source.as_bytes());
    OperatorModule::load(&WasmEngine::new().unwrap(), source, options)
}

fn start(source: &str) -> GuestInstance {
    start_with(source, limits())
}

fn start_with(source: &str, limits: GuestLimits) -> GuestInstance {
    let context = InstanceContext::single("windows");
    load_with(source, limits)
        .unwrap()
        .instantiate(context, b"")
        .unwrap()
}

/// Runs `weir_process` on a one-record batch.
fn record(guest: &mut GuestInstance, key: &str, value: &str, timestamp: i64) {
    let mut batch = BatchBuilder::new(0);
    batch.push(key.as_bytes(), value.as_bytes(), timestamp);
    guest.process(&batch.into_bytes()).unwrap();
}

/// `(key, timestamp)` of every record of `batches`.
fn keys(batches: &[Vec<u8>]) -> Vec<(String, i64)> {
    batches
        .iter()
        .flat_map(|bytes| {
            Batch::decode(bytes)
                .unwrap()
                .iter()
                .map(|r| (String::from_utf8(r.key.to_vec()).unwrap(), r.timestamp))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Advances `guest`'s watermark, collecting each call's main output as one entry.
fn advance(guest: &mut GuestInstance, watermark: i64) -> Vec<Vec<(String, i64)>> {
    let mut calls = Vec::new();
    guest
        .advance_watermark(watermark, |output: GuestOutput| {
            calls.push(keys(&output.main));
            Ok::<(), GuestError>(())
        })
        .unwrap();
    calls
}

fn k(key: &str, ts: i64) -> (String, i64) {
    (key.to_string(), ts)
}

#[test]
fn timers_fire_once_in_timestamp_then_key_order_before_the_watermark_notice() {
    let mut guest = start(TIMERS);
    assert_eq!(guest.time().watermark, i64::MIN);
    for (key, ts) in [("b", 10), ("a", 10), ("c", 5), ("a", 10), ("d", 30)] {
        record(&mut guest, key, "v-long", ts);
    }
    assert_eq!(guest.time().pending(), 4, "the same timer set twice is one");
    assert_eq!(
        advance(&mut guest, 10),
        [vec![k("c", 5), k("a", 10), k("b", 10)], vec![k("", 10)]],
        "the due timers in one batch, then on_watermark seeing the new watermark"
    );
    assert_eq!(
        advance(&mut guest, 9),
        Vec::<Vec<_>>::new(),
        "time never goes back"
    );
    assert_eq!(advance(&mut guest, 10), Vec::<Vec<_>>::new());
    record(&mut guest, "d", "xx", 30);
    assert_eq!(
        advance(&mut guest, 100),
        [vec![k("", 100)]],
        "the deleted timer does not fire"
    );
    assert_eq!(guest.time().pending(), 0);
}

#[test]
fn a_timer_set_at_or_before_the_watermark_fires_at_the_next_advance() {
    let mut guest = start(TIMERS);
    advance(&mut guest, 50);
    record(&mut guest, "late", "v-long", 20);
    assert_eq!(
        advance(&mut guest, 51),
        [vec![k("late", 20)], vec![k("", 51)]]
    );
}

#[test]
fn many_due_timers_fire_in_batches_of_at_most_1024() {
    let mut guest = start(TIMERS);
    for i in 0..2_500 {
        record(&mut guest, &format!("{i:05}"), "v-long", i);
    }
    let calls = advance(&mut guest, 10_000);
    let sizes: Vec<usize> = calls.iter().map(Vec::len).collect();
    assert_eq!(sizes, [1024, 1024, 452, 1]);
    let fired: Vec<i64> = calls[..3].iter().flatten().map(|(_, ts)| *ts).collect();
    assert_eq!(fired, (0..2_500).collect::<Vec<_>>());
}

#[test]
fn processing_time_timers_fire_by_the_clock_they_are_given() {
    let mut guest = start(TIMERS);
    record(&mut guest, "p", "v", 1_000);
    assert_eq!(guest.next_processing_timer(), Some(1_000));
    assert_eq!(advance(&mut guest, i64::MAX - 1).len(), 1, "not event time");
    let mut fired = Vec::new();
    let mut fire = |guest: &mut GuestInstance, now| {
        guest
            .fire_processing_timers(now, |output: GuestOutput| {
                fired.extend(keys(&output.main));
                Ok::<(), GuestError>(())
            })
            .unwrap();
    };
    fire(&mut guest, 999);
    fire(&mut guest, 1_000);
    assert_eq!(fired, [k("p", 1_000)]);
    assert_eq!(guest.next_processing_timer(), None);
}

#[test]
fn side_outputs_come_back_by_name_apart_from_the_main_output() {
    let mut guest = start(TIMERS);
    let mut batch = BatchBuilder::new(0);
    batch.push(b"a", b"v-long", 1);
    batch.push(b"b", b"w", 2);
    let input = batch.into_bytes();
    assert!(guest.process(&input).unwrap().is_empty());
    let side = guest.take_side_output();
    assert_eq!(
        side,
        [SideBatch {
            output: "side".into(),
            batch: input
        }]
    );
    assert!(guest.take_side_output().is_empty(), "taken once");
}

#[test]
fn a_guest_that_keeps_setting_due_timers_fails_after_64_rounds() {
    // Every firing sets the first fired timer again: always due.
    let source = TIMERS.replace(
        "(i32.store offset=4 (local.get $p) (i32.const 0))",
        "(call $timer_set (i32.const 0) (i64.load offset=8 (local.get $p))
           (i32.add (local.get $p) (i32.const 24)) (i32.load offset=16 (local.get $p)))",
    );
    let mut guest = start(&source);
    record(&mut guest, "again", "v-long", 1);
    let mut calls = 0;
    let err = guest
        .advance_watermark(5, |_| {
            calls += 1;
            Ok::<(), GuestError>(())
        })
        .unwrap_err();
    assert_eq!(calls, MAX_TIMER_ROUNDS);
    assert!(matches!(
        err.failure,
        GuestFailure::TimerRounds {
            watermark: 5,
            rounds: 64
        }
    ));
    assert_eq!(err.call, "weir_on_timers");
    assert!(
        err.to_string()
            .contains("set a timer after the time it fires at"),
        "{err}"
    );
    assert!(guest.is_poisoned());
}

#[test]
fn timers_past_the_limit_fail_the_call_naming_the_setting() {
    let limits = GuestLimits {
        max_timer_bytes: 2 * Timers::cost(b"0123456789"),
        ..limits()
    };
    let mut guest = start_with(TIMERS, limits);
    record(&mut guest, "0123456789", "v-long", 1);
    record(&mut guest, "0123456789", "v-long", 1);
    record(&mut guest, "0123456789", "v-long", 2);
    let mut batch = BatchBuilder::new(0);
    batch.push(b"0123456789", b"v-long", 3);
    let err = guest.process(&batch.into_bytes()).unwrap_err();
    assert!(
        matches!(err.failure, GuestFailure::TimersTooLarge { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("limits.max_timer_state"), "{err}");
}

#[test]
fn a_module_setting_timers_without_weir_on_timers_is_refused_at_load() {
    let source = TIMERS.replace("\"weir_on_timers\"", "\"not_on_timers\"");
    let err = load_with(&source, limits()).unwrap_err();
    assert!(matches!(err.problem, ModuleProblem::TimersWithoutHandler));
    assert!(err.to_string().contains("export weir_on_timers"), "{err}");
}

#[test]
fn time_imports_misused_fail_the_call_naming_the_import_and_the_rule() {
    // A timer set from weir_finish.
    let finish_sets = TIMERS.replace(
        "(func (export \"weir_on_watermark\")",
        "(func (export \"weir_finish\") (result i32)
           (call $timer_set (i32.const 0) (i64.const 1) (i32.const 0) (i32.const 0))
           (i32.const 0))
         (func (export \"weir_on_watermark\")",
    );
    let err = start(&finish_sets).finish().unwrap_err();
    assert_eq!(
        err.failure.to_string(),
        "guest called `timer_set` during weir_finish; it is allowed only during weir_process, \
         weir_on_timers and weir_on_watermark"
    );
    // Time domain 2.
    let bad_domain = TIMERS.replace(
        "(call $current_time (i32.const 0))",
        "(call $current_time (i32.const 2))",
    );
    let mut guest = start(&bad_domain);
    let err = guest
        .advance_watermark(1, |_| Ok::<(), GuestError>(()))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("`current_time` with time domain 2; the domains are 0"),
        "{err}"
    );
    // An empty side output name.
    let no_name = TIMERS.replace(
        "(call $emit_to (i32.const 0) (i32.const 4)",
        "(call $emit_to (i32.const 0) (i32.const 0)",
    );
    let mut guest = start(&no_name);
    let mut batch = BatchBuilder::new(0);
    batch.push(b"k", b"v-long", 1);
    let err = guest.process(&batch.into_bytes()).unwrap_err();
    assert!(
        matches!(err.failure, GuestFailure::OutputName { len: 0, .. }),
        "{err}"
    );
}

#[test]
fn the_time_survives_a_move_to_a_fresh_instance() {
    let mut first = start(TIMERS);
    record(&mut first, "a", "v-long", 7);
    advance(&mut first, 3);
    let host = std::mem::take(first.host_state());
    let mut second = start(TIMERS);
    *second.host_state() = host;
    assert_eq!(second.time().timers(TimeDomain::Event).len(), 1);
    assert_eq!(advance(&mut second, 7), [vec![k("a", 7)], vec![k("", 7)]]);
}
