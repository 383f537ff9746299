//! [`HeaderValue`]: the framework's view of an AMQP header value.

/// A header value as the framework sees it: a view of the AMQP field types
/// that matter for its own headers, so the rules stay independent of any
/// client library.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HeaderValue<'a> {
    /// Any AMQP integer width, widened.
    Int(i128),
    /// A float or double.
    Float(f64),
    /// A short or long string, when it is valid UTF-8.
    Str(&'a str),
    /// Bytes that are not valid UTF-8.
    Bytes(&'a [u8]),
    /// A boolean.
    Bool(bool),
    /// Anything else (arrays, tables, timestamps, void), named by its type.
    Other(&'static str),
}

impl HeaderValue<'_> {
    /// A short description of the value's type, for warnings.
    pub fn type_name(&self) -> &'static str {
        match self {
            HeaderValue::Int(_) => "integer",
            HeaderValue::Float(_) => "float",
            HeaderValue::Str(_) => "string",
            HeaderValue::Bytes(_) => "bytes",
            HeaderValue::Bool(_) => "boolean",
            HeaderValue::Other(name) => name,
        }
    }
}
