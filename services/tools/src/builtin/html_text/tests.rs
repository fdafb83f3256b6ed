//! The HTML → Markdown converter on a whole page and on broken markup.

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
