//! The stdio transport over in-memory pipes: lifecycle, tools, malformed input, cancellation,
//! a server→client request, end of input.

use std::sync::Arc;
use std::time::Duration;

use lumina_mcp_server::{serve_stdio, Handler};
use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

use crate::support::{initialize_body, TestHandler, LATEST, STATELESS};

struct Pipe {
    input: DuplexStream,
    output: Lines<BufReader<DuplexStream>>,
    server: tokio::task::JoinHandle<lumina_mcp_server::Result<()>>,
}

impl Pipe {
    fn start() -> Pipe {
        let (input, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, output) = tokio::io::duplex(1 << 16);
        let handler: Arc<dyn Handler> = Arc::new(TestHandler);
        let server = tokio::spawn(serve_stdio(handler, server_in, server_out));
        Pipe {
            input,
            output: BufReader::new(output).lines(),
            server,
        }
    }

    async fn send_raw(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
    }

    async fn send(&mut self, value: Value) {
        self.send_raw(&value.to_string()).await;
    }

    async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), self.output.next_line())
            .await
            .expect("no line from the server within 10 s")
            .unwrap()
            .expect("the server closed stdout");
        serde_json::from_str(&line).unwrap()
    }

    async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        self.recv().await
    }

    async fn initialize(&mut self) {
        self.send(initialize_body(1)).await;
        let reply = self.recv().await;
        assert_eq!(reply["result"]["protocolVersion"], LATEST);
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Closes stdin and expects a clean return.
    async fn finish(self) {
        drop(self.input);
        let outcome = tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .expect("the server did not stop at end of input")
            .unwrap();
        assert!(outcome.is_ok(), "{outcome:?}");
    }
}

#[tokio::test]
async fn round_trip_with_lifecycle_and_tools() {
    let mut pipe = Pipe::start();
    // Before initialize only ping is served.
    let early = pipe.call(7, "tools/list", json!({})).await;
    assert_eq!(early["error"]["code"], -32600);
    assert_eq!(pipe.call(8, "ping", json!({})).await["result"], json!({}));

    pipe.send(initialize_body(1)).await;
    let init = pipe.recv().await;
    assert_eq!(
        init["result"],
        json!({
            "protocolVersion": LATEST,
            "capabilities": {"tools": {"listChanged": false}, "logging": {}},
            "serverInfo": {"name": "test-server", "version": "0.0.1"},
            "instructions": "test instructions"
        })
    );
    pipe.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;

    let tools = pipe.call(2, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["echo", "ask", "wait", "chatty"]);

    let echo = pipe
        .call(
            3,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    assert_eq!(
        echo,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "hi"}]}})
    );
    let unknown = pipe
        .call(4, "tools/call", json!({"name": "nope", "arguments": {}}))
        .await;
    assert_eq!(unknown["error"]["code"], -32602);
    let missing = pipe.call(5, "prompts/list", json!({})).await;
    assert_eq!(missing["error"]["code"], -32601);
    pipe.finish().await;
}

#[tokio::test]
async fn malformed_lines_get_errors_and_the_loop_goes_on() {
    let mut pipe = Pipe::start();
    pipe.send_raw("this is not json").await;
    let reply = pipe.recv().await;
    assert_eq!(reply["error"]["code"], -32700);
    assert_eq!(reply["id"], Value::Null);

    pipe.send_raw(r#"{"jsonrpc":"2.0","id":5}"#).await;
    let reply = pipe.recv().await;
    assert_eq!(
        (reply["id"].clone(), reply["error"]["code"].clone()),
        (json!(5), json!(-32600))
    );

    pipe.send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    assert_eq!(pipe.recv().await["error"]["code"], -32600);

    pipe.send_raw("").await; // blank lines are ignored
    pipe.send_raw("\u{fffd}\u{0}{{").await;
    assert_eq!(pipe.recv().await["error"]["code"], -32700);

    assert_eq!(pipe.call(9, "ping", json!({})).await["result"], json!({}));
    pipe.finish().await;
}

#[tokio::test]
async fn cancelled_requests_get_no_response() {
    let mut pipe = Pipe::start();
    pipe.initialize().await;
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "wait"}}),
    )
    .await;
    pipe.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 10}}),
    )
    .await;
    // The next line is the ping's answer, not the cancelled call's.
    let reply = pipe.call(11, "ping", json!({})).await;
    assert_eq!(reply["id"], 11);
    pipe.finish().await;
}

#[tokio::test]
async fn elicitation_and_logging_over_stdio() {
    let mut pipe = Pipe::start();
    pipe.initialize().await;
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call", "params": {"name": "ask"}}),
    )
    .await;
    let request = pipe.recv().await;
    assert_eq!(request["method"], "elicitation/create");
    pipe.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"action": "accept", "content": {"name": "Ada"}}}))
        .await;
    let reply = pipe.recv().await;
    assert_eq!(
        reply["result"]["content"][0]["text"],
        r#"answer: {"action":"accept","content":{"name":"Ada"}}"#
    );

    // logging/setLevel filters: debug is dropped, warning passes.
    let set = pipe
        .call(21, "logging/setLevel", json!({"level": "info"}))
        .await;
    assert_eq!(set["result"], json!({}));
    pipe.send(
        json!({"jsonrpc": "2.0", "id": 22, "method": "tools/call", "params": {"name": "chatty"}}),
    )
    .await;
    let log = pipe.recv().await;
    assert_eq!(log["method"], "notifications/message");
    assert_eq!(
        log["params"],
        json!({"level": "warning", "data": "warning line"})
    );
    assert_eq!(pipe.recv().await["id"], 22);
    pipe.finish().await;
}

#[tokio::test]
async fn stateless_requests_need_no_initialize() {
    let mut pipe = Pipe::start();
    let meta = json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {}});
    let discover = pipe
        .call(1, "server/discover", json!({"_meta": meta}))
        .await;
    let result = &discover["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(
        result["supportedVersions"],
        json!([
            STATELESS,
            "2025-11-25",
            "2025-06-18",
            "2025-03-26",
            "2024-11-05"
        ])
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "test-server"
    );
    let echo = pipe
        .call(
            2,
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "x"}, "_meta": meta}),
        )
        .await;
    assert_eq!(echo["result"]["resultType"], "complete");
    assert_eq!(echo["result"]["content"][0]["text"], "x");
    // Removed methods and server→client requests are refused.
    assert_eq!(
        pipe.call(3, "ping", json!({"_meta": meta})).await["error"]["code"],
        -32601
    );
    let ask = pipe
        .call(4, "tools/call", json!({"name": "ask", "_meta": meta}))
        .await;
    assert_eq!(ask["result"]["isError"], true);
    let future = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}});
    let refused = pipe.call(5, "tools/list", future).await;
    assert_eq!(refused["error"]["code"], -32022);
    assert_eq!(refused["error"]["data"]["requested"], "2099-01-01");
    pipe.finish().await;
}
