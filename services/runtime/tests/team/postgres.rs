//! The checkpoint benchmark of `bench.rs` on the fenced PostgreSQL journal (ignored; needs
//! PostgreSQL from the test kit): `cargo test -p lumina-runtime --test all -- --ignored
//! --nocapture team::postgres`.

use std::sync::Arc;

use lumina_journal::postgres::PgJournal;
use lumina_runtime::{AlwaysOwned, Runtime, RuntimeOptions};
use lumina_testkit::postgres::PgServer;
use lumina_testkit::ScriptedModelServer;

use super::bench::checkpoints;
use super::World;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn bench_team_checkpoints_postgres() {
    let server = ScriptedModelServer::start(vec![]).unwrap();
    let world = World::new(&server, "anthropic");
    let pg = PgServer::shared().unwrap();
    let url = pg.create_unique_database("team_bench").unwrap();
    let store = Arc::new(PgJournal::connect(&url, 4).unwrap());
    store.migrate().await.unwrap();
    let open = || {
        Runtime::new(
            RuntimeOptions {
                app_root: world.app_root.clone(),
                env: world.env.clone(),
                tenant: "local".into(),
                default_project_root: world.project.clone(),
            },
            store.clone(),
            lumina_tools::builtin_registry(),
            Arc::new(AlwaysOwned(lumina_journal::LOCAL_FENCE)),
        )
    };
    checkpoints("postgresql", open, &world).await;
}
