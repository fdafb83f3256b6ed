//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document of the Conversation API, generated
//! from the handlers' `#[utoipa::path]` annotations and the body types. Public, like a
//! schema should be: it names no conversation and no tenant.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::error::{ErrorBody, ErrorDetail};
use super::types::{
    Conversation, ConversationMessage, ConversationPage, CreateConversation, ExecuteAccepted,
    ExecuteResult, MessagePage, MessageRole, StreamEventData,
};
use super::{conversations, execute};

#[derive(OpenApi)]
#[openapi(
    info(title = "Lumina Conversation API", description = "REST + SSE over Lumina sessions (docs/conversation-api.md)"),
    paths(
        conversations::create,
        conversations::list,
        conversations::messages,
        conversations::archive,
        execute::execute,
        execute::sync,
        execute::stream,
        execute::resume,
    ),
    components(schemas(
        Conversation, ConversationMessage, ConversationPage, CreateConversation, ExecuteAccepted,
        ExecuteResult, MessagePage, MessageRole, StreamEventData, ErrorBody, ErrorDetail,
    )),
    modifiers(&Bearer),
)]
pub struct ApiDoc;

struct Bearer;

impl Modify for Bearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
