//! Byte-exact, realistic SSE transcripts for a [`Turn`], in both vendors' formats.
//! Each returned string is one complete SSE event (the unit `*_after_chunks` counts).

use serde_json::Value;

use super::turn::{ScriptedUsage, Turn};

/// Text deltas carry this many characters, so every answer streams in several pieces.
const TEXT_PIECE: usize = 4;
const ARGS_PIECE: usize = 8;

/// Per-request facts the transcript needs.
pub(crate) struct Ctx<'a> {
    /// 1-based request number, used to make ids unique and deterministic.
    pub request_no: usize,
    /// The `model` of the request, echoed back like the real APIs do.
    pub model: &'a str,
    pub request_bytes: usize,
    /// OpenAI: whether the client asked for `stream_options.include_usage`.
    pub include_usage: bool,
}

fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    chars.chunks(n).map(|c| c.iter().collect()).collect()
}

fn usage(turn: &Turn, ctx: &Ctx) -> ScriptedUsage {
    turn.usage.unwrap_or_else(|| {
        let answer = turn.text.len()
            + turn.thinking.len()
            + turn
                .tool_calls
                .iter()
                .map(|t| t.arguments_text().len())
                .sum::<usize>();
        ScriptedUsage {
            input_tokens: (ctx.request_bytes / 4).max(1) as u64,
            output_tokens: (answer / 4 + 1) as u64,
        }
    })
}

/// A JSON object with keys in the given order (the vendors put `type`/`id` first; a
/// `serde_json::Value` would sort keys or depend on crate features). Values are JSON text.
fn obj(pairs: &[(&str, String)]) -> String {
    let fields: Vec<String> = pairs.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", fields.join(","))
}

/// A JSON string literal.
fn st(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

const NULL: &str = "null";

fn anthropic_event(name: &str, data: String) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// `message_start`, content blocks (thinking, text, tool_use) with a `ping` after the first
/// block start, `message_delta` with cumulative usage, `message_stop`.
pub(crate) fn anthropic(turn: &Turn, ctx: &Ctx) -> Vec<String> {
    let u = usage(turn, ctx);
    let message = obj(&[
        ("id", st(&format!("msg_scripted_{}", ctx.request_no))),
        ("type", st("message")),
        ("role", st("assistant")),
        ("model", st(ctx.model)),
        ("content", "[]".into()),
        ("stop_reason", NULL.into()),
        ("stop_sequence", NULL.into()),
        (
            "usage",
            obj(&[
                ("input_tokens", u.input_tokens.to_string()),
                ("cache_creation_input_tokens", "0".into()),
                ("cache_read_input_tokens", "0".into()),
                ("output_tokens", "1".into()),
            ]),
        ),
    ]);
    let mut out = vec![anthropic_event(
        "message_start",
        obj(&[("type", st("message_start")), ("message", message)]),
    )];
    if turn.overloaded_after_200 {
        let error = obj(&[
            ("type", st("overloaded_error")),
            ("message", st("Overloaded")),
        ]);
        out.push(anthropic_event(
            "error",
            obj(&[("type", st("error")), ("error", error)]),
        ));
        return out;
    }
    let mut index = 0usize;
    let mut block = |out: &mut Vec<String>, start: String, deltas: Vec<String>| {
        out.push(anthropic_event(
            "content_block_start",
            obj(&[
                ("type", st("content_block_start")),
                ("index", index.to_string()),
                ("content_block", start),
            ]),
        ));
        if index == 0 {
            // The real API sends a ping right after the first block starts, spaced like this.
            out.push("event: ping\ndata: {\"type\": \"ping\"}\n\n".to_string());
        }
        for d in deltas {
            out.push(anthropic_event(
                "content_block_delta",
                obj(&[
                    ("type", st("content_block_delta")),
                    ("index", index.to_string()),
                    ("delta", d),
                ]),
            ));
        }
        out.push(anthropic_event(
            "content_block_stop",
            obj(&[
                ("type", st("content_block_stop")),
                ("index", index.to_string()),
            ]),
        ));
        index += 1;
    };
    if !turn.thinking.is_empty() {
        let mut deltas: Vec<String> = pieces(&turn.thinking, TEXT_PIECE)
            .iter()
            .map(|p| obj(&[("type", st("thinking_delta")), ("thinking", st(p))]))
            .collect();
        deltas.push(obj(&[
            ("type", st("signature_delta")),
            ("signature", st("c2NyaXB0ZWQtc2lnbmF0dXJl")),
        ]));
        let start = obj(&[
            ("type", st("thinking")),
            ("thinking", st("")),
            ("signature", st("")),
        ]);
        block(&mut out, start, deltas);
    }
    if !turn.text.is_empty() {
        let deltas = pieces(&turn.text, TEXT_PIECE)
            .iter()
            .map(|p| obj(&[("type", st("text_delta")), ("text", st(p))]))
            .collect();
        block(
            &mut out,
            obj(&[("type", st("text")), ("text", st(""))]),
            deltas,
        );
    }
    for (k, call) in turn.tool_calls.iter().enumerate() {
        let id = call
            .id
            .clone()
            .unwrap_or_else(|| format!("toolu_{}_{k}", ctx.request_no));
        let json_delta =
            |p: &str| obj(&[("type", st("input_json_delta")), ("partial_json", st(p))]);
        // The API's first input_json_delta is always an empty string.
        let mut deltas = vec![json_delta("")];
        deltas.extend(
            pieces(&call.arguments_text(), ARGS_PIECE)
                .iter()
                .map(|p| json_delta(p)),
        );
        let start = obj(&[
            ("type", st("tool_use")),
            ("id", st(&id)),
            ("name", st(&call.name)),
            ("input", "{}".into()),
        ]);
        block(&mut out, start, deltas);
    }
    let delta = obj(&[
        ("stop_reason", st(&turn.effective_stop_reason())),
        ("stop_sequence", NULL.into()),
    ]);
    out.push(anthropic_event(
        "message_delta",
        obj(&[
            ("type", st("message_delta")),
            ("delta", delta),
            (
                "usage",
                obj(&[("output_tokens", u.output_tokens.to_string())]),
            ),
        ]),
    ));
    out.push(anthropic_event(
        "message_stop",
        obj(&[("type", st("message_stop"))]),
    ));
    out
}

/// Role chunk, reasoning/text chunks, tool-call fragments keyed by index and interleaved
/// across calls, a finish chunk, the usage chunk with empty `choices`, then `[DONE]`.
pub(crate) fn openai(turn: &Turn, ctx: &Ctx) -> Vec<String> {
    let u = usage(turn, ctx);
    let id = format!("chatcmpl-scripted-{}", ctx.request_no);
    let base = |choices: String, usage: String| {
        let mut fields = vec![
            ("id", st(&id)),
            ("object", st("chat.completion.chunk")),
            ("created", "1700000000".to_string()),
            ("model", st(ctx.model)),
            ("system_fingerprint", st("fp_scripted")),
            ("choices", choices),
        ];
        if ctx.include_usage {
            fields.push(("usage", usage));
        }
        format!("data: {}\n\n", obj(&fields))
    };
    let chunk = |delta: String, finish: String| {
        let choice = obj(&[
            ("index", "0".into()),
            ("delta", delta),
            ("logprobs", NULL.into()),
            ("finish_reason", finish),
        ]);
        base(format!("[{choice}]"), NULL.into())
    };
    let first = obj(&[
        ("role", st("assistant")),
        ("content", st("")),
        ("refusal", NULL.into()),
    ]);
    let mut out = vec![chunk(first, NULL.into())];
    if turn.overloaded_after_200 {
        let error = obj(&[
            (
                "message",
                st("The server is overloaded. Please try again later."),
            ),
            ("type", st("server_error")),
            ("param", NULL.into()),
            ("code", NULL.into()),
        ]);
        out.push(format!("data: {}\n\n", obj(&[("error", error)])));
        return out;
    }
    for p in pieces(&turn.thinking, TEXT_PIECE) {
        out.push(chunk(obj(&[("reasoning_content", st(&p))]), NULL.into()));
    }
    for p in pieces(&turn.text, TEXT_PIECE) {
        out.push(chunk(obj(&[("content", st(&p))]), NULL.into()));
    }
    let mut per_call: Vec<Vec<String>> = turn
        .tool_calls
        .iter()
        .enumerate()
        .map(|(k, call)| {
            let id = call
                .id
                .clone()
                .unwrap_or_else(|| format!("call_{}_{k}", ctx.request_no));
            let function = obj(&[("name", st(&call.name)), ("arguments", st(""))]);
            let mut frags = vec![obj(&[
                ("index", k.to_string()),
                ("id", st(&id)),
                ("type", st("function")),
                ("function", function),
            ])];
            frags.extend(pieces(&call.arguments_text(), ARGS_PIECE).iter().map(|p| {
                obj(&[
                    ("index", k.to_string()),
                    ("function", obj(&[("arguments", st(p))])),
                ])
            }));
            frags.reverse(); // popped from the back below
            frags
        })
        .collect();
    // Round-robin so fragments of parallel calls interleave: clients must key by index.
    while per_call.iter().any(|f| !f.is_empty()) {
        for frags in per_call.iter_mut() {
            if let Some(f) = frags.pop() {
                out.push(chunk(obj(&[("tool_calls", format!("[{f}]"))]), NULL.into()));
            }
        }
    }
    let finish = match turn.effective_stop_reason().as_str() {
        "end_turn" | "stop_sequence" => "stop".to_string(),
        "tool_use" => "tool_calls".to_string(),
        "max_tokens" => "length".to_string(),
        "refusal" => "content_filter".to_string(),
        other => other.to_string(),
    };
    out.push(chunk("{}".into(), st(&finish)));
    if ctx.include_usage {
        let usage = obj(&[
            ("prompt_tokens", u.input_tokens.to_string()),
            ("completion_tokens", u.output_tokens.to_string()),
            (
                "total_tokens",
                (u.input_tokens + u.output_tokens).to_string(),
            ),
        ]);
        out.push(base("[]".into(), usage));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// The vendor's error body for an HTTP status.
pub(crate) fn anthropic_error_body(status: u16) -> String {
    let (kind, message) = match status {
        400 => ("invalid_request_error", "scripted invalid request"),
        401 => ("authentication_error", "invalid x-api-key"),
        402 => ("billing_error", "scripted billing error"),
        403 => ("permission_error", "scripted permission error"),
        404 => ("not_found_error", "scripted not found"),
        413 => (
            "request_too_large",
            "Request exceeds the maximum allowed number of bytes.",
        ),
        429 => ("rate_limit_error", "scripted rate limit"),
        504 => ("timeout_error", "scripted timeout"),
        529 => ("overloaded_error", "Overloaded"),
        _ => ("api_error", "Internal server error"),
    };
    obj(&[
        ("type", st("error")),
        (
            "error",
            obj(&[("type", st(kind)), ("message", st(message))]),
        ),
        ("request_id", st("req_scripted")),
    ])
}

pub(crate) fn openai_error_body(status: u16) -> String {
    let (kind, code, message) = match status {
        401 => (
            "invalid_request_error",
            st("invalid_api_key"),
            "Incorrect API key provided.",
        ),
        404 => (
            "invalid_request_error",
            st("model_not_found"),
            "The model does not exist.",
        ),
        429 => (
            "requests",
            st("rate_limit_exceeded"),
            "Rate limit reached for requests.",
        ),
        400..=499 => (
            "invalid_request_error",
            NULL.into(),
            "scripted invalid request",
        ),
        _ => (
            "server_error",
            NULL.into(),
            "The server had an error while processing your request.",
        ),
    };
    let error = obj(&[
        ("message", st(message)),
        ("type", st(kind)),
        ("param", NULL.into()),
        ("code", code),
    ]);
    obj(&[("error", error)])
}
