//! End-to-end tests of the real `lumina` binary: it finds or starts a real `lumina-backend`,
//! which talks to the scripted model server.

mod cli;
