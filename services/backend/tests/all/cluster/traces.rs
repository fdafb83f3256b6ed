//! One client request that crosses instances is one trace: spans from the gateway and from
//! the owner share a trace id in the OTLP/HTTP protobuf payloads a receiver started here gets.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::routing::post;
use lumina_protocol::methods::SessionCreateParams;

use super::support::*;

/// Reads protobuf fields: (field number, wire type, payload) with varints decoded and
/// length-delimited values returned as bytes.
fn fields(mut buf: &[u8]) -> Vec<(u64, u8, Vec<u8>)> {
    fn varint(buf: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = buf.split_first()?;
            *buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    let mut out = Vec::new();
    while !buf.is_empty() {
        let Some(key) = varint(&mut buf) else { break };
        let (field, wire) = (key >> 3, (key & 7) as u8);
        match wire {
            0 => {
                varint(&mut buf);
            }
            1 => buf = &buf[8.min(buf.len())..],
            5 => buf = &buf[4.min(buf.len())..],
            2 => {
                let Some(len) = varint(&mut buf) else { break };
                let len = (len as usize).min(buf.len());
                out.push((field, wire, buf[..len].to_vec()));
                buf = &buf[len..];
            }
            _ => break,
        }
    }
    out
}

fn field(buf: &[u8], n: u64) -> Vec<Vec<u8>> {
    fields(buf)
        .into_iter()
        .filter(|(f, w, _)| *f == n && *w == 2)
        .map(|(_, _, v)| v)
        .collect()
}

/// (service.instance.id, trace id hex, span name) of every span in an export request.
fn spans(request: &[u8]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for resource_spans in field(request, 1) {
        let mut instance = String::new();
        for resource in field(&resource_spans, 1) {
            for kv in field(&resource, 1) {
                let key = field(&kv, 1)
                    .first()
                    .map(|k| String::from_utf8_lossy(k).into_owned());
                if key.as_deref() == Some("service.instance.id") {
                    if let Some(value) = field(&kv, 2)
                        .first()
                        .and_then(|any| field(any, 1).into_iter().next())
                    {
                        instance = String::from_utf8_lossy(&value).into_owned();
                    }
                }
            }
        }
        for scope_spans in field(&resource_spans, 2) {
            for span in field(&scope_spans, 2) {
                let trace = field(&span, 1).first().map(hex::encode).unwrap_or_default();
                let name = field(&span, 5)
                    .first()
                    .map(|n| String::from_utf8_lossy(n).into_owned())
                    .unwrap_or_default();
                out.push((instance.clone(), trace, name));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_request_is_one_trace_across_instances() {
    let received: Arc<Mutex<Vec<Bytes>>> = Arc::default();
    let sink = received.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        post(move |body: Bytes| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().push(body);
                ""
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let cluster = Cluster::start_with_env(
        2,
        vec![],
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint),
            ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
        ],
    )
    .await;
    let token = cluster.user_token();
    let (owner, _o) = cluster.client(1, &token).await;
    let session = owner
        .session_create(&SessionCreateParams {
            project_root: Some(cluster.project.display().to_string()),
            title: None,
        })
        .await
        .unwrap()
        .id;
    // Sent to i0, run on the owner i1 over Redis Streams RPC.
    let (gateway, _g) = cluster.client(0, &token).await;
    gateway.session_interrupt(&session, None).await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let all: Vec<(String, String, String)> = received
            .lock()
            .unwrap()
            .iter()
            .flat_map(|b| spans(b))
            .collect();
        let mut by_trace: HashMap<String, BTreeSet<String>> = HashMap::new();
        for (instance, trace, name) in &all {
            if name == "request" || name == "forwarded" {
                by_trace
                    .entry(trace.clone())
                    .or_default()
                    .insert(instance.clone());
            }
        }
        if by_trace
            .values()
            .any(|instances| instances.contains("i0") && instances.contains("i1"))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no trace spans both instances: {all:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
