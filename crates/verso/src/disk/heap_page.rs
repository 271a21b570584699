//! PostgreSQL's heap page, for the disk engine's PostgreSQL version storage: line pointers
//! that index entries point at, whole-tuple versions with `xmin`/`xmax`, a link to the
//! successor (`ctid`), hint bits, HOT chains, and pruning (PostgreSQL's
//! `heap_page_prune` and `PageRepairFragmentation`, from its documentation and
//! `src/backend/access/heap/README.HOT`). Design note: `docs/design/buffer-pool.md`,
//! "Heap pages".
//!
//! Body layout (after the page header):
//!
//! | body bytes | field |
//! |---|---|
//! | 0..2 | line pointers |
//! | 2..4 | start of the tuple area (tuples grow down from the end of the body) |
//! | 4..6 | flags ([`HAS_FREE_LINES`]) |
//! | 6..8 | reserved (0) |
//! | 8..16 | prune hint: the smallest `xmax` set on the page since it was last pruned (0: none) |
//! | 16.. | line pointers, 4 bytes each: offset (15 bits), state (2 bits), length (15 bits) |
//!
//! A tuple is a [`TUPLE_HEADER_BYTES`]-byte header (`xmin` u64, `xmax` u64, `ctid` block
//! u32 and line u16, `infomask` u16) and its data (the packed row).
//!
//! Invariants (checked by [`HeapPage::check`] in debug builds after every change):
//! - **H1** Line pointers are never moved: a line's number is stable for as long as an
//!   index entry may point at it, so a pruned chain's root stays (redirected or dead).
//! - **H2** Every normal line's tuple lies inside the tuple area, and tuples do not
//!   overlap; the line-pointer array ends at or before the tuple area.
//! - **H3** A redirect points at a normal line holding a heap-only tuple on the same page.
//! - **H4** A heap-only tuple is reachable from exactly one root (a normal line that is not
//!   heap-only, or a redirect) through `ctid` links of hot-updated tuples on the page, or
//!   it is not yet pruned garbage (its creator aborted).

use std::fmt;

fn get16(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("four bytes"))
}

fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("eight bytes"))
}

/// The bytes of a tuple's header.
pub const TUPLE_HEADER_BYTES: usize = 24;

/// The page kind of a heap page.
pub const KIND_HEAP_PAGE: u16 = 0x4EA1;

const HEADER: usize = 16;
const LINE: usize = 4;
const BODY: usize = super::page::PAGE_SIZE - super::page::PAGE_HEADER_BYTES;

/// The most data one tuple holds: what an empty page takes beside its header and a line.
pub const MAX_TUPLE_DATA_BYTES: usize = BODY - HEADER - LINE - TUPLE_HEADER_BYTES;

/// The free space of an empty page: what a new (all-zero) page offers once formatted.
pub const EMPTY_PAGE_FREE_BYTES: usize = BODY - HEADER;

/// Page flag: some line pointer is unused and can be taken by an insert.
pub const HAS_FREE_LINES: u16 = 1;

/// Tuple infomask bits (PostgreSQL's names in comments).
pub mod infomask {
    /// `HEAP_XMIN_COMMITTED`: hint, the creator committed.
    pub const XMIN_COMMITTED: u16 = 1 << 0;
    /// `HEAP_XMIN_INVALID`: hint, the creator aborted.
    pub const XMIN_INVALID: u16 = 1 << 1;
    /// `HEAP_XMAX_COMMITTED`: hint, the deleter or updater committed.
    pub const XMAX_COMMITTED: u16 = 1 << 2;
    /// `HEAP_XMAX_INVALID`: hint, there is no deleter, or it aborted.
    pub const XMAX_INVALID: u16 = 1 << 3;
    /// `HEAP_HOT_UPDATED`: the successor (`ctid`) is a heap-only tuple on this page.
    pub const HOT_UPDATED: u16 = 1 << 4;
    /// `HEAP_ONLY_TUPLE`: no index entry points at this tuple; it is reached through its
    /// chain's root.
    pub const HEAP_ONLY: u16 = 1 << 5;
    /// `HEAP_UPDATED`: this tuple is an update's new version (not an insert).
    pub const UPDATED: u16 = 1 << 6;
}

/// What a line pointer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Line {
    /// Free for a new tuple.
    Unused,
    /// A tuple at this offset, of this length.
    Normal {
        /// Offset in the body.
        offset: u16,
        /// Bytes, header included.
        len: u16,
    },
    /// A pruned HOT chain's root: the chain now starts at this line.
    Redirect(u16),
    /// Pruned, and index entries may still point here: unusable until vacuum removed them.
    Dead,
}

/// A tuple's header fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TupleHeader {
    /// The creating transaction.
    pub xmin: u64,
    /// The deleting or updating transaction (0: none).
    pub xmax: u64,
    /// The successor's block (the tuple's own when it is the newest).
    pub ctid_block: u32,
    /// The successor's line.
    pub ctid_line: u16,
    /// [`infomask`] bits.
    pub infomask: u16,
}

impl TupleHeader {
    /// Writes the header's [`TUPLE_HEADER_BYTES`] bytes.
    pub(crate) fn encode(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.xmin.to_le_bytes());
        out[8..16].copy_from_slice(&self.xmax.to_le_bytes());
        out[16..20].copy_from_slice(&self.ctid_block.to_le_bytes());
        out[20..22].copy_from_slice(&self.ctid_line.to_le_bytes());
        out[22..24].copy_from_slice(&self.infomask.to_le_bytes());
    }

    /// Reads a header from [`TUPLE_HEADER_BYTES`] bytes.
    pub(crate) fn decode(bytes: &[u8]) -> Self {
        TupleHeader {
            xmin: get64(bytes, 0),
            xmax: get64(bytes, 8),
            ctid_block: get32(bytes, 16),
            ctid_line: get16(bytes, 20) as u16,
            infomask: get16(bytes, 22) as u16,
        }
    }

    /// Whether a bit of [`infomask`] is set.
    pub fn has(&self, bit: u16) -> bool {
        self.infomask & bit != 0
    }
}

/// What one prune did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Tuples whose space was freed.
    pub tuples_removed: u32,
    /// Chain roots that became redirects.
    pub redirected: u32,
    /// Lines that became dead (index entries still point at them).
    pub lines_dead: u32,
    /// Heap-only lines that became unused.
    pub lines_freed: u32,
    /// Bytes of tuple space regained.
    pub bytes_freed: u32,
    /// Of the tuples removed, those only eager pruning removes: versions between the
    /// horizon and the newest that no active snapshot sees.
    pub removed_eagerly: u32,
}

/// What a prune changes, decided before any line changes: PostgreSQL's prune record, and
/// what the page log redoes ([`HeapPage::execute_prune`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrunePlan {
    /// Chain roots redirected to the chain's first live member: (root, target).
    pub redirected: Vec<(u16, u16)>,
    /// Roots of chains entirely dead: their lines become dead.
    pub dead: Vec<u16>,
    /// Heap-only lines removed: they become unused.
    pub unused: Vec<u16>,
    /// Eager pruning: kept chain members whose successors were removed from the chain's
    /// middle, with their new headers (the `xmax`, `ctid` and successor bits of the last
    /// member removed after them), applied before the lines change.
    pub relinked: Vec<(u16, TupleHeader)>,
}

impl PrunePlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.redirected.is_empty()
            && self.dead.is_empty()
            && self.unused.is_empty()
            && self.relinked.is_empty()
    }
}

/// A heap page's body, read or changed in place.
pub struct HeapPage<B> {
    body: B,
}

impl<B: AsRef<[u8]>> fmt::Debug for HeapPage<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeapPage")
            .field("lines", &self.lines())
            .field("free", &self.free_space())
            .finish()
    }
}

impl<B: AsRef<[u8]>> HeapPage<B> {
    /// The page over a body ([`super::Page::body`]).
    pub fn new(body: B) -> Self {
        debug_assert_eq!(body.as_ref().len(), BODY);
        HeapPage { body }
    }

    fn b(&self) -> &[u8] {
        self.body.as_ref()
    }

    /// The number of line pointers.
    pub fn lines(&self) -> u16 {
        get16(self.b(), 0) as u16
    }

    fn upper(&self) -> usize {
        get16(self.b(), 2)
    }

    fn lower(&self) -> usize {
        HEADER + LINE * self.lines() as usize
    }

    /// Page flags.
    pub fn flags(&self) -> u16 {
        get16(self.b(), 4) as u16
    }

    /// The smallest `xmax` set since the last prune (0: nothing to prune).
    pub fn prune_hint(&self) -> u64 {
        get64(self.b(), 8)
    }

    /// Contiguous free bytes between the line pointers and the tuples.
    pub fn free_space(&self) -> usize {
        self.upper().saturating_sub(self.lower())
    }

    /// Whether a tuple of `data_len` bytes of data fits without pruning (never on a page
    /// whose bounds lie).
    pub fn fits(&self, data_len: usize) -> bool {
        if self.upper() > BODY || self.lower() > BODY {
            return false;
        }
        let line = if self.flags() & HAS_FREE_LINES != 0 {
            0
        } else {
            LINE
        };
        self.free_space() >= TUPLE_HEADER_BYTES + data_len + line
    }

    /// Line pointer `line` (numbered from 1, as PostgreSQL's offset numbers).
    pub fn line(&self, line: u16) -> Line {
        // A line past the page's end (a count the bytes lie about) reads as unused.
        if line == 0 || line > self.lines() || HEADER + LINE * line as usize > BODY {
            return Line::Unused;
        }
        let word = get32(self.b(), HEADER + LINE * (line as usize - 1));
        let offset = (word & 0x7FFF) as u16;
        let len = (word >> 17) as u16;
        match (word >> 15) & 3 {
            0 => Line::Unused,
            1 => Line::Normal { offset, len },
            2 => Line::Redirect(offset),
            _ => Line::Dead,
        }
    }

    /// The bytes of the tuple at a normal line, if its span lies inside the tuple area's
    /// bounds (a line pointer from a page whose bytes lie reads as no tuple: the run-time
    /// read paths never panic on it, and `check` reports it).
    fn tuple_span(&self, line: u16) -> Option<(usize, usize)> {
        let Line::Normal { offset, len } = self.line(line) else {
            return None;
        };
        let (start, end) = (offset as usize, offset as usize + len as usize);
        (start >= HEADER && end <= BODY && len as usize >= TUPLE_HEADER_BYTES)
            .then_some((start, end))
    }

    /// The header of the tuple at a normal line.
    pub fn header(&self, line: u16) -> Option<TupleHeader> {
        let (start, _) = self.tuple_span(line)?;
        Some(TupleHeader::decode(
            &self.b()[start..start + TUPLE_HEADER_BYTES],
        ))
    }

    /// The data of the tuple at a normal line.
    pub fn data(&self, line: u16) -> Option<&[u8]> {
        let (start, end) = self.tuple_span(line)?;
        Some(&self.b()[start + TUPLE_HEADER_BYTES..end])
    }

    /// The lines of a HOT chain from `root` (a redirect is followed), oldest first, as far
    /// as hot-updated tuples link within the page. A link counts only to a heap-only tuple
    /// created by the transaction that replaced its predecessor (PostgreSQL's check that
    /// the successor's `xmin` is the predecessor's `xmax`): the successor of an aborted
    /// update may have been pruned and its line reused by an unrelated tuple.
    pub fn chain(&self, root: u16) -> Vec<u16> {
        let mut members = Vec::new();
        let mut at = match self.line(root) {
            Line::Redirect(to) => to,
            // A heap-only tuple starts no chain (PostgreSQL's `heap_hot_search_buffer`
            // checks it too): an entry naming it names a line reused since.
            Line::Normal { .. }
                if self
                    .header(root)
                    .is_some_and(|h| h.has(infomask::HEAP_ONLY)) =>
            {
                return members
            }
            Line::Normal { .. } => root,
            _ => return members,
        };
        let mut previous: Option<TupleHeader> = None;
        while let Some(header) = self.header(at) {
            if members.contains(&at) || members.len() > self.lines() as usize {
                break; // a cycle can only be corruption; `check` reports it
            }
            if let Some(previous) = previous {
                if !header.has(infomask::HEAP_ONLY) || header.xmin != previous.xmax {
                    break;
                }
            }
            members.push(at);
            if !header.has(infomask::HOT_UPDATED) {
                break;
            }
            previous = Some(header);
            at = header.ctid_line;
        }
        members
    }

    /// Checks H1-H4 as far as the page alone can; returns what is wrong.
    pub fn check(&self) -> Result<(), String> {
        let (lower, upper) = (self.lower(), self.upper());
        if lower > upper || upper > BODY {
            return Err(format!(
                "line pointers end at {lower}, tuples start at {upper} (H2)"
            ));
        }
        let mut spans = Vec::new();
        for line in 1..=self.lines() {
            match self.line(line) {
                Line::Normal { offset, len } => {
                    let (start, end) = (offset as usize, offset as usize + len as usize);
                    if start < upper || end > BODY || (len as usize) < TUPLE_HEADER_BYTES {
                        return Err(format!(
                            "line {line}'s tuple {start}..{end} is outside (H2)"
                        ));
                    }
                    spans.push((start, end));
                }
                Line::Redirect(_) | Line::Unused | Line::Dead => {}
            }
        }
        // Every tuple is inside the page: headers can be read from here on.
        for line in 1..=self.lines() {
            if let Line::Redirect(to) = self.line(line) {
                match self.header(to) {
                    Some(h) if h.has(infomask::HEAP_ONLY) => {}
                    _ => {
                        return Err(format!(
                            "line {line} redirects to {to}, not a heap-only tuple (H3)"
                        ))
                    }
                }
            }
        }
        spans.sort_unstable();
        if spans.windows(2).any(|w| w[0].1 > w[1].0) {
            return Err("tuples overlap (H2)".to_string());
        }
        // H4: every heap-only tuple reached from at most one root.
        let mut reached = vec![0u8; self.lines() as usize + 1];
        for root in 1..=self.lines() {
            let is_root = match self.line(root) {
                Line::Redirect(_) => true,
                Line::Normal { .. } => !self.header(root).expect("normal").has(infomask::HEAP_ONLY),
                _ => false,
            };
            if is_root {
                for member in self.chain(root) {
                    if member != root {
                        reached[member as usize] += 1;
                    }
                }
            }
        }
        if let Some(line) = reached.iter().position(|&n| n > 1) {
            return Err(format!("heap-only line {line} is on two chains (H4)"));
        }
        Ok(())
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> HeapPage<B> {
    fn m(&mut self) -> &mut [u8] {
        self.body.as_mut()
    }

    fn put16(&mut self, at: usize, v: usize) {
        debug_assert!(v <= u16::MAX as usize);
        self.m()[at..at + 2].copy_from_slice(&(v as u16).to_le_bytes());
    }

    fn set_line(&mut self, line: u16, value: Line) {
        let word: u32 = match value {
            Line::Unused => 0,
            Line::Normal { offset, len } => u32::from(offset) | 1 << 15 | u32::from(len) << 17,
            Line::Redirect(to) => u32::from(to) | 2 << 15,
            Line::Dead => 3 << 15,
        };
        let at = HEADER + LINE * (line as usize - 1);
        self.m()[at..at + 4].copy_from_slice(&word.to_le_bytes());
    }

    /// Formats an empty heap page.
    pub fn init(&mut self) {
        self.m().fill(0);
        self.put16(2, BODY);
    }

    /// Adds a tuple; returns its line, or `None` if it does not fit ([`HeapPage::fits`]).
    /// A freed line is reused (its number may be one an old index entry pointed at: vacuum
    /// frees a line only after removing those entries).
    pub fn insert(&mut self, header: &TupleHeader, data: &[u8]) -> Option<u16> {
        if !self.fits(data.len()) || TUPLE_HEADER_BYTES + data.len() > 0x7FFF {
            return None;
        }
        let reuse = if self.flags() & HAS_FREE_LINES != 0 {
            (1..=self.lines()).find(|&l| self.line(l) == Line::Unused)
        } else {
            None
        };
        let line = match reuse {
            Some(line) => line,
            None => {
                let line = self.lines() + 1;
                self.put16(0, line as usize);
                line
            }
        };
        if reuse.is_some() && !(1..=self.lines()).any(|l| l != line && self.line(l) == Line::Unused)
        {
            let flags = self.flags() & !HAS_FREE_LINES;
            self.put16(4, flags as usize);
        }
        let len = TUPLE_HEADER_BYTES + data.len();
        let offset = self.upper() - len;
        header.encode(&mut self.m()[offset..offset + TUPLE_HEADER_BYTES]);
        self.m()[offset + TUPLE_HEADER_BYTES..offset + len].copy_from_slice(data);
        self.put16(2, offset);
        self.set_line(
            line,
            Line::Normal {
                offset: offset as u16,
                len: len as u16,
            },
        );
        debug_assert_eq!(self.check(), Ok(()));
        Some(line)
    }

    /// Rewrites the header of the tuple at a normal line (`xmax`, `ctid`, hint bits).
    /// Returns false if the line holds no tuple. Setting an `xmax` lowers the page's prune
    /// hint to it.
    pub fn set_header(&mut self, line: u16, header: &TupleHeader) -> bool {
        let Some((offset, _)) = self.tuple_span(line) else {
            return false;
        };
        header.encode(&mut self.m()[offset..offset + TUPLE_HEADER_BYTES]);
        if header.xmax != 0 && (self.prune_hint() == 0 || header.xmax < self.prune_hint()) {
            let hint = header.xmax.to_le_bytes();
            self.m()[8..16].copy_from_slice(&hint);
        }
        true
    }

    /// Prunes the page as PostgreSQL's `heap_page_prune` does: in every HOT chain, the
    /// tuples `dead` says no snapshot can see, from the chain's start up to the first it
    /// does not, are removed; a dead member after a live one (an aborted update's version)
    /// is removed with the members after it. A chain left with live
    /// members has its root redirected to the first of them; a chain entirely dead leaves
    /// its root line dead (index entries point at it) and its heap-only lines unused.
    /// Heap-only tuples no chain reaches (their creator aborted) are removed if dead. Then
    /// the tuples are packed together (`PageRepairFragmentation`) and trailing unused lines
    /// cut. `dead` sees each tuple's header: MVCC's "dead to every snapshot", under which a
    /// committed member is dead only if every older member is.
    ///
    /// Eager pruning (Steam's EPO on a page): a live member `obsolete` names (given its
    /// line and header) goes too, wherever it is in its chain, and the member kept before
    /// it takes over its `xmax` and `ctid`, so the chain links over it ([`PrunePlan::relinked`]).
    /// `obsolete` must name only committed versions replaced by a committed transaction
    /// that no snapshot, running or future, sees (no snapshot starts in the version's
    /// interval): taking over the successor's `xmax` widens the kept member's interval by
    /// intervals no snapshot starts in. It must never name a row's newest version.
    pub fn prune(
        &mut self,
        dead: &dyn Fn(&TupleHeader) -> bool,
        obsolete: &dyn Fn(u16, &TupleHeader) -> bool,
    ) -> Pruned {
        let (plan, pruned) = self.plan_prune(dead, obsolete);
        self.execute_prune(&plan)
            .expect("a plan made from this page applies to it");
        pruned
    }
}

/// For [`HeapPage::prune`] without eager pruning: nothing is obsolete beyond `dead`.
pub fn nothing_obsolete(_line: u16, _header: &TupleHeader) -> bool {
    false
}

impl<B: AsRef<[u8]>> HeapPage<B> {
    /// Decides what [`HeapPage::prune`] changes, changing nothing.
    pub fn plan_prune(
        &self,
        dead: &dyn Fn(&TupleHeader) -> bool,
        obsolete: &dyn Fn(u16, &TupleHeader) -> bool,
    ) -> (PrunePlan, Pruned) {
        let mut plan = PrunePlan::default();
        let mut pruned = Pruned::default();
        let lines = self.lines();
        let mut on_a_chain = vec![false; lines as usize + 1];
        for root in 1..=lines {
            let is_root = match self.line(root) {
                Line::Redirect(_) => true,
                Line::Normal { .. } => !self.header(root).expect("normal").has(infomask::HEAP_ONLY),
                _ => false,
            };
            if !is_root {
                continue;
            }
            // Chains are disjoint (H4): deciding one never depends on another's fate.
            let chain = self.chain(root);
            for &member in &chain {
                on_a_chain[member as usize] = true;
            }
            let headers: Vec<TupleHeader> = chain
                .iter()
                .map(|&m| self.header(m).expect("a chain's members are tuples"))
                .collect();
            let is_dead: Vec<bool> = headers.iter().map(dead).collect();
            // Dead members from the chain's start go, up to the first that is not
            // (PostgreSQL's `heap_prune_chain`). After that one, a dead member can only be
            // an aborted update's version (a committed successor of a live version is
            // live): it and what its creator chained after it go too.
            let live_from = is_dead.iter().take_while(|&&d| d).count();
            let live_to = is_dead[live_from..]
                .iter()
                .position(|&d| d)
                .map_or(chain.len(), |at| live_from + at);
            // Eager pruning: live members no snapshot sees go as well.
            let removed: Vec<bool> = (0..chain.len())
                .map(|at| !(live_from..live_to).contains(&at) || obsolete(chain[at], &headers[at]))
                .collect();
            if !removed.contains(&true) {
                continue;
            }
            for (at, &member) in chain.iter().enumerate() {
                if !removed[at] {
                    continue;
                }
                let Line::Normal { len, .. } = self.line(member) else {
                    unreachable!()
                };
                pruned.tuples_removed += 1;
                pruned.bytes_freed += u32::from(len);
                if (live_from..live_to).contains(&at) {
                    pruned.removed_eagerly += 1;
                }
                if member != root {
                    plan.unused.push(member);
                    pruned.lines_freed += 1;
                }
            }
            // A kept member followed by removed live ones takes over the last one's
            // successor: its `xmax` is the next kept member's `xmin` (or the cold
            // successor's, or the deleter's), so the chain check (`xmin` = previous
            // `xmax`) holds across the gap. A gap reaching past `live_to` cannot start
            // after a kept member: an obsolete member's `xmax` committed, so the member
            // after it is not an aborted update's.
            for (at, header) in headers.iter().enumerate().take(live_to) {
                if removed[at] || at + 1 >= live_to || !removed[at + 1] {
                    continue;
                }
                let last = (at + 1..live_to)
                    .take_while(|&gap| removed[gap])
                    .last()
                    .expect("the gap has a member");
                let successor = &headers[last];
                const LINK: u16 =
                    infomask::HOT_UPDATED | infomask::XMAX_COMMITTED | infomask::XMAX_INVALID;
                let relinked = TupleHeader {
                    xmax: successor.xmax,
                    ctid_block: successor.ctid_block,
                    ctid_line: successor.ctid_line,
                    infomask: (header.infomask & !LINK) | (successor.infomask & LINK),
                    ..*header
                };
                debug_assert_ne!(relinked.xmax, 0, "a removed member was replaced");
                plan.relinked.push((chain[at], relinked));
            }
            match (0..chain.len()).find(|&at| !removed[at]) {
                Some(first_kept) => {
                    let first_kept = chain[first_kept];
                    if first_kept != root && self.line(root) != Line::Redirect(first_kept) {
                        plan.redirected.push((root, first_kept));
                        pruned.redirected += 1;
                    }
                }
                None => {
                    plan.dead.push(root);
                    pruned.lines_dead += 1;
                }
            }
        }
        // Heap-only tuples no chain reaches: aborted updates' new versions.
        for line in 1..=lines {
            if on_a_chain[line as usize] {
                continue;
            }
            if let (Some(header), Line::Normal { len, .. }) = (self.header(line), self.line(line)) {
                if header.has(infomask::HEAP_ONLY) && dead(&header) {
                    plan.unused.push(line);
                    pruned.tuples_removed += 1;
                    pruned.lines_freed += 1;
                    pruned.bytes_freed += u32::from(len);
                }
            }
        }
        (plan, pruned)
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> HeapPage<B> {
    /// Applies a prune's plan: the relinked headers, the redirects, dead and unused lines,
    /// then packs the tuples
    /// together and clears the prune hint. Fails (changing nothing) if the plan names a
    /// line the page does not have, or leaves the page breaking H1-H4: redo of a logged
    /// prune on a page that is not the one it was planned on.
    pub fn execute_prune(&mut self, plan: &PrunePlan) -> Result<(), String> {
        let lines = self.lines();
        let in_range = |line: u16| (1..=lines).contains(&line);
        if let Some(bad) = plan
            .redirected
            .iter()
            .flat_map(|&(root, target)| [root, target])
            .chain(plan.dead.iter().copied())
            .chain(plan.unused.iter().copied())
            .chain(plan.relinked.iter().map(|&(line, _)| line))
            .find(|&line| !in_range(line))
        {
            return Err(format!("a prune of line {bad} on a page of {lines} lines"));
        }
        let before = self.b().to_vec();
        for (line, header) in &plan.relinked {
            if !self.set_header(*line, header) {
                self.m().copy_from_slice(&before);
                return Err(format!("a prune relinks line {line}, which holds no tuple"));
            }
        }
        for &(root, target) in &plan.redirected {
            self.set_line(root, Line::Redirect(target));
        }
        for &line in &plan.dead {
            self.set_line(line, Line::Dead);
        }
        for &line in &plan.unused {
            self.set_line(line, Line::Unused);
        }
        if let Err(reason) = self.check() {
            self.m().copy_from_slice(&before);
            return Err(format!("the prune leaves the page broken: {reason}"));
        }
        self.repair_fragmentation();
        // The hint becomes the smallest xmax left that a later prune may find dead (one
        // not known aborted), as PostgreSQL sets `pd_prune_xid` to the oldest remaining
        // in-progress deleter: clearing it would leave those versions unpruned on access
        // once their deleter commits. A function of the page's bytes, so redo agrees.
        let hint = (1..=self.lines())
            .filter_map(|line| self.header(line))
            .filter(|h| h.xmax != 0 && !h.has(infomask::XMAX_INVALID))
            .map(|h| h.xmax)
            .min()
            .unwrap_or(0);
        self.m()[8..16].copy_from_slice(&hint.to_le_bytes());
        debug_assert_eq!(self.check(), Ok(()));
        Ok(())
    }

    /// Marks dead lines unused, once vacuum removed every index entry that pointed at
    /// them. Returns how many it freed (a line that is not dead is left alone); fails,
    /// changing nothing, on a page that breaks H1-H4 (its tuples could not be packed).
    pub fn free_dead_lines(&mut self, lines: &[u16]) -> Result<u32, String> {
        self.check()?;
        let mut freed = 0;
        for &line in lines {
            if self.line(line) == Line::Dead {
                self.set_line(line, Line::Unused);
                freed += 1;
            }
        }
        self.repair_fragmentation();
        Ok(freed)
    }

    /// Packs the tuples at the end of the body, cuts trailing unused lines, and sets
    /// [`HAS_FREE_LINES`] if an unused line remains.
    fn repair_fragmentation(&mut self) {
        let mut tuples: Vec<(u16, Vec<u8>)> = (1..=self.lines())
            .filter_map(|l| match self.line(l) {
                Line::Normal { offset, len } => Some((
                    l,
                    self.b()[offset as usize..(offset + len) as usize].to_vec(),
                )),
                _ => None,
            })
            .collect();
        // Keep the order of offsets (newest lowest), as the page had them.
        tuples.sort_by_key(|(l, _)| match self.line(*l) {
            Line::Normal { offset, .. } => std::cmp::Reverse(offset),
            _ => unreachable!(),
        });
        let mut upper = BODY;
        for (line, bytes) in &tuples {
            upper -= bytes.len();
            self.m()[upper..upper + bytes.len()].copy_from_slice(bytes);
            self.set_line(
                *line,
                Line::Normal {
                    offset: upper as u16,
                    len: bytes.len() as u16,
                },
            );
        }
        self.put16(2, upper);
        let mut lines = self.lines();
        while lines > 0 && self.line(lines) == Line::Unused {
            lines -= 1;
        }
        self.put16(0, lines as usize);
        let free_lines = (1..=lines).any(|l| self.line(l) == Line::Unused);
        let flags = if free_lines {
            self.flags() | HAS_FREE_LINES
        } else {
            self.flags() & !HAS_FREE_LINES
        };
        self.put16(4, flags as usize);
        // Zero the gap, so freed bytes leave nothing behind on disk.
        let lower = self.lower();
        self.m()[lower..upper].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn page() -> HeapPage<Vec<u8>> {
        let mut page = HeapPage::new(vec![0u8; BODY]);
        page.init();
        page
    }

    fn tuple(xmin: u64) -> TupleHeader {
        TupleHeader {
            xmin,
            xmax: 0,
            ctid_block: 0,
            ctid_line: 0,
            infomask: 0,
        }
    }

    /// Inserts a new version of the row whose newest tuple is at `old`, as a HOT update.
    fn hot_update(page: &mut HeapPage<Vec<u8>>, old: u16, xid: u64, data: &[u8]) -> Option<u16> {
        let new = page.insert(
            &TupleHeader {
                infomask: infomask::HEAP_ONLY | infomask::UPDATED,
                ..tuple(xid)
            },
            data,
        )?;
        let mut header = page.header(old).unwrap();
        header.xmax = xid;
        header.ctid_line = new;
        header.infomask |= infomask::HOT_UPDATED;
        assert!(page.set_header(old, &header));
        Some(new)
    }

    fn dead_below(horizon: u64) -> impl Fn(&TupleHeader) -> bool {
        move |h: &TupleHeader| h.xmax != 0 && h.xmax <= horizon
    }

    /// Found by reading the pruning for the heap file: a chain whose newest member is an
    /// aborted update's version (dead at once) lost its live older member too, because
    /// everything up to the newest dead member went.
    #[test]
    fn regression_pruning_keeps_a_live_version_whose_update_aborted() {
        let mut page = page();
        let root = page.insert(&tuple(1), b"committed").unwrap();
        let aborted = hot_update(&mut page, root, 7, b"aborted update").unwrap();
        // Transaction 7 aborted: its version is dead, the root (its xmax aborted) lives.
        let dead = |h: &TupleHeader| h.xmin == 7;
        let pruned = page.prune(&dead, &nothing_obsolete);
        assert_eq!(pruned.tuples_removed, 1, "{pruned:?}");
        assert_eq!(page.data(root), Some(&b"committed"[..]));
        assert_eq!(page.line(aborted), Line::Unused);
        // A later insert may reuse the freed line: the root's stale link does not reach it.
        let other = page.insert(&tuple(9), b"unrelated").unwrap();
        assert_eq!(other, aborted);
        assert_eq!(page.chain(root), vec![root]);
        assert_eq!(page.check(), Ok(()));
    }

    #[test]
    fn pruning_a_hot_chain_redirects_its_root_to_the_first_live_version() {
        let mut page = page();
        let root = page.insert(&tuple(1), b"v1").unwrap();
        let a = hot_update(&mut page, root, 2, b"v2").unwrap();
        let b = hot_update(&mut page, a, 3, b"v3").unwrap();
        assert_eq!(page.chain(root), vec![root, a, b]);
        assert_eq!(page.prune_hint(), 2);
        let free = page.free_space();
        // A snapshot at 3 sees v3 only: v1 and v2 go.
        let pruned = page.prune(&dead_below(3), &nothing_obsolete);
        assert_eq!(
            pruned,
            Pruned {
                tuples_removed: 2,
                redirected: 1,
                lines_dead: 0,
                lines_freed: 1,
                bytes_freed: 2 * 26,
                removed_eagerly: 0,
            }
        );
        assert_eq!(page.line(root), Line::Redirect(b));
        assert_eq!(page.line(a), Line::Unused);
        assert_eq!(page.chain(root), vec![b]);
        assert_eq!(page.data(b), Some(&b"v3"[..]));
        assert_eq!(page.free_space(), free + 2 * 26);
        assert_eq!(page.flags() & HAS_FREE_LINES, HAS_FREE_LINES);
        assert_eq!(page.prune_hint(), 0);
        // The freed line is taken by the next insert.
        assert_eq!(page.insert(&tuple(4), b"x"), Some(a));
        assert_eq!(page.flags() & HAS_FREE_LINES, 0);
    }

    #[test]
    fn a_deleted_row_leaves_a_dead_root_until_vacuum_frees_it_and_an_aborted_update_goes() {
        let mut page = page();
        let keep = page.insert(&tuple(1), b"keep").unwrap();
        let root = page.insert(&tuple(1), b"v1").unwrap();
        let a = hot_update(&mut page, root, 2, b"v2").unwrap();
        let mut header = page.header(a).unwrap();
        header.xmax = 3; // deleted at 3
        page.set_header(a, &header);
        // An update by 4 that aborted: its heap-only tuple is reachable from no chain once
        // the row's link is reset, and dead to everyone.
        let orphan = page
            .insert(
                &TupleHeader {
                    infomask: infomask::HEAP_ONLY | infomask::XMIN_INVALID,
                    ..tuple(4)
                },
                b"no",
            )
            .unwrap();
        let dead = |h: &TupleHeader| (h.xmax != 0 && h.xmax <= 3) || h.has(infomask::XMIN_INVALID);
        let pruned = page.prune(&dead, &nothing_obsolete);
        assert_eq!(pruned.tuples_removed, 3);
        assert_eq!(page.line(root), Line::Dead);
        assert_eq!(
            (page.line(a), page.line(orphan)),
            (Line::Unused, Line::Unused)
        );
        // Trailing unused lines are cut: only `keep` and the dead root remain.
        assert_eq!(page.lines(), 2);
        assert_eq!(page.free_dead_lines(&[root, keep]), Ok(1));
        assert_eq!(page.lines(), 1);
        assert_eq!(page.data(keep), Some(&b"keep"[..]));
    }

    #[test]
    fn a_full_page_refuses_an_insert_and_takes_it_after_pruning() {
        let mut page = page();
        let data = vec![5u8; 1000];
        let mut last = page.insert(&tuple(1), &data).unwrap();
        let mut xid = 1;
        loop {
            xid += 1;
            match hot_update(&mut page, last, xid, &data) {
                Some(line) => last = line,
                None => break,
            }
        }
        assert!(!page.fits(data.len()));
        page.prune(&dead_below(xid), &nothing_obsolete);
        assert!(page.fits(data.len()));
        assert_eq!(page.data(last), Some(&data[..]));
    }

    /// Eager pruning's rule on a page whose ids are commit timestamps: a version is
    /// obsolete when its deleter committed below `horizon`, no start in `starts` falls in
    /// its interval (`xmin` < start <= `xmax`), and it is not a deleted row's last version.
    fn interval_obsolete(starts: Vec<u64>, horizon: u64) -> impl Fn(u16, &TupleHeader) -> bool {
        move |line: u16, h: &TupleHeader| {
            let deleted = h.ctid_line == line && !h.has(infomask::HOT_UPDATED);
            h.xmax != 0
                && h.xmax < horizon
                && !deleted
                && !starts.iter().any(|&s| h.xmin < s && s <= h.xmax)
        }
    }

    #[test]
    fn eager_pruning_removes_the_middle_of_a_chain_and_links_over_it() {
        let mut page = page();
        let root = page.insert(&tuple(1), b"v1").unwrap();
        let a = hot_update(&mut page, root, 2, b"v2").unwrap();
        let b = hot_update(&mut page, a, 3, b"v3").unwrap();
        let c = hot_update(&mut page, b, 4, b"v4").unwrap();
        // A snapshot that began at 2 reads v1; later ones read v4; nobody reads v2 or v3.
        let obsolete = interval_obsolete(vec![2], 5);
        let pruned = page.prune(&dead_below(0), &obsolete);
        assert_eq!((pruned.tuples_removed, pruned.removed_eagerly), (2, 2));
        assert_eq!(page.chain(root), vec![root, c]);
        let v1 = page.header(root).unwrap();
        assert_eq!((v1.xmax, v1.ctid_line), (4, c));
        assert!(v1.has(infomask::HOT_UPDATED));
        assert_eq!((page.line(a), page.line(b)), (Line::Unused, Line::Unused));
        assert_eq!(page.data(c), Some(&b"v4"[..]));
        assert_eq!(page.check(), Ok(()));
        // Once that snapshot ends, vanilla's rule takes v1 too.
        page.prune(&dead_below(4), &nothing_obsolete);
        assert_eq!(page.chain(root), vec![c]);
        assert_eq!(page.line(root), Line::Redirect(c));
    }

    #[test]
    fn eager_pruning_keeps_a_deleted_row_and_a_version_a_snapshot_reads() {
        let mut page = page();
        let root = page.insert(&tuple(1), b"v1").unwrap();
        let mut h = page.header(root).unwrap();
        h.ctid_line = root;
        page.set_header(root, &h);
        let a = hot_update(&mut page, root, 2, b"v2").unwrap();
        let mut h = page.header(a).unwrap();
        h.ctid_line = a;
        h.xmax = 3; // deleted at 3
        page.set_header(a, &h);
        // A snapshot at 2 reads v1; v2 no one reads, but it is the row's last version: a
        // writer of the key must still meet its deleter.
        let pruned = page.prune(&dead_below(0), &interval_obsolete(vec![2], 10));
        assert_eq!(pruned.tuples_removed, 0);
        assert_eq!(page.chain(root), vec![root, a]);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8),
        Update(usize, u8),
        Delete(usize),
        Prune(u64),
        Vacuum,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (1u8..200).prop_map(Op::Insert),
            5 => (any::<usize>(), 1u8..200).prop_map(|(r, n)| Op::Update(r, n)),
            1 => any::<usize>().prop_map(Op::Delete),
            2 => (0u64..6).prop_map(Op::Prune),
            1 => Just(Op::Vacuum),
        ]
    }

    struct Row {
        root: u16,
        /// (xmin, xmax, data), oldest first.
        versions: Vec<(u64, u64, Vec<u8>)>,
    }

    /// Applies an insert, HOT update or delete (`Op::Insert`, `Op::Update`,
    /// `Op::Delete`) to the page and to the model rows, at the next id after `now`;
    /// other ops and writes to a deleted row or an empty model do nothing. A delete names
    /// the tuple itself in `ctid`, as the heap file's do.
    fn apply_write(page: &mut HeapPage<Vec<u8>>, rows: &mut Vec<Row>, now: &mut u64, op: &Op) {
        match *op {
            Op::Insert(n) => {
                *now += 1;
                if let Some(line) = page.insert(&tuple(*now), &vec![n; n as usize]) {
                    let mut h = page.header(line).unwrap();
                    h.ctid_line = line;
                    page.set_header(line, &h);
                    rows.push(Row {
                        root: line,
                        versions: vec![(*now, 0, vec![n; n as usize])],
                    });
                }
            }
            Op::Update(r, n) if !rows.is_empty() => {
                let row = r % rows.len();
                if rows[row].versions.last().unwrap().1 != 0 {
                    return; // deleted
                }
                let newest = *page.chain(rows[row].root).last().unwrap();
                *now += 1;
                if hot_update(page, newest, *now, &vec![n; n as usize]).is_some() {
                    rows[row].versions.last_mut().unwrap().1 = *now;
                    rows[row].versions.push((*now, 0, vec![n; n as usize]));
                }
            }
            Op::Delete(r) if !rows.is_empty() => {
                let row = r % rows.len();
                if rows[row].versions.last().unwrap().1 != 0 {
                    return;
                }
                let newest = *page.chain(rows[row].root).last().unwrap();
                *now += 1;
                let mut h = page.header(newest).unwrap();
                h.xmax = *now;
                h.ctid_line = newest;
                page.set_header(newest, &h);
                rows[row].versions.last_mut().unwrap().1 = *now;
            }
            _ => {}
        }
    }

    proptest! {
        /// The checker of on-disk bytes never panics, whatever the bytes.
        #[test]
        fn checking_any_bytes_never_panics(
            words in proptest::collection::vec((0usize..BODY, any::<u32>()), 0..64),
            lines in 0u16..40,
            upper in 0u16..9000,
        ) {
            let mut body = vec![0u8; BODY];
            body[0..2].copy_from_slice(&lines.to_le_bytes());
            body[2..4].copy_from_slice(&upper.to_le_bytes());
            for (at, word) in words {
                let at = at.min(BODY - 4);
                body[at..at + 4].copy_from_slice(&word.to_le_bytes());
            }
            let page = HeapPage::new(body);
            let _ = page.check();
        }

        /// Random inserts, HOT updates, deletes, prunes at horizons lagging the clock, and
        /// vacuums: every version the oldest snapshot can see stays reachable from its
        /// row's root, every row's newest version is its chain's end, and the page holds
        /// its invariants throughout.
        #[test]
        fn pruning_keeps_every_version_a_snapshot_can_see(ops in proptest::collection::vec(op(), 1..200)) {
            let mut page = page();
            let mut rows: Vec<Row> = Vec::new();
            let mut now = 1u64;
            let mut oldest_snapshot = 1u64;
            for op in ops {
                match op {
                    Op::Insert(_) | Op::Update(..) | Op::Delete(_) => {
                        apply_write(&mut page, &mut rows, &mut now, &op);
                    }
                    Op::Prune(lag) => {
                        oldest_snapshot = oldest_snapshot.max(now.saturating_sub(lag));
                        page.prune(&dead_below(oldest_snapshot), &nothing_obsolete);
                    }
                    Op::Vacuum => {
                        // Vacuum removed the index entries of dead roots: free their lines.
                        let dead: Vec<u16> = rows.iter().map(|r| r.root).filter(|&l| page.line(l) == Line::Dead).collect();
                        page.free_dead_lines(&dead).unwrap();
                        rows.retain(|r| !dead.contains(&r.root));
                    }
                }
                prop_assert_eq!(page.check(), Ok(()));
                for row in &rows {
                    let chain = page.chain(row.root);
                    let reachable: Vec<u64> = chain.iter().map(|&l| page.header(l).unwrap().xmin).collect();
                    // What the oldest snapshot (and every later one) may read is there.
                    for (xmin, xmax, data) in &row.versions {
                        let needed = *xmax == 0 || *xmax > oldest_snapshot;
                        if needed {
                            let at = reachable.iter().position(|x| x == xmin);
                            prop_assert!(at.is_some(), "row at {} lost version {}", row.root, xmin);
                            prop_assert_eq!(page.data(chain[at.unwrap()]), Some(&data[..]));
                        }
                    }
                    if row.versions.last().unwrap().1 == 0 {
                        prop_assert_eq!(reachable.last(), Some(&row.versions.last().unwrap().0));
                    }
                }
            }
        }
    }

    #[derive(Clone, Debug)]
    enum EagerOp {
        Write(Op),
        Begin,
        End(usize),
    }

    fn eager_op() -> impl Strategy<Value = EagerOp> {
        prop_oneof![
            8 => op().prop_map(EagerOp::Write),
            1 => Just(EagerOp::Begin),
            1 => any::<usize>().prop_map(EagerOp::End),
        ]
    }

    proptest! {
        /// Eager pruning under random snapshots (ids are commit timestamps; a snapshot
        /// starting at `s` sees ids below `s`): after every prune, every active snapshot
        /// and every future one reads from the page exactly the version the model says, a
        /// deleted row keeps its deleter, and the page holds its invariants.
        #[test]
        fn eager_pruning_keeps_what_every_snapshot_reads(ops in proptest::collection::vec(eager_op(), 1..200)) {
            let mut page = page();
            let mut rows: Vec<Row> = Vec::new();
            let mut now = 1u64;
            let mut active: Vec<u64> = Vec::new();
            for op in ops {
                match op {
                    EagerOp::Begin => active.push(now + 1),
                    EagerOp::End(i) if !active.is_empty() => {
                        active.remove(i % active.len());
                    }
                    EagerOp::Write(op @ (Op::Insert(_) | Op::Update(..) | Op::Delete(_))) => {
                        apply_write(&mut page, &mut rows, &mut now, &op);
                    }
                    EagerOp::Write(Op::Prune(_)) => {
                        let horizon = now + 1;
                        let oldest = active.iter().copied().min().unwrap_or(horizon);
                        let dead = move |h: &TupleHeader| h.xmax != 0 && h.xmax < oldest;
                        page.prune(&dead, &interval_obsolete(active.clone(), horizon));
                    }
                    EagerOp::Write(Op::Vacuum) => {
                        let dead: Vec<u16> = rows.iter().map(|r| r.root).filter(|&l| page.line(l) == Line::Dead).collect();
                        page.free_dead_lines(&dead).unwrap();
                        rows.retain(|r| !dead.contains(&r.root));
                    }
                    _ => {}
                }
                prop_assert_eq!(page.check(), Ok(()));
                let future = now + 1;
                for row in &rows {
                    let chain = page.chain(row.root);
                    for &s in active.iter().chain([&future]) {
                        let sees = |xmin: u64, xmax: u64| xmin < s && (xmax == 0 || xmax >= s);
                        let expected = row.versions.iter().find(|v| sees(v.0, v.1)).map(|v| &v.2[..]);
                        let found = chain
                            .iter()
                            .find(|&&l| { let h = page.header(l).unwrap(); sees(h.xmin, h.xmax) })
                            .map(|&l| page.data(l).unwrap());
                        prop_assert_eq!(found, expected, "row at {} for the snapshot at {}", row.root, s);
                    }
                    let last = row.versions.last().unwrap();
                    if page.line(row.root) != Line::Dead {
                        let newest = page.header(*chain.last().unwrap()).unwrap();
                        prop_assert_eq!((newest.xmin, newest.xmax), (last.0, last.1));
                    }
                }
            }
        }
    }
}
