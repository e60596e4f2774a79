//! Sparse, byte-addressable memories that kernels can wait on.
//!
//! A simulation owns any number of *spaces* (the hardware layer makes one per core L1, per DRAM
//! bank, ...). Each space has a name and a size; storage is allocated a page at a time on first
//! write, so a 1 GiB DRAM bank costs nothing until it is used. Unwritten bytes read as zero.
//! Words are 32-bit little-endian, 4-byte aligned.
//!
//! The memory only stores bytes. Waking tasks whose watched word changed is the scheduler's job
//! (see `Scheduler::write_bytes`), so every write goes through the scheduler.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;

use thiserror::Error;

/// Bytes per storage page.
const PAGE_BYTES: u64 = 4096;

/// Identifies one memory space of a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MemSpace(pub u32);

/// An access outside a space, or a misaligned word access.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MemError {
    /// The byte range does not lie inside the space.
    #[error("access of {len} bytes at {addr:#x} is outside {space} (size {size:#x})")]
    OutOfRange {
        /// The space's name.
        space: String,
        /// First byte accessed.
        addr: u64,
        /// Bytes accessed.
        len: u64,
        /// Size of the space in bytes.
        size: u64,
    },
    /// A word access at an address that is not 4-byte aligned.
    #[error("word access at {addr:#x} in {space} is not 4-byte aligned")]
    Misaligned {
        /// The space's name.
        space: String,
        /// The address.
        addr: u64,
    },
}

/// A condition on a 32-bit word that a waiting task wants to hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cond {
    /// The word equals the value.
    Eq(u32),
    /// The word differs from the value.
    Ne(u32),
    /// The word is at least the value (unsigned).
    Ge(u32),
    /// The word is greater than the value (unsigned).
    Gt(u32),
    /// The word is at most the value (unsigned).
    Le(u32),
    /// The word is less than the value (unsigned).
    Lt(u32),
}

impl Cond {
    /// Whether `value` satisfies the condition.
    pub fn holds(self, value: u32) -> bool {
        match self {
            Cond::Eq(v) => value == v,
            Cond::Ne(v) => value != v,
            Cond::Ge(v) => value >= v,
            Cond::Gt(v) => value > v,
            Cond::Le(v) => value <= v,
            Cond::Lt(v) => value < v,
        }
    }
}

impl fmt::Display for Cond {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (op, v) = match *self {
            Cond::Eq(v) => ("==", v),
            Cond::Ne(v) => ("!=", v),
            Cond::Ge(v) => (">=", v),
            Cond::Gt(v) => (">", v),
            Cond::Le(v) => ("<=", v),
            Cond::Lt(v) => ("<", v),
        };
        write!(f, "{op} {v}")
    }
}

type Page = Box<[u8; PAGE_BYTES as usize]>;

struct Space {
    name: String,
    /// What the event log records for it: its id, or the id it would have had in a larger
    /// build of which this one creates a part ([`Memory::add_space_keyed`]).
    key: u32,
    size: u64,
    /// Page `i` holds bytes `[i * PAGE_BYTES, (i + 1) * PAGE_BYTES)`; grown on first write, so a
    /// space costs one pointer per page up to the highest page written.
    pages: Vec<Option<Page>>,
    /// Names of words that reports should call by name, by address; shared between spaces
    /// laid out alike ([`Memory::share_labels`]) until one of them names a word of its own.
    labels: Rc<Vec<(u64, Cow<'static, str>)>>,
}

/// All memory spaces of one simulation.
#[derive(Default)]
pub struct Memory {
    spaces: Vec<Space>,
    allocated_pages: u64,
}

impl Memory {
    /// Adds a space of `size` bytes named `name` (used in error messages and reports).
    pub fn add_space(&mut self, name: impl Into<String>, size: u64) -> MemSpace {
        let key = u32::try_from(self.spaces.len()).expect("too many memory spaces");
        self.add_space_keyed(name, size, key)
    }

    /// Adds a space as [`Memory::add_space`] does, whose event-log key is `key`: a world that
    /// builds only some of its spaces keys each by the id it has where all are built, so that
    /// the same run logs the same events either way.
    pub fn add_space_keyed(&mut self, name: impl Into<String>, size: u64, key: u32) -> MemSpace {
        let id = MemSpace(u32::try_from(self.spaces.len()).expect("too many memory spaces"));
        self.spaces.push(Space { name: name.into(), key, size, pages: Vec::new(), labels: Rc::default() });
        id
    }

    /// A space's event-log key ([`Memory::add_space_keyed`]).
    pub fn key(&self, space: MemSpace) -> u32 {
        self.spaces[space.0 as usize].key
    }

    /// The name a space was created with.
    pub fn name(&self, space: MemSpace) -> &str {
        &self.spaces[space.0 as usize].name
    }

    /// Names the word at `addr` (say, "noc reads outstanding") for traces and deadlock reports;
    /// a later name replaces an earlier one in place.
    pub fn label_word(&mut self, space: MemSpace, addr: u64, label: impl Into<Cow<'static, str>>) {
        let labels = Rc::make_mut(&mut self.spaces[space.0 as usize].labels);
        match labels.iter_mut().find(|l| l.0 == addr) {
            Some(l) => l.1 = label.into(),
            None => labels.push((addr, label.into())),
        }
    }

    /// Gives space `to` the names of `from`'s words (a space laid out as another: every core of
    /// a kind), shared rather than copied; naming a word of either afterwards parts them.
    pub fn share_labels(&mut self, from: MemSpace, to: MemSpace) {
        self.spaces[to.0 as usize].labels = Rc::clone(&self.spaces[from.0 as usize].labels);
    }

    /// The name given to the word at `addr`, if any.
    pub fn word_label(&self, space: MemSpace, addr: u64) -> Option<&str> {
        self.spaces[space.0 as usize].labels.iter().find(|l| l.0 == addr).map(|l| &*l.1)
    }

    /// The word at `addr` as reports show it: `space[0xaddr]`, followed by its label if named.
    pub fn describe(&self, space: MemSpace, addr: u64) -> String {
        match self.word_label(space, addr) {
            Some(label) => format!("{}[{addr:#x}] ({label})", self.name(space)),
            None => format!("{}[{addr:#x}]", self.name(space)),
        }
    }

    /// The size of a space in bytes.
    pub fn size(&self, space: MemSpace) -> u64 {
        self.spaces[space.0 as usize].size
    }

    /// Checks that `[addr, addr + len)` lies inside `space`.
    pub fn check_range(&self, space: MemSpace, addr: u64, len: u64) -> Result<(), MemError> {
        let s = &self.spaces[space.0 as usize];
        match addr.checked_add(len) {
            Some(end) if end <= s.size => Ok(()),
            _ => Err(MemError::OutOfRange { space: s.name.clone(), addr, len, size: s.size }),
        }
    }

    /// Checks a word access and returns the page index and offset of the word.
    #[inline]
    fn word_at(&self, space: MemSpace, addr: u64) -> Result<(usize, usize), MemError> {
        let s = &self.spaces[space.0 as usize];
        if addr % 4 != 0 || addr >= s.size || s.size - addr < 4 {
            return Err(self.word_error(space, addr));
        }
        // An aligned word never crosses a page.
        Ok(((addr / PAGE_BYTES) as usize, (addr % PAGE_BYTES) as usize))
    }

    #[cold]
    fn word_error(&self, space: MemSpace, addr: u64) -> MemError {
        let s = &self.spaces[space.0 as usize];
        if addr % 4 != 0 {
            MemError::Misaligned { space: s.name.clone(), addr }
        } else {
            MemError::OutOfRange { space: s.name.clone(), addr, len: 4, size: s.size }
        }
    }

    /// Reads `buf.len()` bytes at `addr`.
    pub fn read(&self, space: MemSpace, addr: u64, buf: &mut [u8]) -> Result<(), MemError> {
        self.check_range(space, addr, buf.len() as u64)?;
        let pages = &self.spaces[space.0 as usize].pages;
        let mut done = 0usize;
        while done < buf.len() {
            let at = addr + done as u64;
            let (page, off) = ((at / PAGE_BYTES) as usize, (at % PAGE_BYTES) as usize);
            let n = (PAGE_BYTES as usize - off).min(buf.len() - done);
            match pages.get(page) {
                Some(Some(p)) => buf[done..done + n].copy_from_slice(&p[off..off + n]),
                _ => buf[done..done + n].fill(0),
            }
            done += n;
        }
        Ok(())
    }

    /// Writes `data` at `addr`. Prefer `Scheduler::write_bytes`, which also wakes watchers.
    pub(crate) fn write(&mut self, space: MemSpace, addr: u64, data: &[u8]) -> Result<(), MemError> {
        self.check_range(space, addr, data.len() as u64)?;
        let mut done = 0usize;
        while done < data.len() {
            let at = addr + done as u64;
            let (page, off) = ((at / PAGE_BYTES) as usize, (at % PAGE_BYTES) as usize);
            let n = (PAGE_BYTES as usize - off).min(data.len() - done);
            self.page_mut(space, page)[off..off + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    fn page_mut(&mut self, space: MemSpace, page: usize) -> &mut [u8; PAGE_BYTES as usize] {
        let pages = &mut self.spaces[space.0 as usize].pages;
        if pages.len() <= page {
            pages.resize_with(page + 1, || None);
        }
        let slot = &mut pages[page];
        if slot.is_none() {
            self.allocated_pages += 1;
        }
        slot.get_or_insert_with(|| Box::new([0; PAGE_BYTES as usize]))
    }

    /// Reads the 32-bit little-endian word at the 4-byte aligned `addr`.
    #[inline]
    pub fn read_u32(&self, space: MemSpace, addr: u64) -> Result<u32, MemError> {
        let (page, off) = self.word_at(space, addr)?;
        Ok(match self.spaces[space.0 as usize].pages.get(page) {
            Some(Some(p)) => u32::from_le_bytes(p[off..off + 4].try_into().expect("4 bytes")),
            _ => 0,
        })
    }

    #[inline]
    pub(crate) fn write_u32(&mut self, space: MemSpace, addr: u64, value: u32) -> Result<(), MemError> {
        let (page, off) = self.word_at(space, addr)?;
        self.page_mut(space, page)[off..off + 4].copy_from_slice(&value.to_le_bytes());
        Ok(())
    }

    /// Bytes of storage allocated so far (whole pages).
    pub fn allocated_bytes(&self) -> u64 {
        self.allocated_pages * PAGE_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces_laid_out_alike_share_word_names_until_one_names_its_own() {
        let mut m = Memory::default();
        let (a, b) = (m.add_space("chip0/eth0/l1", 64), m.add_space("chip1/eth0/l1", 64));
        m.label_word(a, 16, "semaphore 0");
        m.share_labels(a, b);
        assert_eq!(m.describe(b, 16), "chip1/eth0/l1[0x10] (semaphore 0)");
        // Naming a word of one leaves the other as it was.
        m.label_word(b, 16, "edm channel 0");
        m.label_word(b, 32, "edm channel 1");
        assert_eq!((m.word_label(a, 16), m.word_label(a, 32)), (Some("semaphore 0"), None));
        assert_eq!(m.word_label(b, 16), Some("edm channel 0"));
    }

    #[test]
    fn unwritten_memory_reads_zero_and_writes_cross_pages() {
        let mut m = Memory::default();
        let s = m.add_space("chip0/eth0/l1", 3 * PAGE_BYTES);
        let data: Vec<u8> = (0..6000u32).map(|i| (i % 251) as u8).collect();
        m.write(s, 100, &data).unwrap();
        let mut back = vec![0u8; 6000];
        m.read(s, 100, &mut back).unwrap();
        assert_eq!(back, data);
        assert_eq!(m.read_u32(s, 8192 + 4000).unwrap(), 0);
        assert_eq!(m.allocated_bytes(), 2 * PAGE_BYTES);
    }

    #[test]
    fn out_of_range_and_misaligned_accesses_are_errors_naming_the_space() {
        let mut m = Memory::default();
        let s = m.add_space("chip1/eth8/l1", 64);
        let err = m.write(s, 60, &[0; 8]).unwrap_err();
        assert!(err.to_string().contains("chip1/eth8/l1"), "{err}");
        assert!(matches!(m.read_u32(s, 2), Err(MemError::Misaligned { .. })));
        assert!(m.write_u32(s, u64::MAX - 1, 1).is_err());
    }

    #[test]
    fn conditions_compare_unsigned() {
        assert!(Cond::Ge(3).holds(u32::MAX));
        assert!(!Cond::Lt(3).holds(3));
        assert_eq!(Cond::Ne(0).to_string(), "!= 0");
    }
}
