//! The transcript cache and scrolling: only visible entries render, anchors hold.

use pretty_assertions::assert_eq;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::*;

fn numbered(n: usize) -> Transcript {
    let mut t = Transcript::default();
    for i in 0..n {
        // Each entry: one line of text plus the blank separator = 2 rows.
        t.push(EntryKind::Dim(format!("entry {i}")));
    }
    t
}

fn screen(t: &mut Transcript, height: u16) -> Vec<String> {
    let area = Rect::new(0, 0, 20, height);
    let mut buf = Buffer::empty(area);
    t.render(area, &mut buf);
    (0..height)
        .map(|y| {
            (0..20)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                .trim_end()
                .to_string()
        })
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn follows_the_bottom_and_renders_only_what_is_visible() {
    let mut t = numbered(1000);
    assert_eq!(screen(&mut t, 4), vec!["· entry 998", "· entry 999"]);
    let rendered = t.entries.iter().filter(|e| e.cache.is_some()).count();
    assert_eq!(rendered, 2, "only the visible entries were wrapped");
}

#[test]
fn scrolling_moves_by_lines_and_returns_to_follow_at_the_bottom() {
    let mut t = numbered(10);
    screen(&mut t, 4);
    t.scroll_up(3);
    assert_eq!(t.scroll(), Scroll::At { entry: 6, line: 1 });
    assert_eq!(screen(&mut t, 4), vec!["· entry 7", "· entry 8"]);
    t.page_up();
    t.page_up();
    assert_eq!(screen(&mut t, 4), vec!["· entry 5", "· entry 6"]);
    t.scroll_to_top();
    assert_eq!(screen(&mut t, 4), vec!["· entry 0", "· entry 1"]);
    for _ in 0..20 {
        t.page_down();
    }
    assert!(t.is_following());
}

#[test]
fn an_anchor_stays_put_while_new_entries_arrive() {
    let mut t = numbered(10);
    screen(&mut t, 4);
    t.scroll_to_top();
    t.push(EntryKind::Dim("new".into()));
    assert_eq!(screen(&mut t, 4), vec!["· entry 0", "· entry 1"]);
    t.follow();
    assert_eq!(screen(&mut t, 4), vec!["· entry 9", "· new"]);
}

#[test]
fn changed_entries_are_re_rendered_and_width_changes_rewrap() {
    let mut t = numbered(1);
    screen(&mut t, 2);
    if let Some(EntryKind::Dim(text)) = t.get_mut(0) {
        *text = "changed".into();
    }
    assert_eq!(screen(&mut t, 2), vec!["· changed"]);
    t.reveal(0);
    assert!(t.is_following(), "a visible entry needs no scrolling");
}
