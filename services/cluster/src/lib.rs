//! Redis coordination for the cluster profile (to be written).
