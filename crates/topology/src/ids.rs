//! The dense indices a resolved [`crate::Cluster`] hands out: chips and links.

/// Dense index of a chip in a [`crate::Cluster`] (`0..chips().len()`, in ascending file-id order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChipIdx(pub u32);

/// Dense index of a link in a [`crate::Cluster`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);
