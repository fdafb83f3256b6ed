//! A fetched page parsed by html5ever (the WHATWG tokenizer and tree builder: every named
//! character reference, raw-text `<script>`/`<style>`, implied end tags, misnested
//! formatting, foster-parented table content) into a small arena of nodes.
//!
//! Two guards sit between html5ever's tokenizer and its tree builder:
//! - Nesting deeper than [`MAX_DEPTH`] elements is flattened: further start tags (and their
//!   end tags) are dropped, their text kept. The tree builder scans its stack of open
//!   elements for many tags, so a page of a million nested `<div>`s would otherwise cost
//!   time quadratic in its size (browsers cap the depth for the same reason).
//! - A tag left unfinished at the very end of the input (`x<y`, a page cut off inside a
//!   tag) is kept as text; HTML5 drops it.
//!
//! The arena links siblings both ways, so every tree edit html5ever asks for is O(1) and
//! dropping the tree recurses nowhere.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use html5ever::interface::{ElemName, ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::tree_builder::{TreeBuilder, TreeBuilderOpts};
use html5ever::{local_name, ns, Attribute, LocalName, Namespace, QualName, TokenizerResult};

/// Elements nested deeper than this (the document's `<html>` is depth 1) are flattened.
pub(super) const MAX_DEPTH: u32 = 256;

/// A node's index in the arena; the document is 0.
pub(super) type Id = usize;

const DOCUMENT: Id = 0;

/// What a node is.
pub(super) enum Data {
    Document,
    Element(Element),
    Text(String),
    /// Comments, processing instructions, a `<template>`'s contents.
    Other,
}

/// An element and the attributes the converter reads.
pub(super) struct Element {
    pub name: QualName,
    pub href: Option<String>,
    pub alt: Option<String>,
    /// Has the `hidden` attribute or an inline `display: none`.
    pub hidden: bool,
    /// The contents of a `<template>` (kept out of the tree, as in a browser).
    template: Option<Id>,
}

impl Element {
    /// The local name of an HTML element (`None` for SVG, MathML and the like).
    pub fn html_name(&self) -> Option<&str> {
        (self.name.ns == ns!(html)).then_some(&*self.name.local)
    }
}

pub(super) struct Node {
    pub data: Data,
    parent: Option<Id>,
    first_child: Option<Id>,
    last_child: Option<Id>,
    prev: Option<Id>,
    next: Option<Id>,
    /// Elements from the document down to this node (approximate after a reparenting).
    depth: u32,
}

impl Node {
    fn new(data: Data) -> Self {
        Self {
            data,
            parent: None,
            first_child: None,
            last_child: None,
            prev: None,
            next: None,
            depth: 0,
        }
    }
}

/// The parsed document.
pub(super) struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    pub fn root(&self) -> Id {
        DOCUMENT
    }

    pub fn node(&self, id: Id) -> &Node {
        &self.nodes[id]
    }

    /// The children of `id`, last first.
    pub fn children_rev(&self, id: Id) -> impl Iterator<Item = Id> + '_ {
        std::iter::successors(self.nodes[id].last_child, |&c| self.nodes[c].prev)
    }

    /// Every element in the order it was created (document order for all but the
    /// formatting elements html5ever re-creates).
    pub fn elements(&self) -> impl Iterator<Item = (Id, &Element)> + '_ {
        self.nodes
            .iter()
            .enumerate()
            .filter_map(|(id, n)| match &n.data {
                Data::Element(e) => Some((id, e)),
                _ => None,
            })
    }

    /// Whether `id` is in the document (not detached, not in a `<template>`'s contents).
    pub fn in_document(&self, mut id: Id) -> bool {
        while let Some(parent) = self.nodes[id].parent {
            id = parent;
        }
        id == DOCUMENT
    }
}

/// Parses a whole document.
pub(super) fn parse(html: &str) -> Tree {
    let sink = Sink {
        nodes: RefCell::new(vec![Node::new(Data::Document)]),
        depth: Cell::new(0),
    };
    let builder = TreeBuilder::new(
        sink,
        TreeBuilderOpts {
            drop_doctype: true,
            ..TreeBuilderOpts::default()
        },
    );
    let guard = Guard {
        builder,
        tail: RefCell::new(unfinished_tag(html)),
        dropped: RefCell::new(HashMap::new()),
    };
    let tokenizer = Tokenizer::new(guard, TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    // `Script` (a `</script>` was seen: a browser would run it now) is the only other answer.
    while !matches!(tokenizer.feed(&input), TokenizerResult::Done) {}
    tokenizer.end();
    Tree {
        nodes: tokenizer.sink.builder.sink.nodes.into_inner(),
    }
}

/// Where a tag that the input ends inside may start: the first `<` + letter (or `</` +
/// letter) after the last `>`. Only used when the tokenizer reports such an end.
fn unfinished_tag(html: &str) -> Option<String> {
    let from = html.rfind('>').map_or(0, |i| i + 1);
    let rest = &html[from..];
    let bytes = rest.as_bytes();
    let start = rest.match_indices('<').map(|(i, _)| i).find(|&i| {
        let after = bytes.get(i + 1).copied();
        after.is_some_and(|b| b.is_ascii_alphabetic())
            || (after == Some(b'/') && bytes.get(i + 2).is_some_and(u8::is_ascii_alphabetic))
    })?;
    let text: String = super::decode_entities(&rest[start..])
        .chars()
        .filter(|&c| c != '\0')
        .collect();
    Some(text)
}

/// The tokenizer's report of an end of input inside a start or end tag (html5ever's
/// wording, `Saw EOF in state TagName` and the like; the converter's tests pin it).
fn eof_in_tag(message: &str) -> bool {
    const TAG_STATES: [&str; 7] = [
        "TagName",
        "BeforeAttributeName",
        "AttributeName",
        "AfterAttributeName",
        "AttributeValue",
        "AfterAttributeValueQuoted",
        "SelfClosingStartTag",
    ];
    message
        .strip_prefix("Saw EOF in state ")
        .is_some_and(|state| TAG_STATES.iter().any(|s| state.starts_with(s)))
}

/// Elements that never hold other elements: void ones, and those whose content the
/// tokenizer reads as raw text (their start tag must reach the tree builder, which switches
/// the tokenizer, or their text would be parsed as markup).
fn is_leaf(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("area")
            | local_name!("base")
            | local_name!("basefont")
            | local_name!("bgsound")
            | local_name!("br")
            | local_name!("col")
            | local_name!("embed")
            | local_name!("frame")
            | local_name!("hr")
            | local_name!("img")
            | local_name!("input")
            | local_name!("keygen")
            | local_name!("link")
            | local_name!("meta")
            | local_name!("param")
            | local_name!("source")
            | local_name!("track")
            | local_name!("wbr")
            | local_name!("script")
            | local_name!("style")
            | local_name!("textarea")
            | local_name!("title")
            | local_name!("xmp")
            | local_name!("iframe")
            | local_name!("noembed")
            | local_name!("noframes")
            | local_name!("noscript")
            | local_name!("plaintext")
    )
}

/// Passes the tokenizer's tokens to the tree builder, less what is nested too deep, plus
/// the text of a tag the input ends inside.
struct Guard {
    builder: TreeBuilder<Id, Sink>,
    tail: RefCell<Option<String>>,
    /// Start tags dropped for depth, by name: as many end tags are dropped after them.
    dropped: RefCell<HashMap<LocalName, usize>>,
}

impl TokenSink for Guard {
    type Handle = Id;

    fn process_token(&self, token: Token, line: u64) -> TokenSinkResult<Id> {
        match &token {
            Token::ParseError(message) if eof_in_tag(message) => {
                let result = self.builder.process_token(token, line);
                match self.tail.borrow_mut().take() {
                    Some(text) => self
                        .builder
                        .process_token(Token::CharacterTokens(text.into()), line),
                    None => result,
                }
            }
            Token::TagToken(tag)
                if tag.kind == TagKind::StartTag
                    && !is_leaf(&tag.name)
                    && self.builder.sink.depth.get() >= MAX_DEPTH =>
            {
                *self
                    .dropped
                    .borrow_mut()
                    .entry(tag.name.clone())
                    .or_default() += 1;
                TokenSinkResult::Continue
            }
            Token::TagToken(tag) if tag.kind == TagKind::EndTag => {
                let mut dropped = self.dropped.borrow_mut();
                match dropped.get_mut(&tag.name) {
                    Some(n) if *n > 0 => {
                        *n -= 1;
                        TokenSinkResult::Continue
                    }
                    _ => {
                        drop(dropped);
                        self.builder.process_token(token, line)
                    }
                }
            }
            _ => self.builder.process_token(token, line),
        }
    }

    fn end(&self) {
        self.builder.end();
    }

    fn adjusted_current_node_present_but_not_in_html_namespace(&self) -> bool {
        self.builder
            .adjusted_current_node_present_but_not_in_html_namespace()
    }
}

/// An element's name as the tree builder asks for it (a cheap copy: names are atoms).
#[derive(Debug)]
struct Name(QualName);

impl ElemName for Name {
    fn ns(&self) -> &Namespace {
        &self.0.ns
    }

    fn local_name(&self) -> &LocalName {
        &self.0.local
    }
}

/// The arena html5ever builds into.
struct Sink {
    nodes: RefCell<Vec<Node>>,
    /// Depth of the node the next element probably goes into (see [`MAX_DEPTH`]).
    depth: Cell<u32>,
}

impl Sink {
    fn push(&self, data: Data) -> Id {
        let mut nodes = self.nodes.borrow_mut();
        nodes.push(Node::new(data));
        nodes.len() - 1
    }

    /// Notes where the tree builder is after `child` went in at `depth`.
    fn inserted(&self, nodes: &[Node], child: Id, depth: u32) {
        let holds_more = match &nodes[child].data {
            Data::Element(e) => !is_leaf(&e.name.local),
            _ => false,
        };
        self.depth.set(if holds_more {
            depth
        } else {
            depth.saturating_sub(1)
        });
    }
}

/// Unlinks `id` from its parent and siblings.
fn detach(nodes: &mut [Node], id: Id) {
    let (parent, prev, next) = {
        let n = &nodes[id];
        (n.parent, n.prev, n.next)
    };
    match prev {
        Some(p) => nodes[p].next = next,
        None => {
            if let Some(parent) = parent {
                nodes[parent].first_child = next;
            }
        }
    }
    match next {
        Some(n) => nodes[n].prev = prev,
        None => {
            if let Some(parent) = parent {
                nodes[parent].last_child = prev;
            }
        }
    }
    let n = &mut nodes[id];
    n.parent = None;
    n.prev = None;
    n.next = None;
}

/// Links the detached `id` as the last child of `parent`.
fn link_last(nodes: &mut [Node], parent: Id, id: Id) {
    let last = nodes[parent].last_child;
    let depth = nodes[parent].depth + 1;
    {
        let n = &mut nodes[id];
        n.parent = Some(parent);
        n.prev = last;
        n.next = None;
        n.depth = depth;
    }
    match last {
        Some(l) => nodes[l].next = Some(id),
        None => nodes[parent].first_child = Some(id),
    }
    nodes[parent].last_child = Some(id);
    set_template_depth(nodes, id);
}

/// Links the detached `id` just before `sibling`.
fn link_before(nodes: &mut [Node], sibling: Id, id: Id) {
    let (parent, prev, depth) = {
        let s = &nodes[sibling];
        (s.parent, s.prev, s.depth)
    };
    {
        let n = &mut nodes[id];
        n.parent = parent;
        n.prev = prev;
        n.next = Some(sibling);
        n.depth = depth;
    }
    nodes[sibling].prev = Some(id);
    match prev {
        Some(p) => nodes[p].next = Some(id),
        None => {
            if let Some(parent) = parent {
                nodes[parent].first_child = Some(id);
            }
        }
    }
    set_template_depth(nodes, id);
}

/// A `<template>`'s contents count as nested in it.
fn set_template_depth(nodes: &mut [Node], id: Id) {
    if let Data::Element(Element {
        template: Some(t), ..
    }) = nodes[id].data
    {
        nodes[t].depth = nodes[id].depth;
    }
}

impl TreeSink for Sink {
    type Handle = Id;
    type Output = Self;
    type ElemName<'a> = Name;

    fn finish(self) -> Self {
        self
    }

    fn parse_error(&self, _message: Cow<'static, str>) {}

    fn get_document(&self) -> Id {
        DOCUMENT
    }

    fn elem_name<'a>(&'a self, target: &'a Id) -> Name {
        match &self.nodes.borrow()[*target].data {
            Data::Element(e) => Name(e.name.clone()),
            // Only ever asked of elements.
            _ => Name(QualName::new(None, ns!(), local_name!(""))),
        }
    }

    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> Id {
        let template = flags.template.then(|| self.push(Data::Other));
        let mut element = Element {
            name,
            href: None,
            alt: None,
            hidden: false,
            template,
        };
        add_attributes(&mut element, attrs);
        self.push(Data::Element(element))
    }

    fn create_comment(&self, _text: StrTendril) -> Id {
        self.push(Data::Other)
    }

    fn create_pi(&self, _target: StrTendril, _data: StrTendril) -> Id {
        self.push(Data::Other)
    }

    fn append(&self, parent: &Id, child: NodeOrText<Id>) {
        let parent = *parent;
        let mut nodes = self.nodes.borrow_mut();
        match child {
            NodeOrText::AppendNode(id) => {
                detach(&mut nodes, id);
                link_last(&mut nodes, parent, id);
                let depth = nodes[id].depth;
                self.inserted(&nodes, id, depth);
            }
            NodeOrText::AppendText(text) => {
                let depth = nodes[parent].depth;
                self.depth.set(depth);
                if let Some(last) = nodes[parent].last_child {
                    if let Data::Text(t) = &mut nodes[last].data {
                        t.push_str(&text);
                        return;
                    }
                }
                nodes.push(Node::new(Data::Text(text.to_string())));
                let id = nodes.len() - 1;
                link_last(&mut nodes, parent, id);
            }
        }
    }

    fn append_based_on_parent_node(&self, element: &Id, prev_element: &Id, child: NodeOrText<Id>) {
        let has_parent = self.nodes.borrow()[*element].parent.is_some();
        if has_parent {
            self.append_before_sibling(element, child);
        } else {
            self.append(prev_element, child);
        }
    }

    fn append_doctype_to_document(&self, _: StrTendril, _: StrTendril, _: StrTendril) {}

    fn pop(&self, node: &Id) {
        let depth = self.nodes.borrow()[*node].depth;
        self.depth.set(depth.saturating_sub(1));
    }

    fn get_template_contents(&self, target: &Id) -> Id {
        match &self.nodes.borrow()[*target].data {
            Data::Element(Element {
                template: Some(t), ..
            }) => *t,
            _ => *target,
        }
    }

    fn same_node(&self, x: &Id, y: &Id) -> bool {
        x == y
    }

    fn set_quirks_mode(&self, _mode: QuirksMode) {}

    fn append_before_sibling(&self, sibling: &Id, child: NodeOrText<Id>) {
        let sibling = *sibling;
        let mut nodes = self.nodes.borrow_mut();
        match child {
            NodeOrText::AppendNode(id) => {
                detach(&mut nodes, id);
                link_before(&mut nodes, sibling, id);
                let depth = nodes[id].depth;
                self.inserted(&nodes, id, depth);
            }
            NodeOrText::AppendText(text) => {
                if let Some(prev) = nodes[sibling].prev {
                    if let Data::Text(t) = &mut nodes[prev].data {
                        t.push_str(&text);
                        return;
                    }
                }
                nodes.push(Node::new(Data::Text(text.to_string())));
                let id = nodes.len() - 1;
                link_before(&mut nodes, sibling, id);
            }
        }
    }

    fn add_attrs_if_missing(&self, target: &Id, attrs: Vec<Attribute>) {
        if let Data::Element(e) = &mut self.nodes.borrow_mut()[*target].data {
            add_attributes(e, attrs);
        }
    }

    fn remove_from_parent(&self, target: &Id) {
        detach(&mut self.nodes.borrow_mut(), *target);
    }

    fn reparent_children(&self, node: &Id, new_parent: &Id) {
        let mut nodes = self.nodes.borrow_mut();
        while let Some(child) = nodes[*node].first_child {
            detach(&mut nodes, child);
            link_last(&mut nodes, *new_parent, child);
        }
    }
}

/// Keeps the attributes the converter reads (the first of each name, as in HTML).
fn add_attributes(element: &mut Element, attrs: Vec<Attribute>) {
    for attr in attrs {
        if attr.name.ns != ns!() {
            continue;
        }
        let slot = match attr.name.local {
            local_name!("href") => &mut element.href,
            local_name!("alt") => &mut element.alt,
            local_name!("hidden") => {
                element.hidden = true;
                continue;
            }
            local_name!("style") => {
                let style: String = attr
                    .value
                    .chars()
                    .filter(|c| !c.is_ascii_whitespace())
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                element.hidden |= style.contains("display:none");
                continue;
            }
            _ => continue,
        };
        if slot.is_none() {
            *slot = Some(attr.value.to_string());
        }
    }
}
