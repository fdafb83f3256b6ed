//! The prompt editor: editing, history, folded pastes, completion tokens, layout.

use pretty_assertions::assert_eq;

use super::*;

fn typed(text: &str) -> Editor {
    let mut editor = Editor::new(Vec::new());
    editor.insert_str(text);
    editor
}

#[test]
fn typing_newlines_and_deleting() {
    let mut e = typed("hello\nwörld");
    assert_eq!(e.cursor(), (1, 5));
    e.backspace();
    e.left();
    e.insert_char('X');
    assert_eq!(e.raw_text(), "hello\nwörXl");
    e.home();
    e.backspace();
    assert_eq!(e.raw_text(), "hellowörXl");
    assert_eq!(e.cursor(), (0, 5));
    e.kill_to_end();
    assert_eq!(e.raw_text(), "hello");
    e.delete_word_back();
    assert!(e.is_empty());
}

#[test]
fn up_and_down_move_between_lines_then_through_history() {
    let mut e = Editor::new(vec!["first".into(), "second\nline".into()]);
    e.insert_str("draft");
    assert!(!e.up());
    assert!(e.history_prev());
    assert_eq!(e.raw_text(), "second\nline");
    assert_eq!(
        e.cursor().0,
        0,
        "starts on the first line to keep walking back"
    );
    assert!(e.history_prev());
    assert_eq!(e.raw_text(), "first");
    assert!(!e.history_prev());
    assert!(e.history_next());
    assert!(e.history_next());
    assert_eq!(e.raw_text(), "draft");
    assert!(!e.history_next());
}

#[test]
fn large_pastes_fold_into_a_placeholder_expanded_on_submit() {
    let mut e = typed("look: ");
    let log: String = (0..50).map(|i| format!("line {i}\n")).collect();
    e.paste(&log);
    assert_eq!(e.raw_text(), "look: [Pasted text #1 +50 lines]");
    assert_eq!(e.text(), format!("look: {log}"));
    e.paste("small\r\npaste");
    assert_eq!(e.lines().len(), 2);
    // tmux and many terminals paste line ends as CR.
    let mut e = typed("");
    e.paste(&"x\r".repeat(20));
    assert_eq!(e.raw_text(), "[Pasted text #1 +20 lines]");
    assert_eq!(e.text(), "x\n".repeat(20));
}

#[test]
fn tokens_are_completed_in_place() {
    let mut e = typed("read @src/ma please");
    for _ in 0..7 {
        e.left();
    }
    assert_eq!(e.current_token(), (5, "@src/ma".to_string()));
    e.replace_token("@src/main.rs");
    assert_eq!(e.raw_text(), "read @src/main.rs please");
    assert_eq!(e.cursor(), (0, 17));
}

#[test]
fn visual_rows_wrap_and_place_the_cursor() {
    let e = typed("abcdef\nxy");
    assert_eq!(
        e.visual(4),
        Visual {
            rows: vec!["abcd".into(), "ef".into(), "xy".into()],
            cursor: (2, 2),
        }
    );
    let e = typed("abcd");
    assert_eq!(
        e.visual(4).cursor,
        (0, 1),
        "a full row puts the cursor below"
    );
}
