//! Reading a model folder's files: which of the accepted names is present, safetensors or
//! torch (`pytorch_model.bin`, `*.pt`) weights, Linear heads, and Hugging Face tokenizers.
//! Every failure is an [`Error::Embedding`] naming the file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::{linear, Linear, VarBuilder};
use tokenizers::Tokenizer;

use lumina_memory::{Error, Result};

/// An [`Error::Embedding`] naming `path`.
pub(super) fn file_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Embedding(format!("{}: {e}", path.display()))
}

/// The first of `names` present in `dir`.
pub(super) fn find(dir: &Path, names: &[&str]) -> Result<PathBuf> {
    names
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            Error::Embedding(format!(
                "{} missing in {}",
                names.join(" or "),
                dir.display()
            ))
        })
}

/// Every tensor of a safetensors file, or of a torch file (`pytorch_model.bin`, `*.pt`).
pub(super) fn read_tensors(path: &Path, device: &Device) -> Result<HashMap<String, Tensor>> {
    let tensors = if path.extension().is_some_and(|e| e == "safetensors") {
        candle_core::safetensors::load(path, device)
    } else {
        candle_core::pickle::read_all(path).map(|all| all.into_iter().collect())
    };
    tensors.map_err(|e| file_error(path, e))
}

/// A head (`torch.save(linear.state_dict())`: `weight` and `bias`).
pub(super) fn head(dir: &Path, names: &[&str], in_dim: usize, out_dim: usize) -> Result<Linear> {
    let path = find(dir, names)?;
    let device = Device::Cpu;
    let tensors = read_tensors(&path, &device)?;
    let vb = VarBuilder::from_tensors(tensors, DType::F32, &device);
    linear(in_dim, out_dim, vb).map_err(|e| file_error(&path, e))
}

/// A `tokenizer.json`, without the padding and truncation it may configure.
pub(super) fn load_tokenizer(path: &Path) -> Result<Tokenizer> {
    let mut tokenizer = Tokenizer::from_file(path).map_err(|e| file_error(path, e))?;
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(None)
        .map_err(|e| file_error(path, e))?;
    Ok(tokenizer)
}
