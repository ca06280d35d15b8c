//! `flaky`: a pass-through operator that fails once, for failover tests.
//!
//! Every input record is emitted unchanged. With the config `fail_at=<timestamp>`, the operator
//! panics when it meets a record with that timestamp — unless the instance was restored from a
//! checkpoint. So a job fails once at that record, restarts from its latest checkpoint (which
//! restores every operator instance) and then runs through: a guest trap injected into a running
//! job, with failover by the restart strategy.
//!
//! With the config `echo_after=<ms>` it never fails; instead its first record sets a
//! processing-time timer that many milliseconds later, and when the timer fires it emits one
//! record `echo` → `fired`: a processing-time timer the host must fire, for tests of where the
//! host keeps and fires them.
//!
//! Its state is empty; the only thing `restore` does is remember that it was called. (The host
//! calls `restore` for every task of a restored checkpoint, even when the saved state is empty.)
//! A restart that finds no completed checkpoint starts fresh, and then fails again.

use weir_sdk::{Batch, Context, Error, FiredTimers, Operator, Output, Result, State, TimeDomain};

/// The `flaky` operator.
#[derive(Debug, Default)]
pub struct Flaky {
    /// The timestamp of the record that makes a fresh instance panic; `None` = never.
    fail_at: Option<i64>,
    /// Whether this instance was restored from a checkpoint.
    restored: bool,
    /// With `echo_after`: how long after the first record the echo comes, until it is set.
    echo_after: Option<i64>,
}

/// Parses the config: empty, `fail_at=<timestamp>` or `echo_after=<ms>`.
fn parse_config(ctx: &Context) -> Result<Flaky> {
    let config = ctx.config_str()?.trim();
    let mut flaky = Flaky::default();
    if config.is_empty() {
        return Ok(flaky);
    }
    let (key, value) = config.split_once('=').unwrap_or((config, ""));
    let number = || -> Result<i64> {
        value.parse().map_err(|e| {
            Error::msg(format!(
                "flaky: `{key}` must be an integer, found {value:?}: {e}"
            ))
        })
    };
    match key {
        "fail_at" => flaky.fail_at = Some(number()?),
        "echo_after" => flaky.echo_after = Some(number()?),
        _ => {
            return Err(Error::msg(format!(
                "flaky: unknown config {config:?}: expected `fail_at=<timestamp>` or \
                 `echo_after=<ms>`"
            )));
        }
    }
    Ok(flaky)
}

impl Operator for Flaky {
    fn init(ctx: &Context) -> Result<Self> {
        parse_config(ctx)
    }

    fn on_timers(&mut self, timers: &FiredTimers<'_>, out: &mut Output) -> Result<()> {
        for timer in timers.iter() {
            out.emit(b"echo", b"fired", timer.timestamp);
        }
        Ok(())
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        if let Some(after) = self.echo_after.take() {
            let at = out.processing_time() + after;
            out.set_timer(TimeDomain::Processing, at, b"echo");
        }
        for record in input {
            if !self.restored && self.fail_at == Some(record.timestamp) {
                panic!("flaky: injected failure at timestamp {}", record.timestamp);
            }
            out.emit_record(&record);
        }
        Ok(())
    }
}

impl State for Flaky {
    fn snapshot(&self) -> Result<Vec<u8>> {
        Ok(Vec::new())
    }

    fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
        self.restored = true;
        Ok(())
    }
}

weir_sdk::export!(Flaky);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{Harness, assert_records_eq, record};

    use super::*;

    #[test]
    fn passes_records_through_unchanged() -> Result<()> {
        let mut harness = Harness::<Flaky>::new(Context::new("flaky"))?;
        let input = [record("a", "x", 1), record("", "y", 2)];
        assert_records_eq(&harness.push_on(0, &input)?, &input);
        Ok(())
    }

    #[test]
    #[should_panic(expected = "flaky: injected failure at timestamp 7")]
    fn panics_at_the_chosen_timestamp_when_fresh() {
        let ctx = Context::new("flaky").with_config("fail_at=7");
        let mut harness = Harness::<Flaky>::new(ctx).unwrap();
        harness.push("k", "v", 6).unwrap();
        let _ = harness.push("k", "v", 7);
    }

    #[test]
    fn passes_the_chosen_timestamp_once_restored() -> Result<()> {
        let ctx = Context::new("flaky").with_config("fail_at=7");
        let mut harness = Harness::<Flaky>::new(ctx)?;
        harness.snapshot_and_restore()?;
        assert_records_eq(&harness.push("k", "v", 7)?, &[record("k", "v", 7)]);
        Ok(())
    }

    #[test]
    fn echoes_once_when_its_processing_time_timer_fires() -> Result<()> {
        let ctx = Context::new("flaky").with_config("echo_after=50");
        let mut harness = Harness::<Flaky>::new(ctx)?;
        harness.push("k", "v", 1)?;
        harness.push("k", "v", 2)?;
        assert!(harness.advance_processing_time(49)?.is_empty());
        assert_records_eq(
            &harness.advance_processing_time(50)?,
            &[record("echo", "fired", 50)],
        );
        Ok(())
    }

    #[test]
    fn refuses_an_unknown_config() {
        let err = Flaky::init(&Context::new("flaky").with_config("fail=3")).unwrap_err();
        assert!(
            err.message().contains("expected `fail_at=<timestamp>`"),
            "{err}"
        );
    }
}
