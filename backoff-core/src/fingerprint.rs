//! Grouping dead letters by what went wrong: an error's fingerprint is its
//! `x-error` with the parts that differ from message to message masked
//! (quoted and backticked values, UUIDs, hex ids, numbers), so that "order
//! 17 not found" and "order 42 not found" fall into one group, and so do
//! serde's "unknown variant `refund`" and "unknown variant `void`".

/// The fingerprint of an error: values in single or double quotes or in
/// backticks (as serde and Rust's own messages write them) become
/// `<quoted>`, UUIDs `<uuid>`, hex ids (8 or more hex digits with at least one digit and one
/// letter) `<hex>`, and numbers `<n>`.
///
/// ```
/// use rabbit_backoff::rules::fingerprint;
///
/// assert_eq!(fingerprint("order 17 not found"), "order <n> not found");
/// assert_eq!(
///     fingerprint("user 'ann@x.io' locked (id 6f1c2e0a-93b4-4f1e-9a7d-2b1e0c9d8f7a, 3.5 s)"),
///     "user <quoted> locked (id <uuid>, <n> s)"
/// );
/// assert_eq!(fingerprint("commit deadbeef0042 rejected"), "commit <hex> rejected");
/// assert_eq!(
///     fingerprint("unknown variant `refund`, expected `paid` or `open`"),
///     "unknown variant <quoted>, expected <quoted> or <quoted>"
/// );
/// ```
pub fn fingerprint(error: &str) -> String {
    let chars: Vec<char> = error.chars().collect();
    let mut out = String::with_capacity(error.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_quote(c)
            && let Some(end) = chars[i + 1..].iter().position(|&d| d == c)
        {
            out.push_str("<quoted>");
            i += end + 2;
            continue;
        }
        if c.is_ascii_alphanumeric() && (i == 0 || !is_word(chars[i - 1])) {
            let word_end = chars[i..]
                .iter()
                .position(|&d| !(d.is_ascii_alphanumeric() || d == '-'))
                .map_or(chars.len(), |n| i + n);
            let word: String = chars[i..word_end].iter().collect();
            if is_uuid(&word) {
                out.push_str("<uuid>");
                i = word_end;
                continue;
            }
            let token_end = chars[i..]
                .iter()
                .position(|&d| !d.is_ascii_alphanumeric())
                .map_or(chars.len(), |n| i + n);
            let token: String = chars[i..token_end].iter().collect();
            if is_hex_id(&token) {
                out.push_str("<hex>");
                i = token_end;
                continue;
            }
        }
        if c.is_ascii_digit() && (i == 0 || !is_word(chars[i - 1])) {
            let mut end = i;
            while end < chars.len()
                && (chars[end].is_ascii_digit()
                    || (chars[end] == '.' && chars.get(end + 1).is_some_and(char::is_ascii_digit)))
            {
                end += 1;
            }
            if end == chars.len() || !is_word(chars[end]) {
                out.push_str("<n>");
                i = end;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Characters that open and close a quoted value: `'`, `"` and the
/// backtick.
fn is_quote(c: char) -> bool {
    matches!(c, '\'' | '"' | '`')
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

fn is_uuid(word: &str) -> bool {
    let parts: Vec<&str> = word.split('-').collect();
    parts.len() == 5
        && parts
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(p, n)| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_hex_id(token: &str) -> bool {
    token.len() >= 8
        && token.chars().all(|c| c.is_ascii_hexdigit())
        && token.chars().any(|c| c.is_ascii_digit())
        && token.chars().any(|c| c.is_ascii_alphabetic())
}

/// A dead-letter group's id: 12 hex digits, the same for the same reason
/// and fingerprint in every run and on every machine (FNV-1a, not the
/// standard library's randomly seeded hasher).
///
/// ```
/// use rabbit_backoff::rules::group_id;
/// assert_eq!(group_id(Some("permanent"), "order <n> not found"), group_id(Some("permanent"), "order <n> not found"));
/// assert_ne!(group_id(Some("permanent"), "x"), group_id(Some("exhausted"), "x"));
/// assert_eq!(group_id(None, "").len(), 12);
/// ```
pub fn group_id(reason: Option<&str>, fingerprint: &str) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let bytes = reason
        .unwrap_or("")
        .bytes()
        .chain(std::iter::once(0))
        .chain(fingerprint.bytes());
    for byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{:012x}", hash >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn masks_what_varies_and_keeps_the_words() {
        for (error, expected) in [
            ("timeout after 30s", "timeout after 30s"),
            ("timeout after 30 s", "timeout after <n> s"),
            ("HTTP 503 from payments-v2", "HTTP <n> from payments-v2"),
            ("stock \"SKU-9\" is empty", "stock <quoted> is empty"),
            ("retry 1.5 of 3", "retry <n> of <n>"),
            ("unterminated 'quote 42", "unterminated 'quote <n>"),
            ("unknown variant `refund`", "unknown variant <quoted>"),
            (
                "unknown variant `void`, expected one of `paid`, `open`",
                "unknown variant <quoted>, expected one of <quoted>, <quoted>",
            ),
            (
                "field `amount` 42 too large",
                "field <quoted> <n> too large",
            ),
            ("`it's` here", "<quoted> here"),
            ("unterminated `tick 7", "unterminated `tick <n>"),
            ("mixed 'a` b' `c'", "mixed <quoted> `c'"),
            ("", ""),
        ] {
            assert_eq!(fingerprint(error), expected, "{error}");
        }
        // A known value: ids must not change between versions.
        assert_eq!(
            group_id(Some("permanent"), "order <n> not found"),
            "67257371c4e5"
        );
    }

    #[test]
    fn serde_errors_that_differ_only_in_their_backticked_values_are_one_group() {
        let groups: std::collections::HashSet<String> = [
            "refund", "void", "chargeback", "r", "with space", "42",
        ]
        .iter()
        .map(|variant| {
            let error = format!(
                "invalid body: unknown variant `{variant}`, expected `paid` or `open` at line 1 column 9"
            );
            group_id(Some("decode"), &fingerprint(&error))
        })
        .collect();
        assert_eq!(groups.len(), 1, "{groups:?}");
        assert_eq!(
            fingerprint("unknown variant `refund`, expected `paid` or `open` at line 1 column 9"),
            "unknown variant <quoted>, expected <quoted> or <quoted> at line <n> column <n>"
        );
    }

    proptest! {
        #[test]
        fn errors_that_differ_only_in_a_backticked_value_share_a_fingerprint(
            a in "[^`]{0,20}", b in "[^`]{0,20}",
        ) {
            let one = fingerprint(&format!("unknown variant `{a}` here"));
            let two = fingerprint(&format!("unknown variant `{b}` here"));
            prop_assert_eq!(one, two);
        }

        #[test]
        fn a_fingerprint_of_quotes_and_ticks_is_its_own_fingerprint(error in "[a1 '\"`]{0,30}") {
            let once = fingerprint(&error);
            prop_assert_eq!(fingerprint(&once), once.clone());
        }

        #[test]
        fn errors_that_differ_only_in_their_numbers_share_a_fingerprint(
            a in 0u64..1_000_000, b in 0u64..1_000_000, word in "[a-z]{1,10}",
        ) {
            let one = fingerprint(&format!("{word} {a} failed"));
            let two = fingerprint(&format!("{word} {b} failed"));
            prop_assert_eq!(&one, &two);
            prop_assert_eq!(group_id(None, &one), group_id(None, &two));
        }

        #[test]
        fn a_fingerprint_is_its_own_fingerprint(error in "\\PC{0,80}") {
            let once = fingerprint(&error);
            prop_assert_eq!(fingerprint(&once), once.clone());
        }
    }
}
