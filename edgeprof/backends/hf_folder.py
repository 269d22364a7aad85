"""A random-weight Hugging Face model folder from an :class:`~edgeprof.core.llm.LLMSpec`.

The generative backends that build from Hugging Face checkpoints (ONNX Runtime GenAI's model
builder, OpenVINO GenAI's export, transformers itself) all start from the same folder:

- ``config.json``: the spec in Hugging Face's names (:func:`hf_config`: the zoo's
  ``edgeprof.zoo.llm.hf_config``), normalised by transformers' own config class;
- ``model.safetensors``: random weights, made by ``AutoModelForCausalLM.from_config`` with a
  fixed seed (latency and memory do not depend on the values; the text means nothing);
- a synthetic tokenizer (``tokenizer.json`` + ``tokenizer_config.json``): a word-level vocab
  of exactly ``vocab_size`` tokens (``<unk>`` 0, ``<s>`` 1, ``</s>`` 2, then ``w3`` ...), which the
  builders need to copy or convert; the benchmarks feed token ids and never tokenize text;
- ``generation_config.json`` (bos/eos ids).

The folder is written in a staging sibling and renamed into place, so a crash leaves nothing
half-written. :func:`hf_source` caches it (content key: the config, dtype, seed and versions)
and writes it in a child process.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgeprof.core.errors import UnsupportedError, UserError
from edgeprof.core.llm import LLMModel, LLMSpec
from edgeprof.zoo.llm import HF_ARCHITECTURES

#: token ids of the synthetic vocab
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
#: Hugging Face architecture class per family (``model_type``): the zoo's table
ARCHITECTURES = HF_ARCHITECTURES
#: torch dtype names the folder may be written in
DTYPES = ("float32", "float16", "bfloat16")
#: version of this writer's output; bump when the folder's content changes
WRITER_VERSION = 1


def guard_torchvision() -> str | None:
    """Make a broken torchvision look absent, so transformers can import its models.

    transformers imports torchvision whenever it is installed (image utilities reached from
    every model's config); a torchvision built for another torch (a CUDA wheel beside the CPU
    torch) then fails with "operator torchvision::nms does not exist" and no model loads.
    When importing it fails, ``sys.modules["torchvision"] = None`` makes ``find_spec`` say it
    is not there. Returns the reason (None when torchvision imports or is absent)."""
    if "torchvision" in sys.modules:
        return None
    try:
        import torchvision  # noqa: F401
        return None
    except ImportError:
        return None
    except (RuntimeError, OSError) as e:
        reason = f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"
    for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
        del sys.modules[name]
    sys.modules["torchvision"] = None  # type: ignore[assignment]
    utils = sys.modules.get("transformers.utils.import_utils")
    for fn in ("is_torchvision_available", "is_torchvision_v2_available"):
        cached = getattr(utils, fn, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()  # transformers was imported first and asked already
    return reason


def first_error_line(text: str) -> str:
    """A child process's most telling output line: the last one naming an error or an
    exception, else its last line (300 characters at most)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if "Error" in ln or "error" in ln or "Exception" in ln:
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def run_child(cmd: list[str], done: Path, what: str, *, backend: str, precision: str,
              timeout: int, cwd: Path | None = None) -> None:
    """Run a build's child process quietly (no Python warnings, no progress bars); raise
    UnsupportedError when it runs past ``timeout`` seconds, or fails or leaves no ``done``
    file (with :func:`first_error_line` of its output). ``what`` names it in the message."""
    import subprocess

    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TQDM_DISABLE": "1"}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=cwd)
    except subprocess.TimeoutExpired:
        raise UnsupportedError(f"{what} ran past {timeout} s", backend=backend) from None
    if proc.returncode != 0 or not done.is_file():
        raise UnsupportedError(f"{what} failed: {first_error_line(proc.stderr + proc.stdout)}",
                               backend=backend, precision=precision)


#: run a module as ``__main__`` with the torchvision guard (for the builders' CLIs)
GUARDED_MAIN = ("import runpy, sys; from edgeprof.backends.hf_folder import guard_torchvision; "
                "guard_torchvision(); mod = sys.argv.pop(1); "
                "runpy.run_module(mod, run_name='__main__', alter_sys=True)")


def hf_config(spec: LLMSpec) -> dict[str, Any]:
    """``config.json`` fields for ``spec`` (the zoo's mapping, ``edgeprof.zoo.llm.hf_config``).

    Phi-3 without ``rope_scaling``: ``original_max_position_embeddings`` is set to the
    maximum, i.e. plain RoPE (the long-context scaling factors are not in the spec and do not
    change the cost; ONNX Runtime GenAI's builder needs them for its LongRoPE variant)."""
    if spec.family not in ARCHITECTURES:
        raise UnsupportedError(f"model '{spec.name}': family '{spec.family}' has no Hugging Face "
                               f"architecture here; known: {', '.join(ARCHITECTURES)}")
    from edgeprof.zoo.llm import hf_config as zoo_hf_config

    cfg = dict(zoo_hf_config(spec))
    cfg.setdefault("bos_token_id", BOS_ID)
    cfg.setdefault("eos_token_id", EOS_ID)
    if spec.family == "phi3" and not cfg.get("rope_scaling"):
        cfg["original_max_position_embeddings"] = spec.max_position_embeddings
    return cfg


def folder_max_context(folder: str | os.PathLike) -> int | None:
    """The model's maximum context as its folder's ``config.json`` gives it (None if not)."""
    cfg = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    return int(cfg.get("max_position_embeddings") or 0) or None


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise UserError(f"HF folder dtype must be one of {', '.join(DTYPES)}, got '{dtype}'")


def write_tokenizer(folder: str | os.PathLike, vocab_size: int) -> None:
    """A word-level tokenizer of exactly ``vocab_size`` tokens (``tokenizer.json``,
    ``tokenizer_config.json``, ``special_tokens_map.json``) written into ``folder``."""
    guard_torchvision()
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 3:
        raise UserError(f"a vocab of {vocab_size} tokens cannot hold <unk>, <s> and </s>")
    vocab = {"<unk>": UNK_ID, "<s>": BOS_ID, "</s>": EOS_ID}
    vocab.update({f"w{i}": i for i in range(3, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>", pad_token="</s>",
                                   model_max_length=1 << 30)
    fast.save_pretrained(str(folder))


def write_random_hf_folder(spec: LLMSpec, folder: str | os.PathLike, dtype: str = "float32",
                           seed: int = 0) -> Path:
    """Write a Hugging Face model folder with random weights for ``spec`` at ``folder``
    (which must not exist): config, safetensors, tokenizer, generation config. Atomic: the
    files are staged in a sibling folder that is renamed into place."""
    import torch
    guard_torchvision()
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig

    _check_dtype(dtype)
    folder = Path(folder)
    if folder.exists():
        raise UserError(f"cannot write a model folder at '{folder}': it exists")
    folder.parent.mkdir(parents=True, exist_ok=True)
    cfg = hf_config(spec)
    kwargs = {k: v for k, v in cfg.items() if k != "model_type"}
    try:
        config = AutoConfig.for_model(cfg["model_type"], **kwargs)
    except (KeyError, ValueError) as e:
        raise UnsupportedError(f"model '{spec.name}': transformers cannot make a "
                               f"'{cfg['model_type']}' config: {str(e).splitlines()[0][:200]}"
                               ) from None
    stage = folder.parent / f".{folder.name}.stage-{uuid.uuid4().hex[:8]}"
    os.mkdir(stage)
    try:
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            with torch.device("cpu"):
                model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
        finally:
            torch.random.set_rng_state(generator_state)
        model.eval()
        model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id,
                                                   eos_token_id=config.eos_token_id)
        model.save_pretrained(str(stage), safe_serialization=True)
        del model
        write_tokenizer(stage, spec.vocab_size)
        # safetensors writes through a 0600 temporary file: give every file the umask's
        # permissions (those json files were written with)
        mode = (stage / "config.json").stat().st_mode & 0o777
        for f in stage.iterdir():
            os.chmod(f, mode)
        os.rename(stage, folder)
    finally:
        if stage.exists():
            shutil.rmtree(stage, ignore_errors=True)
    return folder


def bias_to_token(folder: str | os.PathLike, token_id: int = EOS_ID, scale: float = 10.0) -> None:
    """Rewrite a llama/qwen2 folder's weights (in place) so that ``token_id`` is the greedy
    argmax after every prompt: a constant residual channel 0 (embedding column 0 =
    ``scale``; no layer writes to it), a final norm that keeps only channel 0, and an LM
    head whose ``token_id`` row reads it 10x more than any other row. Used by the tests of
    forced generation lengths (EOS as the argmax must not stop a run)."""
    from safetensors.torch import load_file, save_file

    folder = Path(folder)
    path = folder / "model.safetensors"
    w = load_file(str(path))
    emb = w["model.embed_tokens.weight"]
    if "lm_head.weight" not in w:
        raise UserError(f"'{folder}': bias_to_token needs an untied LM head")
    emb[:, 0] = scale
    for k in list(w):
        if k.endswith(("self_attn.o_proj.weight", "mlp.down_proj.weight")):
            w[k][0, :] = 0.0
    norm = w["model.norm.weight"]
    norm.zero_()
    norm[0] = 1.0
    head = w["lm_head.weight"]
    head[:, 0] = 0.1
    head[token_id, 0] = 1.0
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    save_file({k: v.contiguous() for k, v in w.items()}, str(tmp), metadata={"format": "pt"})
    os.replace(tmp, path)


def write_in_child(spec: LLMSpec, folder: Path, dtype: str = "float32", seed: int = 0) -> None:
    """:func:`write_random_hf_folder` in a child process, so torch and transformers stay out
    of the process whose memory a generative backend's harness measures."""
    import subprocess

    code = ("import sys, json; from edgeprof.backends.hf_folder import _write_main; "
            "_write_main(sys.argv[1:])")
    env = {**os.environ, "PYTHONWARNINGS": "ignore", "TQDM_DISABLE": "1"}
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(spec.to_dict()), str(folder),
                           dtype, str(seed)], capture_output=True, text=True, env=env)
    if proc.returncode != 0 or not (folder / "config.json").is_file():
        lines = [ln for ln in (proc.stderr + proc.stdout).strip().splitlines() if ln.strip()]
        raise UnsupportedError(f"model '{spec.name}': writing its Hugging Face folder failed: "
                               f"{(lines[-1] if lines else 'no output')[:300]}")


def _write_main(argv: list[str]) -> None:
    spec_json, folder, dtype, seed = argv
    try:
        write_random_hf_folder(LLMSpec.from_dict(json.loads(spec_json)), folder, dtype=dtype,
                               seed=int(seed))
    except (UserError, UnsupportedError) as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        raise SystemExit(2) from None


@dataclass(frozen=True)
class HFSource:
    """Where a generative backend's build starts: a Hugging Face folder, how it was made
    (route steps) and a digest of its content (for cache keys)."""

    path: Path
    route: tuple[dict[str, Any], ...]
    digest: str
    random_weights: bool
    #: the folder as an artifact (``format="hf"``): the cache entry of a preset's folder,
    #: or the user's folder with its files listed (only when asked for: hashing is slow)
    artifact: Any = None


def hf_source(model: LLMModel, dtype: str = "float32", seed: int = 0, *,
              as_artifact: bool = False) -> HFSource:
    """The model's Hugging Face folder: the user's folder as given (``source_kind ==
    "hf_folder"``; digest of its config and file sizes) or a cached random-weight folder for
    a preset. A GGUF has no Hugging Face folder (UnsupportedError)."""
    from edgeprof.core.cache import key_digest

    _check_dtype(dtype)
    if model.source_kind == "hf_folder":
        folder = Path(model.path) if model.path else None
        if folder is None or not (folder / "config.json").is_file():
            raise UserError(f"'{model.given}' is not a Hugging Face model folder (no "
                            "config.json)")
        listing = {p.relative_to(folder).as_posix(): p.stat().st_size
                   for p in sorted(folder.rglob("*")) if p.is_file()}
        digest = key_digest({"config": (folder / "config.json").read_text(encoding="utf-8"),
                             "files": listing})
        art = None
        if as_artifact:
            from edgeprof.core.artifact import Artifact, Manifest, file_records

            art = Artifact(folder, Manifest(
                format="hf", backend="", requested_precision=dtype, entry="config.json",
                source_digest=digest, files=file_records(folder),
                notes=["random weights"] if model.random_weights else []))
        return HFSource(folder, (), digest, model.random_weights, art)
    if model.source_kind != "preset":
        raise UnsupportedError(f"'{model.given}' is a {model.source_kind}; this backend builds "
                               "from a Hugging Face folder or an llm: preset")
    from importlib.metadata import version

    from edgeprof.core.cache import cached_entry

    key = {"spec": model.spec.to_dict(), "config": hf_config(model.spec), "dtype": dtype,
           "seed": seed,
           "transformers": version("transformers"), "tokenizers": version("tokenizers"),
           "writer": WRITER_VERSION, "precision": dtype}

    def build(tmp: Path) -> dict[str, Any]:
        tmp.rmdir()  # write_random_hf_folder stages and renames into this path itself
        write_in_child(model.spec, tmp, dtype=dtype, seed=seed)
        return {}

    step = {"src": "llm-spec", "dst": "hf-folder", "converter": "transformers.from_config",
            "package": "transformers", "version": version("transformers"),
            "dtype": dtype, "seed": seed}
    art = cached_entry("hf", key, build, entry="config.json", manifest={
        "format": "hf", "backend": "", "requested_precision": dtype, "route": [step],
        "stored_precision": dtype, "source_digest": key_digest(key),
        "notes": ["random weights"]})
    return HFSource(art.path, (step,), key_digest(key), True, art)


__all__ = ["ARCHITECTURES", "BOS_ID", "DTYPES", "EOS_ID", "GUARDED_MAIN", "UNK_ID", "HFSource",
           "bias_to_token", "first_error_line", "folder_max_context", "guard_torchvision",
           "hf_config", "hf_source", "run_child", "write_in_child", "write_random_hf_folder",
           "write_tokenizer"]
