//! The repository's Markdown documents stand alone and their links hold: every relative
//! link `[text](path#anchor)` names a file that exists and a heading it has (GitHub's
//! anchors), every path quoted from the repository's root (`docs/…`, `crates/…`, `.ci/…`)
//! exists, and nothing points outside the repository (`../shared`, the design brief's
//! files by their names there).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// Every file under `dir` whose name ends with `ending` (not the build's, not hidden ones).
fn files_ending(dir: &Path, ending: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                files_ending(&path, ending, out);
            }
        } else if name.ends_with(ending) {
            out.push(path);
        }
    }
}

/// The lines of `text` outside fenced code blocks, with their line numbers.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .map(|(number, line)| (number + 1, line))
        .collect()
}

/// Names of the files of the design brief outside the repository, which no document or
/// comment may send a reader to.
const OUTSIDE: [&str; 5] = [
    "../shared",
    "DESIGN.md",
    "DESIGN §",
    "CRATES.md",
    "DURABILITY.md",
];

/// GitHub's anchor of a heading: lower case, punctuation dropped (but `-` and `_`), spaces
/// made hyphens; a repeated anchor gets `-1`, `-2`, ….
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for (_, line) in prose_lines(text) {
        let Some(heading) = line.strip_prefix('#') else {
            continue;
        };
        let heading = heading.trim_start_matches('#').trim();
        let slug: String = heading
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let mut anchor = slug.clone();
        let mut n = 0;
        while seen.contains(&anchor) {
            n += 1;
            anchor = format!("{slug}-{n}");
        }
        seen.insert(anchor);
    }
    seen
}

/// The targets of the inline links `[text](target)` of a line.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        targets.push(after[..end].trim().to_owned());
        rest = &after[end..];
    }
    targets
}

/// The spans quoted in backticks on a line.
fn quoted(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_link_anchor_and_quoted_path_of_the_docs_holds() {
    let root = repository();
    let mut files = Vec::new();
    files_ending(&root, ".md", &mut files);
    assert!(files.len() > 10, "found the documents: {files:?}");
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let name = file
            .strip_prefix(&root)
            .expect("inside")
            .display()
            .to_string();
        for (number, line) in prose_lines(&text) {
            let at = format!("{name}:{number}");
            for target in link_targets(line) {
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().expect("a directory").join(path)
                };
                if !linked.exists() {
                    broken.push(format!("{at}: {target}: no such file"));
                    continue;
                }
                if !anchor.is_empty() {
                    let linked_text = std::fs::read_to_string(&linked).unwrap_or_default();
                    if !anchors(&linked_text).contains(anchor) {
                        broken.push(format!("{at}: {target}: no such heading"));
                    }
                }
            }
            for span in quoted(line) {
                // `path::item` names an item of a file: the file must exist.
                let span = span.trim().split("::").next().unwrap_or("");
                let from_root = ["docs/", "crates/", ".ci/"]
                    .iter()
                    .any(|p| span.starts_with(p));
                let plain = !span.contains(['*', '<', '{', ' ', '…']);
                if from_root && plain && !root.join(span.trim_end_matches('/')).exists() {
                    broken.push(format!("{at}: `{span}` does not exist"));
                }
            }
            for outside in OUTSIDE {
                if line.contains(outside) {
                    broken.push(format!("{at}: cites {outside}, outside the repository"));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "{} broken:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn the_code_cites_nothing_outside_the_repository() {
    let root = repository();
    let mut files = Vec::new();
    files_ending(&root.join("crates"), ".rs", &mut files);
    let this_file = Path::new(file!()).file_name().expect("a name");
    let mut citing = Vec::new();
    for file in files.iter().filter(|f| f.file_name() != Some(this_file)) {
        let text = std::fs::read_to_string(file).expect("read");
        for (number, line) in text.lines().enumerate() {
            if OUTSIDE.iter().any(|outside| line.contains(outside)) {
                let name = file.strip_prefix(&root).expect("inside").display();
                citing.push(format!("{name}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(citing.is_empty(), "{}", citing.join("\n"));
}

#[test]
fn the_anchor_rules_are_githubs() {
    let anchors = anchors("# Verso\n## Reproducing the papers (Steam, Wu et al.)\n## A\n## A\n");
    assert!(
        anchors.contains("reproducing-the-papers-steam-wu-et-al"),
        "{anchors:?}"
    );
    assert!(
        anchors.contains("a") && anchors.contains("a-1"),
        "{anchors:?}"
    );
    assert_eq!(
        link_targets("see [x](a.md#b) and [y](#c)"),
        ["a.md#b", "#c"]
    );
    assert_eq!(quoted("a `b` c `d/e`"), ["b", "d/e"]);
}
