//! Launches a real PostgreSQL (with pgvector) on a free loopback port (to be written).
