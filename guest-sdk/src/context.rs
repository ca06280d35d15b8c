//! What an operator instance learns about itself when it starts.
//!
//! The host sends an init message (`docs/ABI.md` §6) before anything else; [`Context`] is its
//! owned, decoded form, handed to [`Operator::init`](crate::Operator::init). Tests build one
//! directly with [`Context::new`].

use weir_abi::InitMessage;

use crate::{Error, Result};

/// Who this operator instance is and how the job configured it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// The operator's name in the job file, for messages.
    operator: String,
    /// Which of the operator's instances this is, from 0.
    subtask: u32,
    /// How many instances of the operator run side by side.
    parallelism: u32,
    /// The operator's `config` from the job file, as the job gave it.
    config: Vec<u8>,
}

impl Context {
    /// The context of the only instance (subtask 0 of 1) of `operator`, with an empty config.
    pub fn new(operator: impl Into<String>) -> Self {
        Context {
            operator: operator.into(),
            subtask: 0,
            parallelism: 1,
            config: Vec::new(),
        }
    }

    /// The same context with `config` as the operator's config.
    pub fn with_config(mut self, config: impl Into<Vec<u8>>) -> Self {
        self.config = config.into();
        self
    }

    /// The same context for instance `subtask` of `parallelism` (`subtask < parallelism`, as
    /// the host guarantees; the harness refuses other values the way the init decoder does).
    pub fn with_subtask(mut self, subtask: u32, parallelism: u32) -> Self {
        self.subtask = subtask;
        self.parallelism = parallelism;
        self
    }

    /// The operator's name in the job.
    pub fn operator(&self) -> &str {
        &self.operator
    }

    /// Which instance this is, from 0 to [`parallelism`](Self::parallelism) − 1.
    pub fn subtask(&self) -> u32 {
        self.subtask
    }

    /// How many instances of the operator run.
    pub fn parallelism(&self) -> u32 {
        self.parallelism
    }

    /// The operator's `config` from the job file, as bytes (empty when the job gives none).
    pub fn config(&self) -> &[u8] {
        &self.config
    }

    /// The config as text.
    ///
    /// Fails, naming the operator, when the config is not UTF-8.
    pub fn config_str(&self) -> Result<&str> {
        core::str::from_utf8(&self.config).map_err(|e| {
            Error::msg(format!(
                "the config of operator `{}` must be UTF-8 text: {e}",
                self.operator
            ))
        })
    }

    /// The init message the host would send for this context.
    pub(crate) fn encode_init(&self) -> Vec<u8> {
        InitMessage {
            operator: &self.operator,
            subtask: self.subtask,
            parallelism: self.parallelism,
            config: &self.config,
        }
        .encode()
    }
}

impl From<InitMessage<'_>> for Context {
    fn from(message: InitMessage<'_>) -> Self {
        Context {
            operator: message.operator.to_owned(),
            subtask: message.subtask,
            parallelism: message.parallelism,
            config: message.config.to_vec(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_the_init_message() {
        let ctx = Context::new("count").with_config("k=v").with_subtask(2, 3);
        let bytes = ctx.encode_init();
        assert_eq!(Context::from(InitMessage::decode(&bytes).unwrap()), ctx);
    }

    #[test]
    fn config_str_names_the_operator_when_not_utf8() {
        let ctx = Context::new("split").with_config(vec![0xff, 0x41]);
        let err = ctx.config_str().unwrap_err();
        assert!(
            err.message()
                .starts_with("the config of operator `split` must be UTF-8 text"),
            "{err}"
        );
        assert_eq!(
            Context::new("x").with_config("a b").config_str().unwrap(),
            "a b"
        );
    }
}
