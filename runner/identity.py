"""What a packet records about the machine, the runtime and the weights.

Secrets never leave the machine: values of environment variables and flags that look like
credentials are replaced by a marker (catalog.model.secrets), and machine-local paths are reduced to
names relative to the repository or a marker.
"""

from __future__ import annotations

import json
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from catalog.files import file_sha256
from catalog.model.packet import FileHash, HostIdentity, ModelConfigFacts, RuntimeIdentity, weight_file_bytes
from catalog.model.secrets import redact_argv, redact_env
from catalog.packets.canonical import sha256_hex
from runner.runtime_probe import PROBE, RuntimeFacts, parse

REPO_ROOT = Path(__file__).resolve().parents[1]


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: strip_local_paths(v) for k, v in sorted(redact_env(env).items())}


def scrub_argv(argv: Sequence[str]) -> list[str]:
    return [strip_local_paths(a) for a in redact_argv(argv)]


def strip_local_paths(text: str) -> str:
    """Replace the repository path and the home directory with markers a reader can follow."""
    home = str(Path.home())
    text = text.replace(str(REPO_ROOT), "<repo>")
    return text.replace(home, "~") if home not in ("/", "") else text


def boot_id() -> str | None:
    path = Path("/proc/sys/kernel/random/boot_id")
    return path.read_text().strip() if path.exists() else None


def cpu_name() -> str | None:
    path = Path("/proc/cpuinfo")
    if path.exists():
        for line in path.read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def repo_revision() -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def host_identity(hardware: str, card_count: int, device_name: str | None, driver: str | None) -> HostIdentity:
    return HostIdentity(
        hardware=hardware,
        card_count=card_count,
        device_name=device_name,
        driver=driver,
        boot_id=boot_id(),
        cpu=cpu_name(),
        os=f"{platform.system()} {platform.release()}",
        repo_revision=repo_revision(),
    )


def local_runtime_identity(vllm_python: Path, platform_name: str) -> tuple[RuntimeIdentity, RuntimeFacts]:
    """Versions and a hash of the installed package set, read from the vLLM environment, and what
    else the install holds (runner/runtime_probe.py: its entrypoints, the variables it knows)."""
    out = subprocess.run([str(vllm_python), "-c", PROBE], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"cannot read the vLLM environment at {vllm_python}: {out.stderr.strip()[-300:]}")
    facts = parse(out.stdout)
    package_set = "\n".join(facts.packages).encode()
    identity = RuntimeIdentity(
        platform=platform_name,
        version=facts.version,
        label=f"vLLM {platform_name.upper()} {facts.version} (local install)",
        torch_version=facts.torch_version,
        package_set_sha256=sha256_hex(package_set),
    )
    return identity, facts


def model_files(model_dir: Path) -> list[FileHash]:
    """Hashes of the weights, config and tokenizer files: what the server actually loaded."""
    files = sorted(p for p in model_dir.iterdir() if p.is_file() and not p.name.startswith("."))
    return [FileHash(name=p.name, bytes=p.stat().st_size, sha256=file_sha256(p)) for p in files]


def weight_bytes(files: list[FileHash]) -> int:
    return weight_file_bytes(files)


def config_facts(model_dir: Path) -> ModelConfigFacts | None:
    path = model_dir / "config.json"
    if not path.exists():
        return None
    config = json.loads(path.read_text())
    text = config.get("text_config", config)
    layer_types = text.get("layer_types") or []
    heads = text.get("num_attention_heads")
    return ModelConfigFacts(
        architecture=(config.get("architectures") or [None])[0],
        num_layers=text.get("num_hidden_layers"),
        hidden_size=text.get("hidden_size"),
        num_attention_heads=heads,
        num_kv_heads=text.get("num_key_value_heads"),
        head_dim=text.get("head_dim") or (text["hidden_size"] // heads if heads and text.get("hidden_size") else None),
        vocab_size=text.get("vocab_size"),
        full_attention_layers=sum(t == "full_attention" for t in layer_types) if layer_types else None,
        linear_attention_layers=sum(t == "linear_attention" for t in layer_types) if layer_types else None,
        tie_word_embeddings=config.get("tie_word_embeddings"),
        config_sha256=file_sha256(path),
    )
