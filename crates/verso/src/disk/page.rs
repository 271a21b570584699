//! The disk engine's unit of storage and I/O: a fixed-size page of [`PAGE_SIZE`] bytes, with
//! a header the buffer pool seals on its way to the file and checks on its way back.
//!
//! Header layout (little-endian), [`PAGE_HEADER_BYTES`] bytes, then the body:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | CRC32C of bytes 4..[`PAGE_SIZE`] |
//! | 4..6 | page format version ([`PAGE_FORMAT_VERSION`]) |
//! | 6..8 | page kind (the layer above says what its pages are; 0 is unformatted) |
//! | 8..16 | page LSN: the log position of the last change (the write-ahead rule waits on it) |
//! | 16..20 | file number of the page's own address |
//! | 20..24 | block number of the page's own address |
//!
//! A page that is all zeros is a page that was never written (a file extended by a later
//! page's write, or a block allocated and lost in a crash before its first write): it reads
//! as an empty page. Any other page must carry its checksum, this build's format version and
//! its own address; the address catches a write that landed on the wrong block, the
//! checksum a torn write (an 8 KiB page is written by several sectors, and a power loss may
//! keep some of them). A torn or misdirected page is a [`PageDefect`], never silently used:
//! recovery repairs it from the full page image the page log keeps for the first change of a
//! page after a checkpoint, as PostgreSQL's `full_page_writes` does.

use std::fmt;

/// The size of every page, as PostgreSQL's default block size.
pub const PAGE_SIZE: usize = 8192;

/// The bytes of the header at the start of every page.
pub const PAGE_HEADER_BYTES: usize = 24;

/// The format of pages this build writes and reads.
pub const PAGE_FORMAT_VERSION: u16 = 1;

const CRC: std::ops::Range<usize> = 0..4;
const VERSION: std::ops::Range<usize> = 4..6;
const KIND: std::ops::Range<usize> = 6..8;
const LSN: std::ops::Range<usize> = 8..16;
const FILE: std::ops::Range<usize> = 16..20;
const BLOCK: std::ops::Range<usize> = 20..24;

/// A file of pages registered with a [`super::BufferPool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileNo(pub u32);

/// The address of a page: its file and its block (page number) in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageId {
    /// The file.
    pub file: FileNo,
    /// The page's index in the file (byte offset `block * PAGE_SIZE`).
    pub block: u32,
}

impl PageId {
    /// The page `block` of `file`.
    pub fn new(file: FileNo, block: u32) -> Self {
        PageId { file, block }
    }

    /// The byte offset of the page in its file.
    pub fn offset(self) -> u64 {
        u64::from(self.block) * PAGE_SIZE as u64
    }

    /// Whether `self` is the page right after `previous` in the same file: the test of a
    /// sequential write (SI-CV's metric).
    pub fn follows(self, previous: PageId) -> bool {
        self.file == previous.file && previous.block.checked_add(1) == Some(self.block)
    }

    pub(crate) fn pack(self) -> u64 {
        (u64::from(self.file.0) << 32) | u64::from(self.block)
    }

    pub(crate) fn unpack(packed: u64) -> Self {
        PageId::new(FileNo((packed >> 32) as u32), packed as u32)
    }
}

impl fmt::Display for PageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "page {} of file {}", self.block, self.file.0)
    }
}

/// The contents of one page: a header (its LSN and kind; the checksum and address are the
/// buffer pool's) and the body the layer above lays out.
#[derive(Clone, PartialEq, Eq)]
pub struct Page {
    bytes: Box<[u8; PAGE_SIZE]>,
}

impl Default for Page {
    fn default() -> Self {
        Page::zeroed()
    }
}

impl fmt::Debug for Page {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Page")
            .field("kind", &self.kind())
            .field("lsn", &self.lsn())
            .finish_non_exhaustive()
    }
}

/// Why the bytes read for a page cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageDefect {
    /// The checksum does not match: a torn write, or bytes changed behind Verso's back.
    ChecksumMismatch {
        /// The checksum in the header.
        stored: u32,
        /// The checksum of the bytes.
        computed: u32,
    },
    /// A page format this build does not read.
    UnknownFormat {
        /// The version in the header.
        found: u16,
    },
    /// The page carries another page's address: a write that landed on the wrong block.
    Misplaced {
        /// The address in the header.
        found: PageId,
    },
    /// The file ends inside the page (a torn extension of the file).
    Truncated {
        /// The bytes of the page the file holds.
        bytes: usize,
    },
}

impl fmt::Display for PageDefect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageDefect::ChecksumMismatch { stored, computed } => write!(
                f,
                "page checksum {stored:#010x} does not match its bytes' {computed:#010x} (a torn \
                 or altered page)"
            ),
            PageDefect::UnknownFormat { found } => write!(
                f,
                "page format version {found}, this build reads {PAGE_FORMAT_VERSION}"
            ),
            PageDefect::Misplaced { found } => {
                write!(
                    f,
                    "the page holds the address of {found} (a misdirected write)"
                )
            }
            PageDefect::Truncated { bytes } => write!(
                f,
                "the file ends {bytes} bytes into the page (a torn extension of the file)"
            ),
        }
    }
}

impl Page {
    /// A page of zeros: unformatted, LSN 0.
    pub fn zeroed() -> Self {
        Page {
            bytes: Box::new([0; PAGE_SIZE]),
        }
    }

    /// The page's kind, as the layer above set it (0: unformatted).
    pub fn kind(&self) -> u16 {
        u16::from_le_bytes(self.bytes[KIND].try_into().expect("two bytes"))
    }

    /// Sets the page's kind.
    pub fn set_kind(&mut self, kind: u16) {
        self.bytes[KIND].copy_from_slice(&kind.to_le_bytes());
    }

    /// The log position of the page's last change (0: never logged).
    pub fn lsn(&self) -> u64 {
        u64::from_le_bytes(self.bytes[LSN].try_into().expect("eight bytes"))
    }

    /// Records that the log record at `lsn` changed the page. LSNs of a page only grow: a
    /// write-back waits for the log up to the LSN, so an older one could let the page
    /// reach the file before the log of its newest change.
    pub fn set_lsn(&mut self, lsn: u64) {
        debug_assert!(
            lsn >= self.lsn(),
            "a page's LSN only grows ({} -> {lsn})",
            self.lsn()
        );
        self.bytes[LSN].copy_from_slice(&lsn.to_le_bytes());
    }

    /// The bytes after the header, for the layer above to lay out.
    pub fn body(&self) -> &[u8] {
        &self.bytes[PAGE_HEADER_BYTES..]
    }

    /// The bytes after the header, to change.
    pub fn body_mut(&mut self) -> &mut [u8] {
        &mut self.bytes[PAGE_HEADER_BYTES..]
    }

    /// The whole page, header included, as the file holds it after a write-back.
    pub fn as_bytes(&self) -> &[u8; PAGE_SIZE] {
        &self.bytes
    }

    /// Whether every byte is zero (a page never written).
    pub fn is_zeroed(&self) -> bool {
        is_all_zero(&self.bytes[..])
    }

    /// Writes the header fields the pool owns (format, address, checksum) before the page
    /// goes to `id`'s place in its file.
    pub(crate) fn seal(&mut self, id: PageId) {
        self.bytes[VERSION].copy_from_slice(&PAGE_FORMAT_VERSION.to_le_bytes());
        self.bytes[FILE].copy_from_slice(&id.file.0.to_le_bytes());
        self.bytes[BLOCK].copy_from_slice(&id.block.to_le_bytes());
        let crc = crc32c::crc32c(&self.bytes[CRC.end..]);
        self.bytes[CRC].copy_from_slice(&crc.to_le_bytes());
    }

    /// Decodes the bytes read from `id`'s place: `read` is how many bytes of the page the
    /// file held (fewer at its end), `raw` the page's bytes (zeros past `read`).
    ///
    /// Never panics, whatever the bytes (property-tested below).
    pub fn decode(raw: &[u8; PAGE_SIZE], read: usize, id: PageId) -> Result<Page, PageDefect> {
        Page::check(raw, read, id)?;
        let mut page = Page {
            bytes: Box::new(*raw),
        };
        // Only `read` bytes came from the file; the rest of the buffer is not the page's.
        page.bytes[read..].fill(0);
        Ok(page)
    }

    /// Checks bytes read from `id`'s place as [`Page::decode`] does, without copying them.
    pub(crate) fn check(raw: &[u8; PAGE_SIZE], read: usize, id: PageId) -> Result<(), PageDefect> {
        debug_assert!(read <= PAGE_SIZE);
        if is_all_zero(&raw[..read]) {
            // Past the end of the file, or a hole: a page never written.
            return Ok(());
        }
        if read < PAGE_SIZE {
            return Err(PageDefect::Truncated { bytes: read });
        }
        let stored = u32::from_le_bytes(raw[CRC].try_into().expect("four bytes"));
        let computed = crc32c::crc32c(&raw[CRC.end..]);
        if stored != computed {
            return Err(PageDefect::ChecksumMismatch { stored, computed });
        }
        let found = u16::from_le_bytes(raw[VERSION].try_into().expect("two bytes"));
        if found != PAGE_FORMAT_VERSION {
            return Err(PageDefect::UnknownFormat { found });
        }
        let file = u32::from_le_bytes(raw[FILE].try_into().expect("four bytes"));
        let block = u32::from_le_bytes(raw[BLOCK].try_into().expect("four bytes"));
        let at = PageId::new(FileNo(file), block);
        if at != id {
            return Err(PageDefect::Misplaced { found: at });
        }
        Ok(())
    }

    /// Resets the page to zeros.
    pub(crate) fn clear(&mut self) {
        self.bytes.fill(0);
    }

    pub(crate) fn raw_mut(&mut self) -> &mut [u8; PAGE_SIZE] {
        &mut self.bytes
    }
}

fn is_all_zero(bytes: &[u8]) -> bool {
    // Word at a time: this runs on every page read.
    let chunks = bytes.chunks_exact(8);
    let rest = chunks.remainder();
    chunks
        .into_iter()
        .all(|c| u64::from_ne_bytes(c.try_into().expect("eight bytes")) == 0)
        && rest.iter().all(|&b| b == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(id: PageId) -> Page {
        let mut page = Page::zeroed();
        page.set_kind(7);
        page.set_lsn(42);
        page.body_mut()[..5].copy_from_slice(b"hello");
        page.seal(id);
        page
    }

    #[test]
    fn a_sealed_page_decodes_to_itself_at_its_own_address_only() {
        let id = PageId::new(FileNo(3), 9);
        let page = sealed(id);
        let decoded = Page::decode(page.as_bytes(), PAGE_SIZE, id).unwrap();
        assert_eq!(decoded, page);
        assert_eq!((decoded.kind(), decoded.lsn()), (7, 42));
        assert_eq!(&decoded.body()[..5], b"hello");
        let elsewhere = PageId::new(FileNo(3), 10);
        assert_eq!(
            Page::decode(page.as_bytes(), PAGE_SIZE, elsewhere),
            Err(PageDefect::Misplaced { found: id })
        );
    }

    #[test]
    fn a_flipped_bit_anywhere_is_a_checksum_mismatch() {
        let id = PageId::new(FileNo(0), 1);
        let page = sealed(id);
        for byte in [0, 3, 4, 8, 23, 24, 100, PAGE_SIZE - 1] {
            let mut raw = *page.as_bytes();
            raw[byte] ^= 0x10;
            assert!(
                matches!(
                    Page::decode(&raw, PAGE_SIZE, id),
                    Err(PageDefect::ChecksumMismatch { .. })
                ),
                "byte {byte}"
            );
        }
    }

    #[test]
    fn zeros_and_the_end_of_the_file_read_as_an_unwritten_page_and_a_partial_page_does_not() {
        let id = PageId::new(FileNo(0), 0);
        let zeros = [0u8; PAGE_SIZE];
        assert!(Page::decode(&zeros, PAGE_SIZE, id).unwrap().is_zeroed());
        assert!(Page::decode(&zeros, 0, id).unwrap().is_zeroed());
        let page = sealed(id);
        assert_eq!(
            Page::decode(page.as_bytes(), 4096, id),
            Err(PageDefect::Truncated { bytes: 4096 })
        );
    }

    #[test]
    fn an_unknown_format_is_refused() {
        let id = PageId::new(FileNo(0), 0);
        let mut raw = *sealed(id).as_bytes();
        raw[VERSION].copy_from_slice(&9u16.to_le_bytes());
        let crc = crc32c::crc32c(&raw[CRC.end..]);
        raw[CRC].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Page::decode(&raw, PAGE_SIZE, id),
            Err(PageDefect::UnknownFormat { found: 9 })
        );
    }

    #[test]
    fn page_ids_pack_and_know_their_successor() {
        let id = PageId::new(FileNo(u32::MAX), u32::MAX - 1);
        assert_eq!(PageId::unpack(id.pack()), id);
        assert!(PageId::new(FileNo(1), 5).follows(PageId::new(FileNo(1), 4)));
        assert!(!PageId::new(FileNo(2), 5).follows(PageId::new(FileNo(1), 4)));
        assert!(!PageId::new(FileNo(1), 0).follows(PageId::new(FileNo(1), u32::MAX)));
    }

    /// Regression (a proptest failure in a fresh-clone CI run, 2026-11-29): with nothing
    /// read (past the end of the file) the decoder returned whatever the buffer held rather
    /// than a page never written; bytes past `read` are not the page's.
    #[test]
    fn regression_bytes_past_what_was_read_are_not_the_page() {
        let id = PageId::new(FileNo(0), 0);
        let mut raw = [0u8; PAGE_SIZE];
        raw[0] = 1;
        assert!(Page::decode(&raw, 0, id).unwrap().is_zeroed());
        raw[PAGE_SIZE - 1] = 7;
        assert!(Page::decode(&raw, 0, id).unwrap().is_zeroed());
        assert_eq!(
            Page::decode(&raw, 100, id),
            Err(PageDefect::Truncated { bytes: 100 })
        );
    }

    proptest::proptest! {
        /// The decoder of on-disk bytes never panics and never accepts bytes that are not
        /// a page sealed at that address or zeros.
        #[test]
        fn decoding_any_bytes_never_panics(
            seed in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
            read in 0usize..=PAGE_SIZE,
            block in 0u32..4,
        ) {
            let mut raw = [0u8; PAGE_SIZE];
            for (i, b) in seed.iter().enumerate() {
                raw[(i * 131) % PAGE_SIZE] = *b;
            }
            let id = PageId::new(FileNo(0), block);
            if let Ok(page) = Page::decode(&raw, read, id) {
                proptest::prop_assert!(page.is_zeroed() || read == PAGE_SIZE);
            }
        }

        /// A sealed page with any corruption of a few bytes is refused.
        #[test]
        fn corrupting_a_sealed_page_is_detected(
            changes in proptest::collection::vec((0usize..PAGE_SIZE, 1u8..=255), 1..8),
        ) {
            let id = PageId::new(FileNo(1), 2);
            let page = sealed(id);
            let mut raw = *page.as_bytes();
            for (at, xor) in changes {
                raw[at] ^= xor;
            }
            if raw != *page.as_bytes() {
                proptest::prop_assert!(Page::decode(&raw, PAGE_SIZE, id).is_err());
            }
        }
    }
}
