//! What keeps the console safe: the guard in front of every route
//! (`guard`), the operators' tokens (`token`), the headers of every answer
//! (`security_headers`), and the audit log of every write (`audit`).

pub(crate) mod audit;
pub(crate) mod guard;
pub(crate) mod security_headers;
pub(crate) mod token;
