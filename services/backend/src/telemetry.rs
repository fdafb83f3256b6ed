//! Logs and traces. Logs: `tracing-subscriber`, plain or JSON (`LUMINA_LOG_FORMAT=json`),
//! filtered by `LUMINA_LOG`. Traces: when the standard `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, spans are exported over OTLP/HTTP protobuf;
//! the other standard `OTEL_*` variables (service name, batch delays, headers) apply. The W3C
//! trace context crosses the Redis Streams RPC hop, so one client request is one trace across
//! instances.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Keeps the span exporter alive; [`Telemetry::shutdown`] flushes it.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Telemetry {
    /// Flushes pending spans (call before the process exits).
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            if let Err(err) = provider.shutdown() {
                eprintln!("lumina-backend: flushing traces failed: {err}");
            }
        }
    }
}

fn otlp_configured() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|v| std::env::var(v).is_ok_and(|s| !s.trim().is_empty()))
}

/// Installs the global subscriber. `instance` names this process in traces
/// (`service.instance.id`).
pub fn init(instance: &str) -> Telemetry {
    let filter = EnvFilter::try_from_env("LUMINA_LOG")
        .unwrap_or_else(|_| EnvFilter::new("info,tower_http=warn"));
    let json = std::env::var("LUMINA_LOG_FORMAT").is_ok_and(|v| v == "json");
    let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let fmt = if json {
        fmt.json().with_current_span(true).boxed()
    } else {
        fmt.with_ansi(false).boxed()
    };
    let provider = if otlp_configured() {
        match build_provider(instance) {
            Ok(provider) => Some(provider),
            Err(err) => {
                eprintln!("lumina-backend: OTLP trace export disabled: {err}");
                None
            }
        }
    } else {
        None
    };
    let otel = provider.as_ref().map(|p| {
        tracing_opentelemetry::layer()
            .with_tracer(p.tracer("lumina-backend"))
            .boxed()
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init();
    Telemetry { provider }
}

fn build_provider(
    instance: &str,
) -> Result<SdkTracerProvider, opentelemetry_otlp::ExporterBuildError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()?;
    let service = std::env::var("OTEL_SERVICE_NAME").unwrap_or_else(|_| "lumina-backend".into());
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name(service)
        .with_attribute(KeyValue::new("service.instance.id", instance.to_string()))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build())
}

/// The W3C `traceparent` of the current span, to carry across an RPC hop.
pub fn current_traceparent() -> Option<String> {
    let context = tracing::Span::current().context();
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// Makes `span` a child of the remote span named by `traceparent`.
pub fn set_remote_parent(span: &tracing::Span, traceparent: &str) {
    let mut carrier: HashMap<String, String> = HashMap::new();
    carrier.insert("traceparent".into(), traceparent.to_string());
    let context = TraceContextPropagator::new().extract(&carrier);
    if let Err(err) = span.set_parent(context) {
        tracing::debug!(error = %err, "remote trace parent not set");
    }
}
