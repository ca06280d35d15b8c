//! The rules of a generator source's values (docs/JOB.md, "Generator sources"): `values`, with
//! `min` and `max` for integers.

use super::{Validator, first_present, span_of, vertex_key};
use crate::job::error::JobError;
use crate::job::graph::GeneratorValues;
use crate::job::spec::SourceSpec;

/// Generator default `min` of `values = "integers"` (docs/JOB.md).
const DEFAULT_GENERATOR_MIN: i64 = 0;
/// Generator default `max` of `values = "integers"` (docs/JOB.md).
const DEFAULT_GENERATOR_MAX: i64 = 99;

impl Validator<'_> {
    /// A generator's `values`, with `min` and `max` for integers.
    pub(super) fn generator_values(
        &self,
        spec: &SourceSpec,
        name: &str,
    ) -> Result<GeneratorValues, JobError> {
        let key = |k: &str| vertex_key(k, "source", name);
        let word = spec
            .values
            .as_ref()
            .map_or("letters", |v| v.get_ref().as_str());
        match word {
            "letters" => {
                let bounds = [("min", span_of(&spec.min)), ("max", span_of(&spec.max))];
                if let Some((k, span)) = first_present(bounds) {
                    return Err(self.needs_setting(
                        span,
                        key(k),
                        "`values = \"letters\"`",
                        format!(
                            "letters have no range; set `values = \"integers\"` for \
                             integers from `min` to `max`, or remove `{k}`"
                        ),
                    ));
                }
                Ok(GeneratorValues::Letters)
            }
            "integers" => {
                if let Some(size) = &spec.value_size {
                    return Err(self.needs_setting(
                        size.span(),
                        key("value_size"),
                        "`values = \"integers\"`",
                        "an integer takes as many bytes as its decimal digits; remove \
                         `value_size`, or set `values = \"letters\"`",
                    ));
                }
                let min = spec
                    .min
                    .as_ref()
                    .map_or(DEFAULT_GENERATOR_MIN, |m| *m.get_ref());
                let max = spec
                    .max
                    .as_ref()
                    .map_or(DEFAULT_GENERATOR_MAX, |m| *m.get_ref());
                if min > max {
                    let (span, k, found, expected) = if let Some(m) = &spec.max {
                        let expected = format!(
                            "an integer at least `min` ({min}): the range is `min` to `max`, \
                             both included"
                        );
                        (m.span(), "max", max, expected)
                    } else {
                        // The defaults are in order, so `min` was written.
                        let span = span_of(&spec.min).unwrap_or(spec.name.span());
                        let expected = format!(
                            "an integer at most `max` ({max}, its default): set `max` too, or \
                             lower `min`"
                        );
                        (span, "min", min, expected)
                    };
                    return Err(self.bad_value(span, key(k), found.to_string(), expected));
                }
                Ok(GeneratorValues::Integers { min, max })
            }
            other => {
                let values = spec.values.as_ref().expect("a word other than the default");
                Err(self.bad_value(
                    values.span(),
                    key("values"),
                    format!("{other:?}"),
                    "\"letters\" (`value_size` lowercase letters) or \"integers\" (from `min` \
                     to `max`, in decimal)",
                ))
            }
        }
    }
}
