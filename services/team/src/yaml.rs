//! Hardened YAML for team files: serde-saphyr (pure safe Rust) with budgets sized for small
//! configuration files, so alias bombs, deep nesting and huge documents fail fast with an
//! [`IssueKind::InputLimit`] instead of using unbounded time or memory; strict booleans
//! (`yes` is a string, not `true`); duplicate keys are errors. `serde_path_to_error` tracks
//! the field being read, so every error names it (`loop.max_parallel_agents`, `agents[2]`).

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_saphyr::budget::BudgetBreach;
use serde_saphyr::{Budget, Error as YamlError, Options};

use crate::error::{Issue, IssueKind};

/// Parse budgets. The largest legitimate team file has a few hundred nodes, three levels of
/// nesting and no reason to use aliases at all.
const MAX_DEPTH: usize = 32;
const MAX_NODES: usize = 10_000;
const MAX_ALIASES: usize = 256;
const MAX_SCALAR_BYTES: usize = 4 * 1024 * 1024;
const MAX_MERGE_KEYS: usize = 64;

fn options() -> Options {
    let mut budget = Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.max_events = 2 * MAX_NODES;
    budget.max_nodes = MAX_NODES;
    budget.max_aliases = MAX_ALIASES;
    budget.max_anchors = MAX_ALIASES;
    budget.max_documents = 1;
    budget.max_total_scalar_bytes = MAX_SCALAR_BYTES;
    budget.max_merge_keys = MAX_MERGE_KEYS;
    budget.max_recorded_anchor_events = 10_000;
    budget.max_recorded_anchor_bytes = 1024 * 1024;
    let mut options = Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = 10_000;
    options.alias_limits.max_replay_stack_depth = 16;
    options.strict_booleans = true;
    options.with_snippet = false;
    options
}

/// Deserializes `text`, the content of `file` (relative to the team folder).
pub(crate) fn parse<T: DeserializeOwned>(text: &str, file: &Path) -> Result<T, Issue> {
    let mut path = None;
    let result = serde_saphyr::with_deserializer_from_str_with_options(text, options(), |de| {
        serde_path_to_error::deserialize(de).map_err(|e| {
            path = Some(e.path().to_string());
            e.into_inner()
        })
    });
    result.map_err(|e| to_issue(&e, path.as_deref(), file))
}

fn to_issue(error: &YamlError, path: Option<&str>, file: &Path) -> Issue {
    let inner = innermost(error);
    let mut kind = classify(inner);
    let position = inner
        .location()
        .or_else(|| error.location())
        .map(|l| (l.line() as usize, l.column() as usize))
        .filter(|&(line, _)| line > 0);
    let mut message = inner.to_string();
    if let Some((line, column)) = position {
        let suffix = format!(" at line {line}, column {column}");
        if let Some(stripped) = message.strip_suffix(&suffix) {
            message = stripped.to_string();
        }
    }

    match inner {
        YamlError::Eof { .. } => {
            message = "the document is empty; expected a mapping of fields".into();
        }
        YamlError::Budget { breach, .. } => {
            if matches!(breach, BudgetBreach::Documents { .. }) {
                kind = IssueKind::Syntax;
            }
            message = budget_message(breach);
        }
        _ => {}
    }
    // `serde_path_to_error` names the container for a missing field; name the field.
    let mut field = path
        .filter(|p| !p.is_empty() && *p != "." && *p != "?")
        .map(str::to_string);
    if let YamlError::SerdeMissingField { field: missing, .. } = inner {
        field = Some(match field {
            Some(parent) => format!("{parent}.{missing}"),
            None => missing.to_string(),
        });
    }
    Issue {
        file: file.to_path_buf(),
        field,
        kind,
        message,
        position,
    }
}

fn budget_message(breach: &BudgetBreach) -> String {
    match breach {
        BudgetBreach::Documents { .. } => {
            "more than one YAML document (`---`); a team file is a single document".into()
        }
        BudgetBreach::Aliases { .. } | BudgetBreach::Anchors { .. } => format!(
            "more than {MAX_ALIASES} YAML aliases or anchors; team files have no use for them"
        ),
        BudgetBreach::Depth { .. } => format!("nested deeper than {MAX_DEPTH} levels"),
        BudgetBreach::Events { .. } | BudgetBreach::Nodes { .. } => {
            format!("more than {MAX_NODES} YAML nodes, far more than any team file needs")
        }
        BudgetBreach::ScalarBytes { .. } => format!(
            "more than {} MiB of text in values (aliases counted each time they are used)",
            MAX_SCALAR_BYTES / (1024 * 1024)
        ),
        BudgetBreach::MergeKeys { .. } => format!("more than {MAX_MERGE_KEYS} merge keys (`<<`)"),
        other => format!("the YAML exceeds a parse limit ({other:?})"),
    }
}

/// The error under snippet and alias wrappers.
fn innermost(error: &YamlError) -> &YamlError {
    let mut current = error.without_snippet();
    while let YamlError::AliasError { error, .. } = current {
        current = error.without_snippet();
    }
    current
}

fn classify(error: &YamlError) -> IssueKind {
    match error {
        YamlError::SerdeUnknownField { .. } => IssueKind::UnknownField,
        YamlError::SerdeMissingField { .. } => IssueKind::MissingField,
        YamlError::DuplicateMappingKey { .. } => IssueKind::DuplicateKey,
        YamlError::Budget { .. }
        | YamlError::AliasReplayCounterOverflow { .. }
        | YamlError::AliasReplayLimitExceeded { .. }
        | YamlError::AliasExpansionLimitExceeded { .. }
        | YamlError::AliasReplayStackDepthExceeded { .. } => IssueKind::InputLimit,
        YamlError::SerdeInvalidType { .. }
        | YamlError::SerdeInvalidValue { .. }
        | YamlError::SerdeInvalidLength { .. }
        | YamlError::SerdeUnknownVariant { .. }
        | YamlError::InvalidScalar { .. }
        | YamlError::InvalidBooleanStrict { .. }
        | YamlError::NullIntoString { .. }
        | YamlError::TaggedScalarCannotDeserializeIntoString { .. }
        | YamlError::NonFiniteFloat { .. }
        | YamlError::Unexpected { .. }
        | YamlError::ExternallyTaggedEnumExpectedScalarOrMapping { .. }
        | YamlError::ExpectedStringKeyForExternallyTaggedEnum { .. }
        | YamlError::UnexpectedValueForUnitEnumVariant { .. }
        | YamlError::TaggedEnumMismatch { .. }
        | YamlError::SerdeVariantId { .. } => IssueKind::WrongType,
        _ => IssueKind::Syntax,
    }
}
