use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Operator, Output, Result, bail};

/// Drops records whose value is shorter than `min_len` bytes (the job file's `config`,
/// 3 when empty), and counts what it dropped.
#[derive(Serialize, Deserialize)]
pub struct MinLength {
    pub min_len: usize,
    pub dropped: u64,
}

impl Operator for MinLength {
    fn init(ctx: &Context) -> Result<Self> {
        let config = ctx.config_str()?.trim();
        let min_len = match config {
            "" => 3,
            text => match text.parse() {
                Ok(n) => n,
                // An `Err` fails the operator: the job's log names it and shows this message.
                Err(_) => bail!("config `{text}` is not a length: write a number, e.g. `3`"),
            },
        };
        Ok(MinLength {
            min_len,
            dropped: 0,
        })
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        for record in input {
            if record.value.len() >= self.min_len {
                out.emit_record(&record);
            } else {
                self.dropped += 1;
            }
        }
        Ok(())
    }
}

weir_sdk::export!(MinLength);
