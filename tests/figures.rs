//! The book quotes each measured figure from one source: a file under
//! `results/`, which says the commit, the date, the machine and the command of
//! the run. A page names the source of a figure in one of two ways:
//!
//! - a link whose target is a results file, `[1.22–1.56×](../results/headline.md)`:
//!   the link's text must occur in that file;
//! - a marker line `<!-- source: ../results/headline.md -->`: from it to the
//!   next heading, every table row and every figure (a number followed by
//!   `×`, `µs`, `msg/s` or `messages/s`) must occur in that file.
//!
//! A figure of those units anywhere else in README.md, PERFORMANCE.md or
//! docs/ has no source, and fails too. So a figure cannot drift from its run:
//! changing it on a page without its results file fails here, and so does a
//! new one with no source.

use std::path::{Component, Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The pages whose figures are checked, relative to the root.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![PathBuf::from("README.md"), PathBuf::from("PERFORMANCE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| PathBuf::from("docs").join(path.file_name().expect("a file name")))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The text as the check compares it: emphasis and code marks dropped,
/// every run of white space (line ends and non-breaking spaces included)
/// one space.
fn normalize(text: &str) -> String {
    let text = text.replace("**", "").replace('`', "");
    let mut out = String::with_capacity(text.len());
    let mut space = false;
    for c in text.chars() {
        if c.is_whitespace() || c == '\u{a0}' || c == '\u{202f}' {
            space = true;
        } else {
            if space && !out.is_empty() {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    out
}

/// `base/../x` → `x`, without touching the file system.
fn resolve(page: &Path, target: &str) -> PathBuf {
    let file = target.split('#').next().unwrap_or_default();
    let mut out = PathBuf::new();
    for part in page
        .parent()
        .unwrap_or(Path::new(""))
        .join(file)
        .components()
    {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Whether a link target (or a marker's path) names a results file.
fn is_results(target: &str) -> bool {
    let file = target.split('#').next().unwrap_or_default();
    file.ends_with(".md") && (file.starts_with("results/") || file.contains("/results/"))
}

/// A link of a line: its text, its target and where its text starts and ends
/// (byte offsets in the line).
struct Link<'a> {
    text: &'a str,
    target: &'a str,
    span: (usize, usize),
}

/// The inline links `[text](target)` of one line (no nested brackets).
fn links(line: &str) -> Vec<Link<'_>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = line[from..].find('[').map(|i| i + from) {
        let Some(close) = line[open..].find(']').map(|i| i + open) else {
            break;
        };
        if line[close + 1..].starts_with('(')
            && let Some(end) = line[close + 2..].find(')').map(|i| i + close + 2)
        {
            found.push(Link {
                text: &line[open + 1..close],
                target: &line[close + 2..end],
                span: (open, end + 1),
            });
            from = end + 1;
            continue;
        }
        from = open + 1;
    }
    found
}

/// The figures of a line: a number (digits, with `.`, `,`, `–` or `-` between
/// digits, and thousands after a space: `40 119`) followed by `×`, or by
/// ` µs`, ` msg/s` or ` messages/s`. Each as its text and its byte span.
fn figures(line: &str) -> Vec<(String, (usize, usize))> {
    const UNITS: [&str; 4] = ["×", " µs", " msg/s", " messages/s"];
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit()
            && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'.'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i;
        loop {
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            let rest = &line[end..];
            let joined = [".", ",", "-", "–"]
                .into_iter()
                .find(|sep| {
                    rest.starts_with(sep)
                        && rest.as_bytes()[sep.len()..]
                            .first()
                            .is_some_and(u8::is_ascii_digit)
                })
                .map(str::len);
            let thousands = rest.starts_with(' ')
                && rest.len() >= 4
                && rest.as_bytes()[1..4].iter().all(u8::is_ascii_digit)
                && !rest.as_bytes().get(4).is_some_and(u8::is_ascii_digit);
            match (joined, thousands) {
                (Some(len), _) => end += len,
                (None, true) => end += 1,
                (None, false) => break,
            }
        }
        match UNITS.iter().find(|unit| line[end..].starts_with(*unit)) {
            Some(unit) => {
                let stop = end + unit.len();
                found.push((line[start..stop].to_owned(), (start, stop)));
                i = stop;
            }
            None => i = end.max(i + 1),
        }
    }
    found
}

/// What is wrong with one page's figures; `source` reads a file by its path
/// relative to the root (None when there is no such file).
fn check(page: &Path, text: &str, source: &dyn Fn(&Path) -> Option<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let mut block: Option<(PathBuf, String)> = None;
    let mut fenced = false;
    let read = |path: &Path, line: usize, problems: &mut Vec<String>| -> Option<String> {
        let found = source(path).map(|text| normalize(&text));
        if found.is_none() {
            problems.push(format!(
                "{}:{line}: names {}, which does not exist",
                page.display(),
                path.display()
            ));
        }
        found
    };
    for (n, line) in text.lines().enumerate() {
        let number = n + 1;
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        if trimmed.starts_with('#') {
            block = None;
        }
        if let Some(path) = trimmed
            .strip_prefix("<!-- source:")
            .and_then(|rest| rest.strip_suffix("-->"))
            .map(str::trim)
        {
            let file = resolve(page, path);
            block = read(&file, number, &mut problems).map(|text| (file, text));
            continue;
        }
        // Links to a results file: their text is in it.
        let mut covered = Vec::new();
        for link in links(line)
            .into_iter()
            .filter(|link| is_results(link.target))
        {
            covered.push(link.span);
            let file = resolve(page, link.target);
            // A link that names the file (`[scheduled.md](…)`) quotes nothing.
            let names_the_file = link.text.trim_matches('`').ends_with(".md");
            if let Some(found) = read(&file, number, &mut problems)
                && !names_the_file
                && !found.contains(&normalize(link.text))
            {
                problems.push(format!(
                    "{}:{number}: \"{}\" is not in {}",
                    page.display(),
                    link.text,
                    file.display()
                ));
            }
        }
        match &block {
            Some((file, found)) => {
                let row = trimmed.starts_with('|') && !trimmed.starts_with("|---");
                if row && !found.contains(&normalize(trimmed)) {
                    problems.push(format!(
                        "{}:{number}: this row is not in {}: {trimmed}",
                        page.display(),
                        file.display()
                    ));
                } else if !row {
                    for (figure, _) in figures(line) {
                        if !found.contains(&normalize(&figure)) {
                            problems.push(format!(
                                "{}:{number}: {figure} is not in {}",
                                page.display(),
                                file.display()
                            ));
                        }
                    }
                }
            }
            None => {
                for (figure, (start, end)) in figures(line) {
                    let linked = covered.iter().any(|&(from, to)| from <= start && end <= to);
                    if !linked {
                        problems.push(format!(
                            "{}:{number}: {figure} names no results file (link it, or put it under a `<!-- source: … -->` marker)",
                            page.display()
                        ));
                    }
                }
            }
        }
    }
    problems
}

/// A file of the repository, by its path relative to the root.
fn from_disk(path: &Path) -> Option<String> {
    std::fs::read_to_string(root().join(path)).ok()
}

fn page(path: &str) -> String {
    from_disk(Path::new(path)).unwrap_or_else(|| panic!("{path} is readable"))
}

#[test]
fn every_quoted_figure_is_in_the_results_file_it_names() {
    let problems: Vec<String> = pages()
        .iter()
        .flat_map(|path| check(path, &page(&path.to_string_lossy()), &from_disk))
        .collect();
    assert!(
        problems.is_empty(),
        "{} figures without their source:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_figure_changed_on_a_page_fails_the_check() {
    // README.md's first linked figure, one digit changed.
    let readme = page("README.md");
    let link = readme
        .lines()
        .flat_map(links)
        .find(|link| is_results(link.target) && link.text.chars().any(|c| c.is_ascii_digit()))
        .expect("README.md links a figure to its results file");
    let changed_text: String = {
        let mut done = false;
        link.text
            .chars()
            .map(|c| match c.to_digit(10) {
                Some(d) if !done => {
                    done = true;
                    char::from_digit((d + 1) % 10, 10).expect("a digit")
                }
                _ => c,
            })
            .collect()
    };
    let original = format!("[{}]({})", link.text, link.target);
    let changed = readme.replacen(&original, &format!("[{changed_text}]({})", link.target), 1);
    assert_ne!(changed, readme);
    assert!(check(Path::new("README.md"), &readme, &from_disk).is_empty());
    let problems = check(Path::new("README.md"), &changed, &from_disk);
    assert!(
        problems.iter().any(|p| p.contains(&changed_text)),
        "{problems:?}"
    );
}

#[test]
fn a_table_row_changed_under_its_source_fails_the_check() {
    let performance = page("PERFORMANCE.md");
    let mut in_block = false;
    let row = performance
        .lines()
        .find(|line| {
            let line = line.trim();
            if line.starts_with("<!-- source:") {
                in_block = true;
            } else if line.starts_with('#') {
                in_block = false;
            }
            in_block && line.starts_with('|') && !line.starts_with("|---") && line.contains('×')
        })
        .expect("PERFORMANCE.md has a sourced table with ratios");
    let changed_row = row.replacen('×', "0×", 1);
    let changed = performance.replacen(row, &changed_row, 1);
    let problems = check(Path::new("PERFORMANCE.md"), &changed, &from_disk);
    assert!(
        problems.iter().any(|p| p.contains("this row is not in")),
        "{problems:?}"
    );
}

#[test]
fn a_figure_without_a_source_fails_the_check() {
    let text = "# A page\n\nThe framework ran at 1.23× the loop's throughput.\n";
    let problems = check(Path::new("docs/new.md"), text, &from_disk);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("1.23×"), "{problems:?}");
    // A figure in its sourced block, but not in the source, fails too.
    let text = "<!-- source: ../results/headline.md -->\nS1 ran at 9.87× the loop.\n";
    let problems = check(Path::new("docs/new.md"), text, &from_disk);
    assert!(problems.iter().any(|p| p.contains("9.87×")), "{problems:?}");
    // And a source that does not exist.
    let problems = check(
        Path::new("docs/new.md"),
        "[1×](../results/none.md)\n",
        &from_disk,
    );
    assert!(
        problems.iter().any(|p| p.contains("does not exist")),
        "{problems:?}"
    );
}

#[test]
fn the_figure_reader_finds_ratios_rates_and_times() {
    let found: Vec<String> =
        figures("S1 1.22–1.56× at 40 119 msg/s, 48.4 µs; 0.75–1.25 × net; x2, 50%")
            .into_iter()
            .map(|(figure, _)| figure)
            .collect();
    assert_eq!(found, ["1.22–1.56×", "40 119 msg/s", "48.4 µs"]);
}

#[test]
fn every_results_file_says_its_commit_date_machine_and_command() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("results"))
        .expect("results/ is readable")
        .map(|entry| entry.expect("a results/ entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for file in files {
        if file.file_name().is_some_and(|name| name == "README.md") {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("a results file is readable");
        for field in ["| commit |", "| date |", "| machine |", "| command |"] {
            assert!(
                text.contains(field),
                "{} has no `{field}` row",
                file.display()
            );
        }
    }
}
