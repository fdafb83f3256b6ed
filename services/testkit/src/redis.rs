//! Launches a real Redis on a free loopback port (to be written).
