//! `lumina-loadtest`: a load generator for `lumina-backend` (protocol v3), built on the
//! typed client `lumina_client::Client` and its exactly-once `SessionView`.
//!
//! It opens sessions across a list of gateway URLs (a local backend, or the instances of
//! `scripts/local-cluster`), authenticates with a given token, a JWT minted from a local
//! signing key (`lumina_auth::mint`, as `lumina-backend cluster mint-token` does) or the
//! local endpoint file's token, and runs one scenario:
//!
//! | scenario | what it does |
//! |---|---|
//! | `idle` | N connections, `hello`, held D seconds; connect time and the server's RSS per connection |
//! | `steady` | S sessions, each submitting at a target rate for D seconds |
//! | `ramp` | the submit rate raised in steps until p99 submit→first event passes a threshold |
//! | `connect-storm` | N connects as fast as possible |
//! | `reconnect-storm` | runs in flight, every connection dropped, all reconnect, resume and backfill |
//! | `failover` | `kill -9` of a session's owner, submit through a survivor, restart, repeat |
//! | `chaos` | faults (kill, SIGSTOP, Redis/PostgreSQL restart, partition, slow PostgreSQL, clock skew) under load; invariants checked in PostgreSQL |
//!
//! Every scenario is bounded in count and time, stops by itself and refuses non-loopback
//! targets unless told otherwise ([`TargetOptions::allow_remote`]). The result is a
//! [`Report`] (JSON) that [`Report::write`] also renders as HTML with SVG plots; the reports
//! of several generator processes that drove one cluster together merge into one
//! ([`Report::merge`], exact percentiles from the recorded histograms).
//!
//! The library entry point is [`run`]; the binary is a thin command line over it.

pub mod error;
pub mod instances;
pub mod metrics;
pub mod progress;
pub mod report;
pub mod scenarios;
pub mod target;
pub mod track;

pub use error::{Error, HarnessError, Result};
pub use report::Report;
pub use scenarios::{
    run, ChaosOptions, Common, Config, ConnectStormOptions, FailoverOptions, FaultKind,
    IdleOptions, RampOptions, ReconnectOptions, Scenario, SteadyOptions, SLOW_MARKER,
};
pub use target::{AuthOptions, Secret, Target, TargetOptions};
