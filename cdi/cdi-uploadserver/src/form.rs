//! The `file` part of a `multipart/form-data` body, read as it streams (upstream's
//! `upload-form` paths, which browsers use). Parts before it are passed over; whatever follows
//! its closing delimiter is read and dropped.

use std::io::{self, Read};

/// The most a part's headers may take.
const MAX_HEADERS: usize = 16 * 1024;
/// How much is read from the body at a time.
const READ_SIZE: usize = 64 * 1024;

/// The content of a form's `file` part.
#[derive(Debug)]
pub struct FormFile<R> {
    inner: R,
    /// `\r\n--<boundary>`: what ends a part.
    delimiter: Vec<u8>,
    buffer: Vec<u8>,
    /// Where the unread bytes start in `buffer`.
    start: usize,
    /// Where in `buffer` the search for the delimiter goes on (bytes before it hold none).
    searched: usize,
    ended: bool,
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// Where `needle` first occurs in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = *needle.first()?;
    let mut from = 0;
    while let Some(offset) = haystack.get(from..)?.iter().position(|b| *b == first) {
        let at = from + offset;
        if haystack.get(at..at + needle.len())? == needle {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// The `name` parameter of a part's `Content-Disposition` header, from its header block.
fn part_name(headers: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(headers);
    let disposition = text.split("\r\n").find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("content-disposition")
            .then(|| value.to_owned())
    })?;
    disposition.split(';').skip(1).find_map(|parameter| {
        let (key, value) = parameter.split_once('=')?;
        key.trim()
            .eq_ignore_ascii_case("name")
            .then(|| value.trim().trim_matches('"').to_owned())
    })
}

impl<R: Read> FormFile<R> {
    /// Reads `inner` up to the start of its `file` part.
    ///
    /// # Errors
    /// The form is cut short, malformed, or has no `file` part.
    pub fn open(inner: R, boundary: &str) -> io::Result<Self> {
        let mut form = Self {
            inner,
            delimiter: format!("\r\n--{boundary}").into_bytes(),
            // The first delimiter may open the body, without the line break before it.
            buffer: b"\r\n".to_vec(),
            start: 0,
            searched: 0,
            ended: false,
        };
        loop {
            let at = form.next_delimiter()?;
            form.start = at + form.delimiter.len();
            form.searched = form.start;
            // `--` after a delimiter closes the form.
            form.fill_to(form.start + 2)?;
            if form.buffer[form.start..form.start + 2] == *b"--" {
                return Err(invalid("the form has no \"file\" part"));
            }
            let headers_end = loop {
                if let Some(at) = find(&form.buffer[form.start..], b"\r\n\r\n") {
                    break form.start + at;
                }
                if form.buffer.len() - form.start > MAX_HEADERS {
                    return Err(invalid("a part's headers are longer than 16 KiB"));
                }
                form.fill_more("a part's headers")?;
            };
            let name = part_name(&form.buffer[form.start..headers_end]);
            form.start = headers_end + 4;
            form.searched = form.start;
            if name.as_deref() == Some("file") {
                return Ok(form);
            }
        }
    }

    /// Reads more of the body into the buffer; the body's end is an error here (`what` says
    /// what it cut short).
    fn fill_more(&mut self, what: &str) -> io::Result<()> {
        if self.start > READ_SIZE {
            self.buffer.drain(..self.start);
            self.searched -= self.start;
            self.start = 0;
        }
        let old = self.buffer.len();
        self.buffer.resize(old + READ_SIZE, 0);
        let n = loop {
            match self.inner.read(&mut self.buffer[old..]) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => break other,
            }
        };
        self.buffer.truncate(old + n.as_ref().copied().unwrap_or(0));
        match n? {
            0 => Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the form ends inside {what}"),
            )),
            _ => Ok(()),
        }
    }

    fn fill_to(&mut self, end: usize) -> io::Result<()> {
        while self.buffer.len() < end {
            self.fill_more("a delimiter")?;
        }
        Ok(())
    }

    /// The position of the next delimiter in the buffer, reading on until there is one.
    fn next_delimiter(&mut self) -> io::Result<usize> {
        loop {
            if let Some(at) = find(&self.buffer[self.searched..], &self.delimiter) {
                return Ok(self.searched + at);
            }
            // A delimiter may start in the last bytes searched.
            self.searched = self
                .buffer
                .len()
                .saturating_sub(self.delimiter.len() - 1)
                .max(self.start);
            self.fill_more("a part")?;
        }
    }
}

impl<R: Read> Read for FormFile<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.ended || out.is_empty() {
            return Ok(0);
        }
        loop {
            let searched_from = self.searched;
            let end = find(&self.buffer[searched_from..], &self.delimiter).map(|at| searched_from + at);
            self.searched = end.unwrap_or_else(|| {
                self.buffer
                    .len()
                    .saturating_sub(self.delimiter.len() - 1)
                    .max(self.start)
            });
            // Bytes that cannot be the start of a delimiter may be handed out.
            let available = end.unwrap_or(self.searched) - self.start;
            if available > 0 {
                let n = available.min(out.len());
                out[..n].copy_from_slice(&self.buffer[self.start..self.start + n]);
                self.start += n;
                return Ok(n);
            }
            if end.is_some() {
                self.ended = true;
                // The rest of the form is read and dropped, so that the body's end is reached
                // (an async upload is answered then).
                io::copy(&mut self.inner, &mut io::sink())?;
                return Ok(0);
            }
            self.fill_more("its \"file\" part")?;
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    /// Reads in small pieces, to cross every buffer edge.
    #[derive(Debug)]
    struct Trickle<'a>(&'a [u8], usize);

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.0.len().min(out.len()).min(self.1);
            out[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }

    fn form(parts: &[(&str, &[u8])]) -> Vec<u8> {
        let mut body = Vec::new();
        for (name, content) in parts {
            body.extend_from_slice(
                format!("--XyZ\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"d.img\"\r\nContent-Type: application/octet-stream\r\n\r\n").as_bytes(),
            );
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(b"--XyZ--\r\n");
        body
    }

    fn file_of(body: &[u8], piece: usize) -> io::Result<Vec<u8>> {
        let mut file = FormFile::open(Trickle(body, piece), "XyZ")?;
        let mut content = Vec::new();
        file.read_to_end(&mut content)?;
        Ok(content)
    }

    #[test]
    fn the_file_part_is_read_whole_after_other_parts_at_any_read_size() {
        // Content with line breaks, dashes and most of a delimiter in it.
        let mut content = b"\r\n--XY\r\n--Xy\r\n-\r\n--XyY\r\n--X".repeat(5000);
        content.extend_from_slice(b"tail\r\n--Xy");
        let body = form(&[("token", b"secret"), ("file", &content), ("after", b"x")]);
        for piece in [1, 3, 7, 64, 4096, 1 << 20] {
            assert_eq!(file_of(&body, piece).expect("file"), content, "pieces of {piece}");
        }
        assert_eq!(file_of(&form(&[("file", b"")]), 5).expect("empty"), b"");
    }

    #[test]
    fn a_form_without_a_file_or_cut_short_is_refused() {
        let no_file = file_of(&form(&[("other", b"data")]), 10).expect_err("no file");
        assert_eq!(no_file.to_string(), "the form has no \"file\" part");
        let body = form(&[("file", b"0123456789")]);
        let cut = file_of(&body[..body.len() - 20], 10).expect_err("cut short");
        assert_eq!(cut.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(cut.to_string(), "the form ends inside its \"file\" part");
        let wrong_boundary = FormFile::open(Trickle(&body, 10), "other").expect_err("boundary");
        assert_eq!(wrong_boundary.to_string(), "the form ends inside a part");
        let mut huge = b"--XyZ\r\n".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEADERS + READ_SIZE));
        let headers = FormFile::open(Trickle(&huge, 1 << 20), "XyZ").expect_err("headers");
        assert_eq!(headers.to_string(), "a part's headers are longer than 16 KiB");
    }

    #[test]
    fn a_parts_name_is_read_from_its_disposition() {
        assert_eq!(
            part_name(b"Content-Type: x\r\ncontent-disposition: form-data; name=file").as_deref(),
            Some("file")
        );
        assert_eq!(part_name(b"Content-Disposition: form-data; filename=\"a\""), None);
        assert_eq!(find(b"abcabd", b"abd"), Some(3));
        assert_eq!(find(b"ab", b"abd"), None);
    }
}
