//! The README and the book under docs/ hold together: every relative link
//! points at a file that exists and, with an `#anchor`, at one of its
//! headings; every page is in the contents (docs/README.md) and among the
//! doctests (src/book.rs); every code block names its language; the README
//! stays a front page.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The README has fewer lines than this: what is longer belongs in a page.
const README_MAX_LINES: usize = 300;

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The book's pages, docs/*.md, sorted.
fn pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("docs/ can be read")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    pages.sort();
    pages
}

/// README.md and every page.
fn documents() -> Vec<PathBuf> {
    let mut documents = vec![root().join("README.md")];
    documents.extend(pages());
    documents
}

/// A file's text.
fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A path relative to the repository's root, for messages.
fn shown(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Whether a line opens or closes a fenced code block.
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// The text outside fenced code blocks, each block replaced by a blank line
/// so that paragraphs stay apart.
fn prose(text: &str) -> String {
    let mut inside = false;
    let mut out = String::new();
    for line in text.lines() {
        if is_fence(line) {
            inside = !inside;
            out.push('\n');
        } else if !inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// `text` with each inline code span (a run of backticks up to the next run
/// of the same length) replaced by `code`, so that brackets inside code are
/// not taken for links. A run without its closing run stays as it is.
fn without_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let open = run_at(i);
        let mut j = i + open;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let run = run_at(j);
                if run == open {
                    close = Some(j + run);
                    break;
                }
                j += run;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                out.push_str("code");
                i = end;
            }
            None => {
                out.extend(&chars[i..i + open]);
                i += open;
            }
        }
    }
    out
}

/// The targets of the markdown links `[text](target)` (and images) in a
/// document's prose, in order.
fn link_targets(text: &str) -> Vec<String> {
    let prose = without_code_spans(&prose(text));
    let chars: Vec<char> = prose.chars().collect();
    let mut targets = Vec::new();
    for (start, &c) in chars.iter().enumerate() {
        if c != '[' {
            continue;
        }
        // The matching `]`, brackets nesting.
        let mut depth = 0;
        let mut end = None;
        for (i, &c) in chars.iter().enumerate().skip(start) {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(end) = end else { continue };
        if chars.get(end + 1) != Some(&'(') {
            continue;
        }
        let Some(close) = chars[end + 2..].iter().position(|&c| c == ')') else {
            continue;
        };
        let inner: String = chars[end + 2..end + 2 + close].iter().collect();
        // A title after the target (`(page.md "title")`) is not part of it.
        let target = inner.split_whitespace().next().unwrap_or_default();
        targets.push(target.trim_matches(['<', '>']).to_owned());
    }
    targets
}

/// Whether a link leaves the repository.
fn is_external(target: &str) -> bool {
    ["http://", "https://", "mailto:"]
        .iter()
        .any(|scheme| target.starts_with(scheme))
}

/// A heading's anchor as GitHub makes it: lowercase, every character but
/// letters, digits, spaces, `-` and `_` dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown document's headings; a repeated slug gets `-1`,
/// `-2`, … as on GitHub.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    for line in prose(text).lines() {
        let hashes = line.chars().take_while(|&c| c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while anchors.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        anchors.insert(anchor);
    }
    anchors
}

/// What is wrong with a relative link of `document`, if anything.
fn broken(document: &Path, target: &str) -> Option<String> {
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        document.to_path_buf()
    } else {
        document.parent().expect("a document's folder").join(path)
    };
    if !file.exists() {
        return Some(format!("{} does not exist", shown(&file)));
    }
    let anchor = anchor?;
    if file.extension().is_none_or(|ext| ext != "md") {
        return Some(format!("#{anchor} on {}, which is no page", shown(&file)));
    }
    let found = anchors(&read(&file));
    (!found.contains(anchor)).then(|| {
        format!(
            "{} has no heading #{anchor}; its headings: {found:?}",
            shown(&file)
        )
    })
}

#[test]
fn every_relative_link_points_at_a_file_and_a_heading_that_exist() {
    let mut problems = Vec::new();
    let mut checked = 0;
    for document in documents() {
        for target in link_targets(&read(&document)) {
            if is_external(&target) {
                continue;
            }
            checked += 1;
            if let Some(problem) = broken(&document, &target) {
                problems.push(format!("{}: ({target}): {problem}", shown(&document)));
            }
        }
    }
    assert!(checked > 20, "only {checked} relative links found");
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_page_is_in_the_contents_and_among_the_doctests() {
    let contents = read(&root().join("docs/README.md"));
    let linked: BTreeSet<String> = link_targets(&contents)
        .into_iter()
        .map(|target| target.split('#').next().unwrap_or_default().to_owned())
        .collect();
    let doctests = read(&root().join("src/book.rs"));
    for page in pages() {
        let name = page
            .file_name()
            .and_then(|name| name.to_str())
            .expect("a page's name");
        if name != "README.md" {
            assert!(
                linked.contains(name),
                "docs/{name} is not linked from docs/README.md"
            );
        }
        assert!(
            doctests.contains(&format!("include_str!(\"../docs/{name}\")")),
            "docs/{name} is not included in src/book.rs, so its code blocks are not tested"
        );
    }
    assert!(
        doctests.contains("include_str!(\"../README.md\")"),
        "README.md is not included in src/book.rs"
    );
}

#[test]
fn every_code_block_names_its_language() {
    // rustdoc compiles a block without a language as Rust.
    let mut problems = Vec::new();
    for document in documents() {
        let mut inside = false;
        for (n, line) in read(&document).lines().enumerate() {
            if !is_fence(line) {
                continue;
            }
            if !inside && line.trim_start().trim_start_matches('`').trim().is_empty() {
                problems.push(format!("{}:{}", shown(&document), n + 1));
            }
            inside = !inside;
        }
    }
    assert!(
        problems.is_empty(),
        "code blocks without a language (text, sh, toml, …): {}",
        problems.join(", ")
    );
}

#[test]
fn the_readme_is_a_front_page() {
    let lines = read(&root().join("README.md")).lines().count();
    assert!(
        lines < README_MAX_LINES,
        "README.md has {lines} lines, a front page fewer than {README_MAX_LINES}: move sections to docs/"
    );
}

#[test]
fn slugs_and_links_are_read_as_on_github() {
    assert_eq!(
        slug("RabbitMQ versions: 3.10, 4.0 and 4.3"),
        "rabbitmq-versions-310-40-and-43"
    );
    assert_eq!(
        slug("Network partitions, a lost client link, a rolling restart"),
        "network-partitions-a-lost-client-link-a-rolling-restart"
    );
    assert_eq!(slug("`dedupe_key` and x_y"), "dedupe_key-and-x_y");
    assert_eq!(
        link_targets(
            "[a](one.md) `[b](code.md)` ![c](d.png)\n```text\n[e](f.md)\n```\n[g\nh](i.md#j) [k] (l)"
        ),
        ["one.md", "d.png", "i.md#j"]
    );
    let repeated = anchors("# A\n## A\n```sh\n# A\n```\n");
    assert_eq!(repeated, BTreeSet::from(["a".to_owned(), "a-1".to_owned()]));
}
