//! The colours and text styles of the terminal UI, in one place so that screens stay
//! consistent. Only the 16 basic ANSI colours are used: they follow the user's terminal
//! theme (light or dark) instead of fighting it.

use ratatui::style::{Color, Modifier, Style};

pub fn plain() -> Style {
    Style::default()
}

pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn user_marker() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

pub fn assistant_marker() -> Style {
    Style::default().fg(Color::White)
}

pub fn heading() -> Style {
    Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD)
}

pub fn inline_code() -> Style {
    Style::default().fg(Color::Yellow)
}

pub fn link() -> Style {
    Style::default()
        .fg(Color::Blue)
        .add_modifier(Modifier::UNDERLINED)
}

pub fn code_gutter() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn keyword() -> Style {
    Style::default()
        .fg(Color::Magenta)
        .add_modifier(Modifier::BOLD)
}

pub fn string() -> Style {
    Style::default().fg(Color::Green)
}

pub fn number() -> Style {
    Style::default().fg(Color::Yellow)
}

pub fn comment() -> Style {
    Style::default()
        .fg(Color::DarkGray)
        .add_modifier(Modifier::ITALIC)
}

pub fn type_name() -> Style {
    Style::default().fg(Color::Cyan)
}

pub fn diff_added() -> Style {
    Style::default().fg(Color::Green)
}

pub fn diff_removed() -> Style {
    Style::default().fg(Color::Red)
}

pub fn diff_hunk() -> Style {
    Style::default().fg(Color::Cyan)
}

pub fn tool_name() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

pub fn ok() -> Style {
    Style::default().fg(Color::Green)
}

pub fn warning() -> Style {
    Style::default().fg(Color::Yellow)
}

pub fn error() -> Style {
    Style::default().fg(Color::Red)
}

pub fn info() -> Style {
    Style::default().fg(Color::Cyan)
}

pub fn selected() -> Style {
    Style::default().add_modifier(Modifier::REVERSED)
}

pub fn border() -> Style {
    Style::default().fg(Color::DarkGray)
}

pub fn banner_warning() -> Style {
    Style::default()
        .fg(Color::Black)
        .bg(Color::Yellow)
        .add_modifier(Modifier::BOLD)
}

pub fn banner_error() -> Style {
    Style::default()
        .fg(Color::White)
        .bg(Color::Red)
        .add_modifier(Modifier::BOLD)
}
