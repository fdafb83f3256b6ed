//! install_builtins: atomic, idempotent, concurrent.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Barrier};

use lumina_config::AppRoot;
use lumina_team::{
    builtin_teams_dir, install_builtins, InstallReport, TeamLocations, BUILTIN_TEAMS,
};
use pretty_assertions::assert_eq;

use super::support::{entries, tree};

fn all_names() -> Vec<String> {
    BUILTIN_TEAMS.iter().map(|t| t.name.to_string()).collect()
}

fn embedded(name: &str) -> BTreeMap<String, Vec<u8>> {
    let team = BUILTIN_TEAMS.iter().find(|t| t.name == name).unwrap();
    team.files
        .iter()
        .map(|f| (f.path.to_string(), f.contents.as_bytes().to_vec()))
        .collect()
}

fn assert_exactly_embedded(dir: &Path) {
    for name in all_names() {
        assert_eq!(tree(&dir.join(&name)), embedded(&name), "{name}");
    }
    let mut want = all_names();
    want.push(".install.lock".into());
    want.sort();
    assert_eq!(entries(dir), want);
}

#[test]
fn installs_once_then_leaves_identical_teams_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let dir = builtin_teams_dir(&app);
    assert_eq!(dir, tmp.path().join("app/resources/teams"));

    assert_eq!(
        install_builtins(&app).unwrap(),
        InstallReport {
            installed: all_names(),
            unchanged: vec![],
        }
    );
    assert_exactly_embedded(&dir);
    let before = std::fs::metadata(dir.join("deep-research/team.yaml"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(
        install_builtins(&app).unwrap(),
        InstallReport {
            installed: vec![],
            unchanged: all_names(),
        }
    );
    let after = std::fs::metadata(dir.join("deep-research/team.yaml"))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

#[test]
fn an_older_or_damaged_version_is_replaced_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let dir = builtin_teams_dir(&app);
    install_builtins(&app).unwrap();
    let team = dir.join("product-development");
    std::fs::write(team.join("team-system.md"), "an older charter").unwrap();
    std::fs::create_dir_all(team.join("agents/retired")).unwrap();
    std::fs::write(team.join("agents/retired/system.md"), "gone").unwrap();
    std::fs::remove_file(team.join("agents/qa/system.md")).unwrap();

    assert_eq!(
        install_builtins(&app).unwrap(),
        InstallReport {
            installed: vec!["product-development".into()],
            unchanged: vec!["deep-research".into()],
        }
    );
    assert_exactly_embedded(&dir);
}

#[test]
fn leftovers_of_a_crashed_install_are_cleaned_and_never_listed() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    let dir = builtin_teams_dir(&app);
    // A crash after moving the old version aside and before moving the new one in: the
    // team is absent, its halves are hidden.
    let half = dir.join(".deep-research.tmp-99-1-0");
    std::fs::create_dir_all(half.join("agents")).unwrap();
    std::fs::write(half.join("team.yaml"), "name: deep-research\n").unwrap();
    std::fs::create_dir_all(dir.join(".deep-research.old-99-2-1/agents")).unwrap();
    let listed = TeamLocations::new(&app, None).list();
    assert_eq!(listed.teams.len(), 0);

    install_builtins(&app).unwrap();
    assert_exactly_embedded(&dir);
}

#[test]
fn two_installers_at_once_do_the_work_once() {
    for _ in 0..5 {
        let tmp = tempfile::tempdir().unwrap();
        let app = AppRoot::new(tmp.path());
        let barrier = Arc::new(Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let app = app.clone();
                let barrier = barrier.clone();
                std::thread::spawn(move || {
                    barrier.wait();
                    install_builtins(&app)
                })
            })
            .collect();
        let reports: Vec<InstallReport> = handles
            .into_iter()
            .map(|h| h.join().unwrap().unwrap())
            .collect();
        let mut installed: Vec<String> = reports.iter().flat_map(|r| r.installed.clone()).collect();
        let mut unchanged: Vec<String> = reports.iter().flat_map(|r| r.unchanged.clone()).collect();
        installed.sort();
        unchanged.sort();
        let mut want = all_names();
        want.sort();
        assert_eq!((installed, unchanged), (want.clone(), want));
        assert_exactly_embedded(&builtin_teams_dir(&app));
    }
}

#[test]
fn readers_never_see_a_half_written_team() {
    let tmp = tempfile::tempdir().unwrap();
    let app = AppRoot::new(tmp.path());
    install_builtins(&app).unwrap();
    let dir = builtin_teams_dir(&app);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let app = app.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            let locations = TeamLocations::new(&app, None);
            let mut loads = 0;
            while !done.load(std::sync::atomic::Ordering::Relaxed) || loads == 0 {
                if let Err(e) = locations.load("product-development") {
                    panic!("a reader saw a missing or broken team: {e}");
                }
                loads += 1;
            }
            loads
        })
    };
    for round in 0..30 {
        // Make the installed copy differ so every round replaces it.
        let charter = dir.join("product-development/team-system.md");
        std::fs::write(&charter, format!("round {round}")).unwrap();
        let report = install_builtins(&app).unwrap();
        assert_eq!(report.installed, ["product-development"]);
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    assert!(reader.join().unwrap() > 0);
    assert_exactly_embedded(&dir);
}
