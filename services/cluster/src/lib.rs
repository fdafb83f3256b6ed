//! Redis coordination for the cluster profile (docs/design.md#cluster): the instance
//! registry and the liveness every lease rests on, session leases with fencing tokens,
//! request/reply RPC between instances over Redis Streams, pub/sub hints of new session
//! events, shared rate windows, conversations' hot windows (a cache of their last
//! messages), and the signed peer channel's replay memory.
//!
//! Redis holds only what may be lost. PostgreSQL is the source of truth: a lost lease is
//! re-acquired (with [`Leases::acquire_with_floor`] lifting the fence above what PostgreSQL
//! recorded), a lost RPC times out and is retried by its caller, a lost hint is caught up
//! from the journal by seq. Nothing here is needed to recover a session's state.
//!
//! All keys live under `lumina:{cluster_id}:` (see [`Keys`]). Every connection sets its
//! response timeout explicitly; blocking stream reads use dedicated connections whose
//! timeout exceeds their BLOCK time (see [`conn`]).

pub mod conn;
pub mod error;
pub mod hints;
pub mod hot;
pub mod keeper;
pub mod lease;
pub mod nonces;
mod owned;
pub mod registry;
pub mod rpc;
pub mod window;

pub use conn::{ConnOptions, Keys, Redis};
pub use error::{ClusterError, Result};
pub use hints::{Hint, HintEvent, HintStream, Hints};
pub use hot::{HotWindows, StoredWindow};
pub use keeper::LeaseKeeper;
pub use lease::{Holder, Lease, Leases};
pub use nonces::Nonces;
pub use owned::Ownerships;
pub use registry::{InstanceInfo, Liveness, Registration, Registry};
pub use rpc::{
    recover_dead_instance, HandlerError, RpcClient, RpcHandler, RpcOptions, RpcRequest, RpcServer,
};
pub use window::Windows;
