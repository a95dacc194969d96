//! The tuning knobs of RocksDB's option objects, most of which have no ShaleDB meaning: each
//! setter exists and records its value, each getter returns what was set or RocksDB's default,
//! and the open writes them all to the database's `LOG` as RocksDB does. The few a ShaleDB
//! open uses are read back by name (see `options.rs`).

use std::collections::BTreeMap;
use std::fmt::Write;

/// A scalar as c.h passes it, stored as 64 bits.
pub(crate) trait Scalar: Copy {
    fn to_bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
    /// How RocksDB's options dump prints it.
    fn show(bits: u64) -> String;
    /// Reads it from an options string ("true"/"false" for flags), as bits.
    fn parse(text: &str) -> Option<u64>;
    /// The value a setter keeps: a flag (c.h's `unsigned char`) is kept as 0 or 1, as
    /// RocksDB's setters store a `bool`.
    fn normalize(self) -> Self {
        self
    }
}

/// An integer scalar. `$normalize` turns what a setter or an options string gives into the
/// value kept: as given, except for flags (c.h's `unsigned char`), kept as 0 or 1.
macro_rules! integer_scalar {
    ($t:ty) => {
        integer_scalar!($t, |value: $t| value);
    };
    ($t:ty, $normalize:expr) => {
        impl Scalar for $t {
            fn to_bits(self) -> u64 {
                self as u64
            }
            fn from_bits(bits: u64) -> Self {
                bits as $t
            }
            fn show(bits: u64) -> String {
                Self::from_bits(bits).to_string()
            }
            fn parse(text: &str) -> Option<u64> {
                match text {
                    "true" => Some(1),
                    "false" => Some(0),
                    _ => text
                        .parse::<$t>()
                        .ok()
                        .map(|value| $normalize(value).to_bits()),
                }
            }
            fn normalize(self) -> Self {
                $normalize(self)
            }
        }
    };
}

integer_scalar!(i8);
integer_scalar!(i32);
integer_scalar!(u32);
integer_scalar!(i64);
integer_scalar!(u64);
integer_scalar!(usize);
integer_scalar!(u8, |flag: u8| u8::from(flag != 0));

impl Scalar for f64 {
    fn to_bits(self) -> u64 {
        f64::to_bits(self)
    }
    fn from_bits(bits: u64) -> Self {
        f64::from_bits(bits)
    }
    fn show(bits: u64) -> String {
        format!("{:.6}", f64::from_bits(bits))
    }
    fn parse(text: &str) -> Option<u64> {
        text.parse::<f64>().ok().map(f64::to_bits)
    }
}

/// One knob of an option object: the setter's C name (its key), the name RocksDB's options
/// dump gives it, its default, and how to print it.
pub(crate) struct Knob {
    pub setter: &'static str,
    pub name: &'static str,
    pub default: fn() -> u64,
    pub show: fn(u64) -> String,
    pub parse: fn(&str) -> Option<u64>,
}

/// The values a program set on one option object, by setter name.
#[derive(Clone, Default, Debug)]
pub(crate) struct Settings {
    values: BTreeMap<&'static str, u64>,
}

impl Settings {
    pub fn set<T: Scalar>(&mut self, setter: &'static str, value: T) {
        self.values.insert(setter, value.to_bits());
    }

    /// Records every value `other` holds (an option object copied into another, as
    /// `rocksdb_options_set_universal_compaction_options` does).
    pub fn absorb(&mut self, other: &Settings) {
        self.values
            .extend(other.values.iter().map(|(k, v)| (*k, *v)));
    }

    /// Sets the knob RocksDB's options strings call `name` to `value` (as text).
    pub fn set_by_name(
        &mut self,
        knobs: &[Knob],
        name: &str,
        value: &str,
    ) -> crate::status::Result<()> {
        let knob = knobs.iter().find(|knob| knob.name == name).ok_or_else(|| {
            crate::status::Status::invalid(format!("Could not find option: {name}"))
        })?;
        let bits = (knob.parse)(value.trim()).ok_or_else(|| {
            crate::status::Status::invalid(format!("Invalid value for option {name}: {value}"))
        })?;
        self.values.insert(knob.setter, bits);
        Ok(())
    }

    /// The value set by `setter`, or `default`.
    pub fn get<T: Scalar>(&self, setter: &str, default: T) -> T {
        self.values
            .get(setter)
            .map_or(default, |bits| T::from_bits(*bits))
    }

    /// The value set by `setter`, or the default its knob in `knobs` (its object's table)
    /// gives: one place for each default, which the getter also returns.
    pub fn value<T: Scalar>(&self, knobs: &[Knob], setter: &str) -> T {
        let bits = self.values.get(setter).copied().unwrap_or_else(|| {
            let knob = knobs.iter().find(|knob| knob.setter == setter);
            (knob
                .expect("a knob read by name is in its object's table")
                .default)()
        });
        T::from_bits(bits)
    }

    /// A boolean knob (an unsigned char in c.h).
    pub fn flag(&self, knobs: &[Knob], setter: &str) -> bool {
        self.value::<u8>(knobs, setter) != 0
    }

    /// `  name: value` per knob, in `knobs`' order, as RocksDB's LOG lists options.
    pub fn dump(&self, knobs: &[Knob], indent: &str, out: &mut String) {
        for knob in knobs {
            let bits = self
                .values
                .get(knob.setter)
                .copied()
                .unwrap_or_else(knob.default);
            let _ = writeln!(out, "{indent}{}: {}", knob.name, (knob.show)(bits));
        }
    }
}

/// Defines, for option object `$object` (a struct with a `settings: Settings` field), each
/// recorded knob's setter and (where c.h has one) getter, and the table `$knobs` of them all.
/// `name` is how RocksDB's options dump names the knob (`-` when it is the setter's suffix).
macro_rules! recorded_knobs {
    ($object:ident, $knobs:ident, $prefix:literal {
        $( $setter:ident ( $t:ty ) $( => $getter:ident ( $gt:ty ) )? = $default:expr, $name:tt; )*
    }) => {
        $(
            #[no_mangle]
            pub extern "C" fn $setter(object: *mut $object, value: $t) {
                crate::status::quiet((), || {
                    if let Ok(object) = crate::args::handle_mut(object, stringify!($object)) {
                        object.settings.set(
                            stringify!($setter),
                            <$t as crate::settings::Scalar>::normalize(value),
                        );
                    }
                })
            }
            $(
                #[no_mangle]
                pub extern "C" fn $getter(object: *mut $object) -> $gt {
                    crate::status::quiet($default as $gt, || {
                        crate::args::handle(object, stringify!($object)).map_or(
                            $default as $gt,
                            |object| object.settings.get::<$t>(stringify!($setter), $default as $t) as $gt,
                        )
                    })
                }
            )?
        )*
        // Not every object's knobs are dumped to the LOG (per-call options are not).
        #[allow(dead_code)]
        pub(crate) const $knobs: &[crate::settings::Knob] = &[
            $(
                crate::settings::Knob {
                    setter: stringify!($setter),
                    name: recorded_knobs!(@name $setter, $prefix, $name),
                    default: || <$t as crate::settings::Scalar>::to_bits($default as $t),
                    show: <$t as crate::settings::Scalar>::show,
                    parse: <$t as crate::settings::Scalar>::parse,
                },
            )*
        ];
    };
    (@name $setter:ident, $prefix:literal, -) => {
        // The setter's name past its object's `..._set_`.
        crate::settings::suffix(stringify!($setter), $prefix)
    };
    (@name $setter:ident, $prefix:literal, $name:literal) => {
        $name
    };
}

pub(crate) use recorded_knobs;

/// Defines `create` and `destroy` for option objects made with `Default`.
macro_rules! option_object {
    ($($object:ident: $create:ident, $destroy:ident;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $create() -> *mut $object {
            crate::args::into_handle($object::default())
        }

        #[no_mangle]
        pub extern "C" fn $destroy(object: *mut $object) {
            crate::status::quiet((), || crate::args::drop_handle(object))
        }
    )*};
}

pub(crate) use option_object;

/// `name` without `prefix` (in a const context).
pub(crate) const fn suffix(name: &'static str, prefix: &'static str) -> &'static str {
    let (_, rest) = name.as_bytes().split_at(prefix.len());
    match std::str::from_utf8(rest) {
        Ok(rest) => rest,
        Err(_) => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_through_their_bits() {
        let mut settings = Settings::default();
        settings.set("ratio", 0.35f64);
        settings.set("level", -1i32);
        settings.set("flag", 1u8);
        assert_eq!(settings.get("ratio", 0.0f64), 0.35);
        assert_eq!(settings.get("level", 0i32), -1);
        assert_eq!(settings.get("flag", 0u8), 1);
        assert_eq!(settings.get("unset", 7u64), 7);
    }

    #[test]
    fn a_dump_lists_set_values_and_defaults() {
        let knobs = [
            Knob {
                setter: "x_set_ratio",
                name: "ratio",
                default: || 0.75f64.to_bits(),
                show: <f64 as Scalar>::show,
                parse: <f64 as Scalar>::parse,
            },
            Knob {
                setter: "x_set_version",
                name: "format_version",
                default: || 6,
                show: <i32 as Scalar>::show,
                parse: <i32 as Scalar>::parse,
            },
        ];
        let mut settings = Settings::default();
        settings.set("x_set_version", 4i32);
        let mut out = String::new();
        settings.dump(&knobs, "  ", &mut out);
        assert_eq!(out, "  ratio: 0.750000\n  format_version: 4\n");
        assert_eq!(
            suffix("rocksdb_options_set_ttl", "rocksdb_options_set_"),
            "ttl"
        );
    }

    #[test]
    fn a_knob_read_by_name_takes_its_tables_default() {
        let knobs = [Knob {
            setter: "x_set_compression",
            name: "compression",
            default: || 1,
            show: <i32 as Scalar>::show,
            parse: <i32 as Scalar>::parse,
        }];
        let mut settings = Settings::default();
        assert_eq!(settings.value::<i32>(&knobs, "x_set_compression"), 1);
        assert!(settings.flag(&knobs, "x_set_compression"));
        settings.set("x_set_compression", 0i32);
        assert_eq!(settings.value::<i32>(&knobs, "x_set_compression"), 0);
        assert!(!settings.flag(&knobs, "x_set_compression"));
    }
}
