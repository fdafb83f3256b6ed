//! Project guidance the runtime compiles into the model context: instruction files
//! (`LUMINA.md`, `AGENTS.md`) and skills (folders with a `SKILL.md`), with their
//! discovery order, conflict reporting, `/name args` invocation and the text each
//! contributes to a model request. Pure file reading: no runtime, no model, no I/O
//! besides the local file system.

pub mod front_matter;
mod instructions;
mod invocation;
mod skills;

pub use instructions::{
    load_instructions, InstructionFile, InstructionSource, INSTRUCTION_FILE_NAMES,
    MAX_INSTRUCTION_BYTES,
};
pub use invocation::parse_invocation;
pub use skills::{
    normalize_name, Skill, SkillCatalog, SkillConflict, SkillLocation, MAX_SKILL_FILE_BYTES,
    MAX_SKILL_NAME_LEN,
};
