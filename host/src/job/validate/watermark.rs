//! The rules of a source's `watermark` table (docs/JOB.md, "Watermarks"), and the refusal of
//! one on an operator or a sink.

use toml::Spanned;

use super::{Validator, vertex_key};
use crate::job::error::{JobError, Problem};
use crate::job::spec::WatermarkSpec;
use crate::job::units::DURATION_FORMS;
use crate::job::watermark::WatermarkStrategy;

impl Validator<'_> {
    /// The `watermark` table of source `source`.
    pub(super) fn watermark(
        &self,
        spec: &WatermarkSpec,
        source: &str,
    ) -> Result<WatermarkStrategy, JobError> {
        let key = |k: &str| vertex_key(&format!("watermark.{k}"), "source", source);
        let mut strategy = WatermarkStrategy::default();
        if let Some(value) = &spec.out_of_orderness {
            let text = self.duration_text(value, key("out_of_orderness"), DURATION_FORMS)?;
            strategy.out_of_orderness =
                self.bounded_duration(&text, &key("out_of_orderness"), DURATION_FORMS)?;
        }
        if let Some(value) = &spec.idle_timeout {
            let forms = format!("\"off\" or {DURATION_FORMS}");
            let text = self.duration_text(value, key("idle_timeout"), &forms)?;
            strategy.idle_timeout = self.duration_or_off(
                &text,
                &key("idle_timeout"),
                "a duration above zero, e.g. \"10s\", or \"off\" (then an idle split holds the \
                 watermark back)",
            )?;
        }
        if let Some(value) = &spec.interval {
            let text = self.duration_text(value, key("interval"), DURATION_FORMS)?;
            let interval = self.bounded_duration(&text, &key("interval"), DURATION_FORMS)?;
            strategy.interval = self.above_zero(
                &text,
                interval,
                key("interval"),
                "a duration above zero, e.g. \"200ms\" (how often the source emits a watermark)",
            )?;
        }
        Ok(strategy)
    }

    /// Refuses a `watermark` on an operator or a sink: only sources make watermarks.
    pub(super) fn no_watermark(
        &self,
        watermark: Option<&Spanned<toml::Value>>,
        kind: &'static str,
        vertex: &str,
    ) -> Result<(), JobError> {
        let Some(watermark) = watermark else {
            return Ok(());
        };
        Err(self.error(
            watermark.span(),
            Problem::WatermarkNotOnSource {
                kind,
                vertex: vertex.to_owned(),
            },
        ))
    }

    /// A duration's text; anything but a string is refused with the forms it may take.
    fn duration_text(
        &self,
        value: &Spanned<toml::Value>,
        key: String,
        forms: &str,
    ) -> Result<Spanned<String>, JobError> {
        match value.get_ref() {
            toml::Value::String(text) => Ok(Spanned::new(value.span(), text.clone())),
            other => Err(self.bad_value(value.span(), key, other.to_string(), forms)),
        }
    }
}
