//! Quoting what a caller sent, in error messages and log lines, bounded:
//! an invalid value of a megabyte must not become a megabyte of error (a
//! gRPC status that large breaks the HTTP/2 connection it travels on, for
//! every other request on it) nor a megabyte of log line. Long input is cut
//! to [`MAX_QUOTED_CHARS`] characters and its size is said.

use std::fmt;

/// How many characters of a caller's input a message quotes at most.
pub const MAX_QUOTED_CHARS: usize = 200;

/// `text`, whole when short, else its first [`MAX_QUOTED_CHARS`] characters
/// followed by `… (N bytes)`. Formats with `{}` as the text and with `{:?}`
/// as a quoted string (escapes included), like `&str` does.
pub fn quoted(text: &str) -> Quoted<'_> {
    Quoted(text)
}

#[derive(Clone, Copy)]
pub struct Quoted<'a>(&'a str);

impl Quoted<'_> {
    fn parts(&self) -> (&str, Option<usize>) {
        match self.0.char_indices().nth(MAX_QUOTED_CHARS) {
            Some((cut, _)) => (&self.0[..cut], Some(self.0.len())),
            None => (self.0, None),
        }
    }
}

impl fmt::Display for Quoted<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (whole, None) => formatter.write_str(whole),
            (head, Some(bytes)) => write!(formatter, "{head}… ({bytes} bytes)"),
        }
    }
}

impl fmt::Debug for Quoted<'_> {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.parts() {
            (whole, None) => write!(formatter, "{whole:?}"),
            (head, Some(bytes)) => write!(formatter, "{:?}… ({bytes} bytes)", format!("{head}…")),
        }
    }
}

/// Cuts a finished message (an error's text, which may already quote
/// input) to `max` bytes on a character boundary, saying how long it was.
pub fn bounded_message(message: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if message.len() <= max {
        return std::borrow::Cow::Borrowed(message);
    }
    let mut cut = max.saturating_sub(40);
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    std::borrow::Cow::Owned(format!(
        "{}… (message cut: {} bytes)",
        &message[..cut],
        message.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_quoted_whole() {
        assert_eq!(format!("{:?}", quoted("web")), "\"web\"");
        assert_eq!(format!("{}", quoted("web")), "web");
    }

    #[test]
    fn long_input_is_cut_and_its_size_said() {
        let long = "x".repeat(1_000_000);
        let shown = format!("{:?}", quoted(&long));
        assert!(shown.len() < 300, "{}", shown.len());
        assert!(shown.ends_with("(1000000 bytes)"), "{shown}");
        let multibyte = "é".repeat(500);
        let shown = format!("{}", quoted(&multibyte));
        assert!(shown.starts_with(&"é".repeat(200)));
        assert!(shown.ends_with("… (1000 bytes)"), "{shown}");
    }

    #[test]
    fn messages_are_bounded_on_a_character_boundary() {
        let message = format!("bad value {}", "ü".repeat(10_000));
        let bounded = bounded_message(&message, 1024);
        assert!(bounded.len() <= 1024, "{}", bounded.len());
        assert!(bounded.ends_with("(message cut: 20010 bytes)"), "{bounded}");
        assert_eq!(bounded_message("short", 1024), "short");
    }
}
