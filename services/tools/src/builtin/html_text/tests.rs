//! The HTML → Markdown converter on a whole page, on broken and hostile markup, and its
//! character reference decoder.

use super::*;
use pretty_assertions::assert_eq;

fn md(html: &str) -> String {
    let base = Url::parse("https://example.com/docs/page.html").unwrap();
    html_to_markdown(html, Some(&base))
}

#[test]
fn a_page_becomes_markdown() {
    let html = r##"<!DOCTYPE html>
<html><head><title>T</title><style>body { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body>
  <h1>Main   title</h1>
  <p>Hello, <b>world</b> &amp; friends.<br>Second line.</p>
  <!-- a comment <p>hidden</p> -->
  <ul>
<li>one <a href="/a">first link</a></li>
<li>two
  <ol><li>nested</li><li>again</li></ol>
</li>
  </ul>
  <h2>Code</h2>
  <pre><code>fn main() {
println!("&lt;hi&gt;");
}</code></pre>
  <p>Use <code>cargo test</code> and <a href="guide.html#x">the guide</a>.
 <a href="javascript:void(0)">js</a> <a href="#top">top</a></p>
  <blockquote><p>Quoted text</p></blockquote>
  <table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>
</body></html>"##;
    let want = r#"# Main title

Hello, world & friends.
Second line.

- one [first link](https://example.com/a)
- two
  1. nested
  2. again

## Code

```
fn main() {
println!("<hi>");
}
```

Use `cargo test` and [the guide](https://example.com/docs/guide.html#x). js top

> Quoted text

a | b
1 | 2"#;
    assert_eq!(md(html), want);
}

#[test]
fn entities_decode_and_unknown_ones_stay() {
    assert_eq!(
        decode_entities("a&nbsp;b &#65;&#x42; &bogus; &amp"),
        "a b AB &bogus; &amp"
    );
}

#[test]
fn broken_markup_degrades_to_text() {
    assert_eq!(md("a < b and <p unclosed"), "a < b and <p unclosed");
    assert_eq!(md("<script>never closed"), "");
    assert_eq!(md("x<y"), "x<y");
}

#[test]
fn every_named_reference_decodes() {
    // Beyond the 21 names the hand-written converter knew: all of HTML's, two-character
    // ones, the longest, legacy ones without `;` (in text, as browsers do), numeric ones
    // by HTML's rules (NUL → U+FFFD, the C1 range as Windows-1252).
    assert_eq!(
        md("<p>&hearts; &eacute;&Aring; &NotNestedGreaterGreater; \
            &CounterClockwiseContourIntegral; &notin; &copy 2024 &#x1F600;&#128512; &#0; \
            &#x80; &bogus; &amp;lt;</p>"),
        "♥ éÅ ⪢\u{338} ∳ ∉ © 2024 😀😀 \u{fffd} € &bogus; &lt;"
    );
    assert_eq!(
        decode_entities("&hearts;&NotNestedGreaterGreater;&#0;&#x80;&#xD800;&#x110000;&#xZ;&;"),
        "♥⪢\u{338}\u{fffd}€\u{fffd}\u{fffd}&#xZ;&;"
    );
    // Attribute values are decoded too (here a link target), by the attribute rules: a
    // legacy name without `;` before `=` stays as written.
    assert_eq!(
        md(r#"<a href="/search?q=a&amp;lang=en&copy=1">s</a>"#),
        "[s](https://example.com/search?q=a&lang=en&copy=1)"
    );
}

#[test]
fn scripts_styles_comments_and_cdata_are_not_text() {
    let html = r#"<p>a<script>document.write('<p>x</p>'); if (a<b) {}</script>b
        <style>p::after { content: "</p>style" }</style>c<!-- <p>hidden</p> -->d
        <![CDATA[ cdata is a comment in HTML ]]>e</p>
        <noscript><p>enable js</p></noscript><template><p>template</p></template>
        <svg><text>svg</text></svg><iframe><p>frame</p></iframe><object>obj</object>
        <p title='<script>alert(1)</script>'>f</p><!-- never closed <p>g</p>"#;
    assert_eq!(md(html), "ab cd e\n\nf");
    // CDATA is text only in foreign content (MathML here).
    assert_eq!(md("<math><mi><![CDATA[x<y]]></mi></math>"), "x<y");
    // A `</script>` inside a script's string still ends it, as in a browser.
    assert_eq!(
        md("<script>var s = '</script>visible';</script>"),
        "visible';"
    );
}

#[test]
fn malformed_nesting_is_repaired_as_a_browser_does() {
    assert_eq!(
        md("<b><i>bold italic</b> italic</i> plain"),
        "bold italic italic plain"
    );
    assert_eq!(md("<p>one<div>two</p>three</div>"), "one\n\ntwo\n\nthree");
    assert_eq!(
        md("<ul><li>a<li>b<ul><li>c</ul><li>d</ul>"),
        "- a\n- b\n  - c\n- d"
    );
    // A link inside a link closes the first.
    assert_eq!(
        md("<a href=/x>one <a href=/y>two</a>"),
        "[one](https://example.com/x) [two](https://example.com/y)"
    );
    assert_eq!(
        md("<html><body><p>a</p></body></html><p>after the end</p>"),
        "a\n\nafter the end"
    );
    assert_eq!(md("<dl><dt>term<dd>definition</dl>"), "term\n\ndefinition");
}

#[test]
fn unclosed_and_cut_off_tags() {
    assert_eq!(
        md("<div><p>unclosed paragraph<p>second<ul><li>item"),
        "unclosed paragraph\n\nsecond\n\n- item"
    );
    // A page cut off inside a tag keeps the text of the unfinished tag, decoded.
    assert_eq!(
        md(r#"<p>text</p>more <a href="https://example.com/very &amp; long"#),
        r#"text

more <a href="https://example.com/very & long"#
    );
    assert_eq!(md("<p>a</p>x</y"), "a\n\nx</y");
    // An unfinished comment or script at the end is not text.
    assert_eq!(md("<p>a</p><!-- x<y"), "a");
    assert_eq!(md("<p>a</p><script>if (x<y"), "a");
}

#[test]
fn huge_attribute_values_are_parsed_not_shown() {
    let long = "x".repeat(1 << 20);
    let angles = "<".repeat(1 << 20);
    let html = format!(
        r#"<p title="{angles}" data-x='{long}'>kept</p><a href="/{long}">link</a><img alt="{}">"#,
        "pic ".repeat(3)
    );
    assert_eq!(
        md(&html),
        format!("kept\n\n[link](https://example.com/{long}) [image: pic pic pic]")
    );
}

#[test]
fn tables_nested_and_broken() {
    assert_eq!(
        md(
            "<table><tr><td>a</td><td><table><tr><td>b</td><td>c</td></tr></table></td>\
            <td>d</td></tr><tr><td>e</td><td>f</td></tr></table>"
        ),
        "a |\n\nb | c\n\n| d\ne | f"
    );
    // Implied cell and row ends; text directly in a table is moved before it.
    assert_eq!(
        md("<table><tr><th>h1<th>h2<tr><td>1<td>2</table>\
            <table>stray text<tr><td>z</td></tr></table>"),
        "h1 | h2\n1 | 2\n\nstray text\n\nz"
    );
}

#[test]
fn links_base_and_whitespace() {
    // The document's <base href> (in <head>) resolves relative links.
    assert_eq!(
        md("<head><base href='https://other.org/dir/'></head><a href='x.html'>rel</a>"),
        "[rel](https://other.org/dir/x.html)"
    );
    // One in a template's contents is not the document's.
    assert_eq!(
        md("<template><base href='https://other.org/'></template><a href='x.html'>rel</a>"),
        "[rel](https://example.com/docs/x.html)"
    );
    // Link text is one line without brackets.
    assert_eq!(
        md("<a href='https://x.org/'>  multi\n\n  line <b>[link]</b>  </a>"),
        "[multi line link](https://x.org/)"
    );
    assert_eq!(
        md("<p>\u{a0}no&nbsp;break\u{3000}spaces\t\n here</p>"),
        "no break spaces here"
    );
    assert_eq!(
        md("<pre>\n  keep   spaces\n\tand tabs</pre>"),
        "```\n  keep   spaces\n\tand tabs\n```"
    );
    assert_eq!(
        md("<h2>Title <code>x</code></h2><blockquote>q1<blockquote>q2</blockquote></blockquote>"),
        "## Title `x`\n\n> q1\n>\n> > q2"
    );
    // A text area's content is text, not markup; a hidden one (a template) is left out, as
    // are the fallbacks for missing plugins and frames.
    assert_eq!(
        md("<textarea>ta &amp; <b>x</b></textarea>\
            <textarea style='DISPLAY: none'><div>template</div></textarea>\
            <textarea hidden>t2</textarea><noembed><p>x</p></noembed><noframes>y</noframes>"),
        "ta & <b>x</b>"
    );
    assert_eq!(md("<pre>a&nbsp;\u{a0}b</pre>"), "```\na  b\n```");
}

#[test]
fn deep_nesting_is_flattened_in_linear_time() {
    // Without the depth guard html5ever needs minutes for this (its stack scans are
    // quadratic in the depth); with it, milliseconds.
    let n = 100_000;
    let html = format!(
        "{}deep text{}<p>after</p>",
        "<div>".repeat(n),
        "</div>".repeat(n)
    );
    let started = std::time::Instant::now();
    assert_eq!(md(&html), "deep text\n\nafter");
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    let lists = format!("{}{}", "<ul><li>".repeat(n), "x");
    let started = std::time::Instant::now();
    let out = md(&lists);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    // Indentation stops at eight levels.
    assert!(
        out.ends_with(&format!("{}- x", "  ".repeat(8))),
        "{out:.100}"
    );
}

#[test]
fn nested_quotes_cannot_blow_up_the_output() {
    let html = format!(
        "{}{}",
        "<blockquote>".repeat(1000),
        "line<br>".repeat(10_000)
    );
    let out = md(&html);
    let prefix = "> ".repeat(8);
    assert!(out
        .lines()
        .all(|l| l == format!("{prefix}line") || l.trim_end() == prefix.trim_end()));
    assert!(out.len() < 30 * 10_000, "{}", out.len());
}
