//! Progress where a person waits, also when the work runs in a child process.
//!
//! A run's load and run bars are indicatif bars on standard error, drawn only on a
//! terminal. `--compare`, `verso demo` and `verso reproduce` run each configuration in a
//! child process of the `verso` binary whose standard error is a pipe to the parent (so
//! the parent can report the child's error), where indicatif would draw nothing. So the
//! parent forwards: when it shows progress itself (not `--quiet`, standard error a
//! terminal), it sets [`PROGRESS_TO_PARENT`] in the child's environment to its terminal's
//! width; the child then draws its bars into a [`ToParent`] "terminal" that sends each
//! drawn line to standard error as one line behind [`MARKER`]; the parent draws those
//! lines on its own bar ([`forward_child_stderr`]) and keeps every other line as the
//! child's own output, for the error it reports if the child fails.
//!
//! Invariants: the child emits progress only when the parent asked for it, so output that
//! is not a terminal stays clean; a progress line never reaches an error message or the
//! parent's standard output.

use std::io::{BufRead, Write};
use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle, TermLike};

/// Set in a child's environment (to the parent's terminal width in columns) when the
/// parent draws the child's progress: the child sends its bars up the pipe.
pub const PROGRESS_TO_PARENT: &str = "VERSO_LAB_PROGRESS_TO_PARENT";

/// What begins a forwarded progress line on the child's standard error (a control
/// character no error message starts with); the rest of the line is what the bar drew,
/// empty when the bar was cleared.
pub const MARKER: &str = "\u{1}verso-progress\t";

/// How often a forwarding child redraws at most (per second): enough to watch, little
/// for the pipe.
const FORWARD_HZ: u8 = 4;

/// The width a forwarded bar is drawn at when the parent did not say.
const DEFAULT_WIDTH: u16 = 100;

/// A progress bar on standard error (hidden when `show` is false; indicatif itself draws
/// nothing when standard error is not a terminal), cut to the terminal's width. In a child whose parent forwards its
/// progress ([`PROGRESS_TO_PARENT`]), the bar is drawn up the pipe instead.
pub fn progress_bar(show: bool, length: u64) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let target = match parent_width() {
        Some(width) => {
            ProgressDrawTarget::term_like_with_hz(Box::new(ToParent::new(width)), FORWARD_HZ)
        }
        None => ProgressDrawTarget::stderr(),
    };
    let bar = ProgressBar::with_draw_target(Some(length), target);
    let style = ProgressStyle::with_template(
        "{prefix:>16} [{elapsed_precise}] [{bar:32}] {pos}/{len} {wide_msg}",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar
}

/// The parent's terminal width, if this process is a child whose parent forwards its
/// progress.
fn parent_width() -> Option<u16> {
    let value = std::env::var(PROGRESS_TO_PARENT).ok()?;
    Some(value.parse().unwrap_or(DEFAULT_WIDTH).max(20))
}

/// The "terminal" a forwarding child's bars draw into: it collects what indicatif writes
/// for one draw and, at the draw's flush, sends it as one [`MARKER`] line on standard
/// error (cursor movements mean nothing up a pipe and are dropped).
#[derive(Debug)]
pub struct ToParent {
    width: u16,
    drawn: Mutex<String>,
    /// The line sent last: a draw that changed nothing is not sent again.
    sent: Mutex<Option<String>>,
}

impl ToParent {
    /// A terminal `width` columns wide.
    pub fn new(width: u16) -> Self {
        ToParent {
            width,
            drawn: Mutex::new(String::new()),
            sent: Mutex::new(None),
        }
    }

    fn drawn(&self) -> std::sync::MutexGuard<'_, String> {
        self.drawn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TermLike for ToParent {
    fn width(&self) -> u16 {
        self.width
    }

    fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
        Ok(())
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.write_str(s)
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        // One draw is one line: a carriage return or a newline starts it over.
        let mut drawn = self.drawn();
        match s.rfind(['\r', '\n']) {
            Some(at) => {
                drawn.clear();
                drawn.push_str(&s[at + 1..]);
            }
            None => drawn.push_str(s),
        }
        Ok(())
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.drawn().clear();
        Ok(())
    }

    fn flush(&self) -> std::io::Result<()> {
        let line = std::mem::take(&mut *self.drawn()).trim_end().to_owned();
        let mut sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if sent.as_ref() == Some(&line) {
            return Ok(());
        }
        let mut stderr = std::io::stderr().lock();
        writeln!(stderr, "{MARKER}{line}")?;
        stderr.flush()?;
        *sent = Some(line);
        Ok(())
    }
}

/// The parent's bar for a child's forwarded progress: one line, `heading` and what the
/// child drew.
pub fn parent_bar(heading: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix}{wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(heading.to_owned());
    bar
}

/// Whether a parent that would show progress (`show`) can: only on a terminal, so that
/// output to a file or a pipe has no bars in it.
pub fn parent_forwards(show: bool) -> Option<u16> {
    use std::io::IsTerminal;
    if !show || !std::io::stderr().is_terminal() {
        return None;
    }
    Some(
        console::Term::stderr()
            .size_checked()
            .map_or(DEFAULT_WIDTH, |(_, columns)| columns),
    )
}

/// What a child wrote to standard error, read by [`forward_child_stderr`].
#[derive(Debug, Default, Clone)]
pub struct ChildStderr {
    /// Every line that was not forwarded progress: the child's own output (its error).
    pub text: String,
    /// How many progress lines arrived.
    pub progress_lines: u64,
    /// The first progress line that drew something.
    pub first_progress: Option<String>,
    /// The last progress line that drew something.
    pub last_progress: Option<String>,
}

/// Reads a child's standard error to its end: progress lines ([`MARKER`]) are drawn on
/// `bar` as they arrive; everything else is kept as the child's own output.
pub fn forward_child_stderr(
    stderr: impl std::io::Read,
    bar: &ProgressBar,
) -> std::io::Result<ChildStderr> {
    let mut reader = std::io::BufReader::new(stderr);
    let mut read = ChildStderr::default();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        match text.strip_prefix(MARKER) {
            Some(progress) => {
                let progress = progress.trim_end();
                read.progress_lines += 1;
                if !progress.is_empty() {
                    read.first_progress
                        .get_or_insert_with(|| progress.to_owned());
                    read.last_progress = Some(progress.to_owned());
                }
                bar.set_message(progress.to_owned());
            }
            None => read.text.push_str(&text),
        }
    }
    bar.finish_and_clear();
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_are_drawn_and_everything_else_is_kept_as_the_childs_output() {
        let stderr = format!(
            "{MARKER}  steam load [00:00:01] [==>  ] 10/40\n\
             a warning\n\
             {MARKER}\n\
             {MARKER}  steam run [00:00:02] [=====] 2/2\n\
             verso: bad option: it failed\n"
        );
        let bar = ProgressBar::hidden();
        let read = forward_child_stderr(stderr.as_bytes(), &bar).unwrap();
        assert_eq!(read.text, "a warning\nverso: bad option: it failed\n");
        assert_eq!(read.progress_lines, 3);
        assert!(read.first_progress.unwrap().contains("steam load"));
        assert!(read.last_progress.unwrap().contains("steam run"));
    }

    #[test]
    fn a_forwarded_draw_is_one_line_without_the_cursor_movements() {
        let term = ToParent::new(80);
        term.write_str("\rold").unwrap();
        term.clear_line().unwrap();
        term.write_str("  kv load [=> ] 1/2").unwrap();
        term.write_str("      ").unwrap();
        assert_eq!(*term.drawn(), "  kv load [=> ] 1/2      ");
        term.write_str("\rnew").unwrap();
        assert_eq!(*term.drawn(), "new");
    }
}
