//! The Redis cost of holding leases, for docs/benchmarks.md (ignored: figures, not tests).
//! `cargo test -p lumina-cluster --test all bench -- --ignored --nocapture`

use std::time::Duration;

use lumina_cluster::{LeaseKeeper, Leases, Registry};

use super::support::{raw_cmd, start};

async fn commands_processed(server: &lumina_testkit::redis::RedisServer) -> u64 {
    let info: String = raw_cmd(server, redis::cmd("INFO").arg("stats")).await;
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
#[ignore]
async fn redis_commands_per_second_while_holding_leases() {
    for sessions in [100usize, 10_000] {
        let (server, redis) = start().await;
        let registration = Registry::new(redis.clone())
            .register("a", "addr", Duration::from_millis(2000))
            .await
            .unwrap();
        let leases = Leases::new(redis.clone());
        let (keeper, _lost) = LeaseKeeper::start(leases.clone(), &registration);
        for i in 0..sessions {
            let lease = leases
                .acquire(&format!("tenant/s{i}"), &keeper.holder())
                .await
                .unwrap()
                .unwrap();
            keeper.hold(lease);
        }
        let window = Duration::from_secs(10);
        let before = commands_processed(&server).await;
        tokio::time::sleep(window).await;
        let after = commands_processed(&server).await;
        // Two INFO calls of our own are in the window.
        let per_second = (after - before).saturating_sub(2) as f64 / window.as_secs_f64();
        println!(
            "owned sessions {sessions}: {per_second:.1} Redis commands/s while idle (lease TTL 2 s); held {}",
            keeper.held().len()
        );
    }
}
