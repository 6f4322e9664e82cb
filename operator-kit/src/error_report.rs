//! One line for an error and its causes, each said once. Libraries disagree on whether an error's
//! message already includes its cause (kube's and ours often do, others do not), so printing the
//! whole chain (`{:#}`) can repeat a cause several times. [`one_line`] walks the chain and adds a
//! cause only when the line does not already say it.

use std::error::Error;

/// `error`, then each cause not already part of the line, joined by `": "`.
#[must_use]
pub fn one_line(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Inner {
        #[error("No such file or directory (os error 2)")]
        Missing,
    }

    #[derive(Debug, thiserror::Error)]
    enum Repeats {
        /// Says its cause and also exposes it as the source.
        #[error("cannot read /x: {source}")]
        Read { source: Inner },
    }

    #[derive(Debug, thiserror::Error)]
    enum Quiet {
        /// Leaves its cause to the chain.
        #[error("cannot start")]
        Start(#[source] Repeats),
    }

    #[test]
    fn a_cause_the_message_already_says_is_not_repeated_and_a_silent_one_is_added() {
        let repeats = Repeats::Read { source: Inner::Missing };
        assert_eq!(
            one_line(&repeats),
            "cannot read /x: No such file or directory (os error 2)"
        );
        let quiet = Quiet::Start(Repeats::Read { source: Inner::Missing });
        assert_eq!(
            one_line(&quiet),
            "cannot start: cannot read /x: No such file or directory (os error 2)"
        );
        let wrapped = anyhow::Error::from(quiet).context("virt-launcher run");
        assert_eq!(
            one_line(wrapped.as_ref()),
            "virt-launcher run: cannot start: cannot read /x: No such file or directory (os error 2)"
        );
    }
}
