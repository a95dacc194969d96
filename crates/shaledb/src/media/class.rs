//! Media classes: the kinds of device a KVDB spreads its segments over.

/// A class of media. Only `Capacity` is required; `Staging` is the optional fast class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MediaClass {
    Staging = 0,
    Capacity = 1,
}

impl MediaClass {
    pub const ALL: [MediaClass; 2] = [MediaClass::Staging, MediaClass::Capacity];

    pub fn name(self) -> &'static str {
        match self {
            MediaClass::Staging => "staging",
            MediaClass::Capacity => "capacity",
        }
    }

    pub(crate) fn from_byte(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(MediaClass::Staging),
            1 => Some(MediaClass::Capacity),
            _ => None,
        }
    }
}
