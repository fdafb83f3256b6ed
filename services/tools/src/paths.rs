//! Confinement of path arguments to the project root.
//!
//! Every path a model or user supplies goes through [`resolve`] before a tool touches the
//! file system. Resolution follows the OS semantics one component at a time: existing
//! components are canonicalized (so a symlink is judged by where it really points, and a `..`
//! after a symlink leaves the symlink's target, as the kernel would), the non-existing tail
//! is appended lexically (it cannot contain symlinks yet). The final location must lie under
//! the canonical root. A time-of-check/time-of-use race with a concurrent process swapping in
//! a symlink is out of scope: this guards against the model, not against local attackers.

use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Resolves `input` (relative to `root`, or absolute) to an absolute path inside the
/// canonical `root`. `""` and `"."` are the root itself. The file need not exist, but every
/// existing component of its path must resolve inside the root.
pub fn resolve(root: &Path, input: &str) -> Result<PathBuf> {
    let root = canonical_root(root)?;
    let candidate = Path::new(input);
    let candidate = if candidate.is_absolute() {
        candidate.to_path_buf()
    } else {
        root.join(candidate)
    };

    let outside = || Error::OutsideRoot(input.to_string());
    let mut current = PathBuf::new();
    // While true, `current` is canonical: every component so far exists and symlinks have
    // been resolved. Once a component is missing, the rest is appended lexically.
    let mut existing = true;
    for component in candidate.components() {
        match component {
            Component::Prefix(prefix) => current.push(prefix.as_os_str()),
            Component::RootDir => current.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            // Sound in both modes: a canonical path has no symlinks, and the lexical tail
            // does not exist, so popping is what the kernel would do.
            Component::ParentDir => {
                current.pop();
            }
            Component::Normal(name) => {
                let next = current.join(name);
                if !existing {
                    current = next;
                    continue;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(&next)
                    {
                        Ok(real) => current = real,
                        Err(_) => return Err(dangling(&root, &next, input)),
                    },
                    Ok(_) => current = next,
                    // Missing (or unreadable, or under a regular file): the operation itself
                    // will report that; what matters here is where it would land.
                    Err(_) => {
                        existing = false;
                        current = next;
                    }
                }
            }
        }
    }

    if current.starts_with(&root) {
        Ok(current)
    } else {
        Err(outside())
    }
}

/// The canonical form of the project root.
pub fn canonical_root(root: &Path) -> Result<PathBuf> {
    std::fs::canonicalize(root)
        .map_err(|e| Error::io(format!("cannot resolve project root {}", root.display()), e))
}

/// `path` relative to the root for display (`.` for the root itself); absolute when it is
/// not under the root.
pub fn display_relative(root: &Path, path: &Path) -> String {
    let root = canonical_root(root).unwrap_or_else(|_| root.to_path_buf());
    match path.strip_prefix(&root) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_string(),
        Ok(rel) => rel.display().to_string(),
        Err(_) => path.display().to_string(),
    }
}

/// A symlink whose target is missing: refuse it, and say "outside" when that is where it
/// points, so the model does not retry with a create.
fn dangling(root: &Path, link: &Path, input: &str) -> Error {
    let target = match std::fs::read_link(link) {
        Ok(target) => target,
        Err(_) => return Error::DanglingSymlink(input.to_string()),
    };
    let base = link.parent().unwrap_or(root);
    let lexical = lexical_normalize(&base.join(target));
    if lexical.starts_with(root) {
        Error::DanglingSymlink(input.to_string())
    } else {
        Error::OutsideRoot(input.to_string())
    }
}

/// Removes `.` and applies `..` without touching the file system.
pub(crate) fn lexical_normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`; a relative path keeps its leading `..`s.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                _ => out.push(".."),
            },
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Whether an I/O error means "does not exist" (for friendlier tool messages).
pub(crate) fn is_not_found(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::NotFound
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::symlink;

    struct Fixture {
        _dir: tempfile::TempDir,
        root: PathBuf,
        outside: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let root = base.join("project");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        Fixture {
            _dir: dir,
            root,
            outside,
        }
    }

    fn outside_err(result: Result<PathBuf>) -> String {
        match result {
            Err(e @ Error::OutsideRoot(_)) => e.to_string(),
            other => panic!("expected OutsideRoot, got {other:?}"),
        }
    }

    #[test]
    fn relative_existing_file_resolves_inside() {
        let f = fixture();
        assert_eq!(
            resolve(&f.root, "src/main.rs").unwrap(),
            f.root.join("src/main.rs")
        );
        assert_eq!(
            resolve(&f.root, "./src/../src/main.rs").unwrap(),
            f.root.join("src/main.rs")
        );
    }

    #[test]
    fn empty_and_dot_are_the_root() {
        let f = fixture();
        assert_eq!(resolve(&f.root, "").unwrap(), f.root);
        assert_eq!(resolve(&f.root, ".").unwrap(), f.root);
    }

    #[test]
    fn new_nested_file_inside_resolves() {
        let f = fixture();
        assert_eq!(
            resolve(&f.root, "a/b/c/new.txt").unwrap(),
            f.root.join("a/b/c/new.txt")
        );
        // A `..` in the missing tail is applied lexically and stays inside.
        assert_eq!(
            resolve(&f.root, "a/b/../c.txt").unwrap(),
            f.root.join("a/c.txt")
        );
    }

    #[test]
    fn parent_escape_is_refused() {
        let f = fixture();
        assert_eq!(
            outside_err(resolve(&f.root, "../x")),
            "path is outside the project root: ../x"
        );
        outside_err(resolve(&f.root, "src/../../outside/secret.txt"));
        outside_err(resolve(&f.root, "new/../../x"));
        outside_err(resolve(&f.root, ".."));
    }

    #[test]
    fn absolute_paths_inside_and_outside() {
        let f = fixture();
        let inside = f.root.join("src/main.rs");
        assert_eq!(resolve(&f.root, inside.to_str().unwrap()).unwrap(), inside);
        let secret = f.outside.join("secret.txt");
        let msg = outside_err(resolve(&f.root, secret.to_str().unwrap()));
        assert_eq!(
            msg,
            format!("path is outside the project root: {}", secret.display())
        );
        outside_err(resolve(&f.root, "/etc/passwd"));
    }

    #[test]
    fn symlink_pointing_outside_is_refused() {
        let f = fixture();
        symlink(&f.outside, f.root.join("escape")).unwrap();
        symlink(f.outside.join("secret.txt"), f.root.join("secret-link")).unwrap();
        outside_err(resolve(&f.root, "escape"));
        outside_err(resolve(&f.root, "escape/secret.txt"));
        // A new file under an escaping directory link is refused too.
        outside_err(resolve(&f.root, "escape/new/file.txt"));
        outside_err(resolve(&f.root, "secret-link"));
    }

    #[test]
    fn dotdot_after_symlink_follows_the_target_like_the_kernel() {
        let f = fixture();
        std::fs::create_dir_all(f.outside.join("deep")).unwrap();
        symlink(f.outside.join("deep"), f.root.join("escape")).unwrap();
        // Lexically `escape/../secret.txt` is `<root>/secret.txt`; the kernel goes to
        // `outside/secret.txt`.
        outside_err(resolve(&f.root, "escape/../secret.txt"));
        outside_err(resolve(&f.root, "escape/../new.txt"));
    }

    #[test]
    fn symlink_inside_the_root_is_followed() {
        let f = fixture();
        symlink(f.root.join("src"), f.root.join("src-link")).unwrap();
        assert_eq!(
            resolve(&f.root, "src-link/main.rs").unwrap(),
            f.root.join("src/main.rs")
        );
        assert_eq!(
            resolve(&f.root, "src-link/new.rs").unwrap(),
            f.root.join("src/new.rs")
        );
    }

    #[test]
    fn dangling_symlinks_are_refused() {
        let f = fixture();
        symlink(f.outside.join("missing"), f.root.join("dangling-out")).unwrap();
        symlink(f.root.join("missing"), f.root.join("dangling-in")).unwrap();
        outside_err(resolve(&f.root, "dangling-out"));
        match resolve(&f.root, "dangling-in") {
            Err(Error::DanglingSymlink(p)) => assert_eq!(p, "dangling-in"),
            other => panic!("expected DanglingSymlink, got {other:?}"),
        }
    }

    #[test]
    fn non_canonical_root_is_canonicalized() {
        let f = fixture();
        let alias = f.outside.join("root-alias");
        symlink(&f.root, &alias).unwrap();
        assert_eq!(
            resolve(&alias, "src/main.rs").unwrap(),
            f.root.join("src/main.rs")
        );
        let via_alias = alias.join("src/main.rs");
        assert_eq!(
            resolve(&alias, via_alias.to_str().unwrap()).unwrap(),
            f.root.join("src/main.rs")
        );
    }

    #[test]
    fn display_is_relative_to_the_root() {
        let f = fixture();
        assert_eq!(
            display_relative(&f.root, &f.root.join("src/main.rs")),
            "src/main.rs"
        );
        assert_eq!(display_relative(&f.root, &f.root), ".");
        assert_eq!(
            display_relative(&f.root, Path::new("/etc/passwd")),
            "/etc/passwd"
        );
    }

    #[test]
    fn lexical_normalize_handles_dots() {
        assert_eq!(
            lexical_normalize(Path::new("a/./b/../c")),
            PathBuf::from("a/c")
        );
        assert_eq!(lexical_normalize(Path::new("../a")), PathBuf::from("../a"));
        assert_eq!(
            lexical_normalize(Path::new("../../a")),
            PathBuf::from("../../a")
        );
        assert_eq!(lexical_normalize(Path::new("/../a")), PathBuf::from("/a"));
    }
}
