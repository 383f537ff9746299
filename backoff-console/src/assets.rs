//! The page, its scripts (ES modules: one per view, those the views share,
//! and `console.js`, which wires them) and its style, compiled into the binary: plain HTML and JavaScript, no build
//! step. The scripts are served apart from the page so that the content
//! security policy can forbid inline scripts. Every address in them is
//! relative, so the page works wherever the router is mounted.

use axum::extract::{OriginalUri, Path};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};

const HTML: &str = "text/html; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";

/// A script of `assets/`, served under its own name.
macro_rules! script {
    ($name:literal) => {
        ($name, JAVASCRIPT, include_str!(concat!("assets/", $name)))
    };
}

/// The files besides the page: name, type, content. `console.js` is the
/// module the page loads; it imports the others by relative address
/// (`./shared.js`), so they are found beside it under any prefix.
const FILES: &[(&str, &str, &str)] = &[
    ("console.css", CSS, include_str!("assets/console.css")),
    script!("console.js"),
    script!("shared.js"),
    script!("tables.js"),
    script!("consumers.js"),
    script!("search.js"),
    script!("dead-letters.js"),
    script!("selection.js"),
    script!("message.js"),
    script!("edit.js"),
    script!("writes.js"),
    script!("tiers.js"),
    script!("audit.js"),
    script!("job-options.js"),
    script!("jobs.js"),
];

/// `GET /`: the page. Nested under a prefix (`.nest("/ops/console", …)`),
/// it is asked for as `/ops/console`, without a final slash, where the
/// browser would resolve `console.js` to `/ops/console.js`: so its two
/// addresses name the last segment too (`console/console.js`). The modules
/// `console.js` imports, and the API, are found beside it.
pub(crate) async fn page(OriginalUri(uri): OriginalUri) -> Response {
    let html = include_str!("assets/console.html").replace("{base}", &base(uri.path()));
    ([(CONTENT_TYPE, HTML)], html).into_response()
}

/// What the page's addresses start with when it is at `path`: nothing at
/// `/…/`, the last segment and a slash otherwise (only URL-safe characters
/// of it, the others percent-encoded, so nothing can leave the attribute).
fn base(path: &str) -> String {
    if path.ends_with('/') {
        return String::new();
    }
    let last = path.rsplit('/').next().unwrap_or_default();
    let mut base = String::new();
    for byte in last.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'%' => {
                base.push(char::from(byte))
            }
            other => base.push_str(&format!("%{other:02X}")),
        }
    }
    base.push('/');
    base
}

/// `GET /{file}`: a script or the style.
pub(crate) async fn file(Path(name): Path<String>) -> Response {
    match FILES.iter().find(|(file, _, _)| *file == name) {
        Some((_, content_type, content)) => {
            ([(CONTENT_TYPE, *content_type)], *content).into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_page_addresses_its_files_under_the_prefix() {
        assert_eq!(super::base("/"), "");
        assert_eq!(super::base("/ops/console/"), "");
        assert_eq!(super::base("/ops/console"), "console/");
        assert_eq!(super::base("/ops/con\"sole<"), "con%22sole%3C/");
    }

    /// Every module a script imports is served beside it, by a relative
    /// address, and every script served is imported by another (or is the
    /// page's own `console.js`).
    #[test]
    fn every_imported_module_is_served_and_every_module_is_imported() {
        let scripts: Vec<(&str, &str)> = super::FILES
            .iter()
            .filter(|(_, content_type, _)| *content_type == super::JAVASCRIPT)
            .map(|(name, _, content)| (*name, *content))
            .collect();
        let mut imported = vec!["console.js"];
        for (name, content) in &scripts {
            for line in content.lines().filter(|line| line.starts_with("import ")) {
                let target = line
                    .split("from '")
                    .nth(1)
                    .and_then(|rest| rest.strip_suffix("';"))
                    .unwrap_or_else(|| {
                        panic!("{name}: an import not of the form `from '…';`: {line}")
                    });
                let file = target
                    .strip_prefix("./")
                    .unwrap_or_else(|| panic!("{name}: an import not beside it: {line}"));
                assert!(
                    scripts.iter().any(|(served, _)| *served == file),
                    "{name} imports {file}, which is not served"
                );
                imported.push(file);
            }
        }
        for (name, _) in &scripts {
            assert!(
                imported.contains(name),
                "{name} is served but never imported"
            );
        }
    }
}
