//! Serde for the types written as text in attributes (`"5s,15s"`, `"20%"`,
//! `"50% of 20, pause 30s"`): serialized with `Display`, read with `FromStr`,
//! so definitions and specs show them as users write them.

/// Implements `Serialize` through `Display` and `Deserialize` through
/// `FromStr` for `$type`.
macro_rules! serde_as_str {
    ($type:ty) => {
        impl serde::Serialize for $type {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $type {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let s = String::deserialize(deserializer)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

pub(crate) use serde_as_str;
