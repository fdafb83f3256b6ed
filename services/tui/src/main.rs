//! The `lumina` binary; all logic lives in the `lumina_tui` library.

fn main() -> std::process::ExitCode {
    lumina_tui::main()
}
