use min_length::MinLength;
use weir_sdk::Context;
use weir_sdk::testing::{Harness, assert_records_eq, assert_restore_preserves_output, record};

#[test]
fn drops_short_values_and_keeps_its_count_through_a_restore() -> weir_sdk::Result<()> {
    let ctx = Context::new("min-length").with_config("2");
    let mut op = Harness::<MinLength>::new(ctx)?;
    assert_records_eq(&op.push("k", "a", 1)?, &[]);
    op.snapshot_and_restore()?; // snapshot, then restore into a fresh instance
    assert_records_eq(&op.push("k", "abc", 2)?, &[record("k", "abc", 2)]);
    assert_eq!(op.operator().dropped, 1);
    Ok(())
}

#[test]
fn a_snapshot_and_restore_every_record_changes_nothing() {
    let input = [
        record("a", "xyz", 1),
        record("b", "x", 2),
        record("c", "xy", 3),
    ];
    assert_restore_preserves_output::<MinLength>(&Context::new("min-length"), &input, 1);
}

#[test]
fn a_config_that_is_not_a_number_fails_init() {
    let ctx = Context::new("min-length").with_config("three");
    let error = Harness::<MinLength>::new(ctx).err().expect("init fails");
    assert!(error.message().contains("not a length"), "{error}");
}
