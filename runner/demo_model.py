"""Generate a tiny random-weight Qwen3 model with a locally trained BPE tokenizer.

No weights can be downloaded on these machines, so tests and demos serve this model.
Run with the vLLM venv's python (it needs torch, transformers and tokenizers):

    .venv-vllm/bin/python -m runner.demo_model --out models/demo

The output is byte-identical on every run with the same package versions, so file hashes
can be recorded in evidence packets.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

END_OF_TEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END]
TARGET_VOCAB_SIZE = 4096
SEED = 20240601
DEFAULT_DTYPE = "bfloat16"  # what the demo recipe serves; vLLM would downcast float32 anyway

CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

CORPUS_PARAGRAPHS = [
    "The incident began at 02:14 UTC when the primary database stopped accepting writes. "
    "The on-call engineer was paged, acknowledged the alert within four minutes, and "
    "started the runbook for a failed leader election.",
    "Root cause: a configuration change raised the connection pool limit beyond what the "
    "replica could sustain, so health checks timed out and the cluster fenced itself.",
    "Action items: add a canary stage for pool settings, alert on replication lag above "
    "thirty seconds, and document the manual failover procedure with screenshots.",
    "Dear customer, thank you for your patience while we investigated the billing issue. "
    "We have refunded the duplicate charge and updated your invoice for March.",
    "Decision memo: we will migrate the reporting service to the new queue because it "
    "removes a single point of failure, lowers latency, and costs less to operate.",
    "Risk register: vendor lock-in (medium likelihood, high impact), schedule slip during "
    "the holiday freeze (high likelihood, medium impact), and key person dependency.",
    "The benchmark measured throughput in tokens per second at one, two, four and eight "
    "concurrent users. Median latency rose slowly until the batch saturated the device.",
    "Architecture trade-off: a monolith is simpler to deploy and debug, while services "
    "scale independently but need tracing, contracts, and careful versioning of APIs.",
    "This guide explains how to install the tool, configure the cache directory, run the "
    "first measurement, and read the report. Each step lists the expected output.",
    "Review notes: the function mutates its argument, swallows exceptions, and returns "
    "None on failure. Prefer raising a clear error and returning a new list instead.",
    "Quarterly summary: revenue grew eleven percent, support tickets fell by a fifth, "
    "and the team shipped the export feature that customers requested most often.",
    "Memory bandwidth limits single stream decoding: every generated token reads all "
    "weights once, so the ceiling is bandwidth divided by the bytes read per step.",
]

CORPUS_CODE = [
    "def parse_config(path: str) -> dict[str, int]:\n"
    "    with open(path, encoding='utf-8') as handle:\n"
    "        return {key: int(value) for key, value in json.load(handle).items()}\n",
    "SELECT customer_id, SUM(amount) AS total\nFROM payments\n"
    "WHERE created_at >= '2024-01-01'\nGROUP BY customer_id\nHAVING SUM(amount) > 100;\n",
    "for (let index = 0; index < items.length; index += 1) {\n"
    "  if (items[index].status === 'error') {\n    console.error(items[index]);\n  }\n}\n",
    "class RetryPolicy:\n    def __init__(self, attempts: int = 3, delay: float = 0.5):\n"
    "        self.attempts = attempts\n        self.delay = delay\n",
    '{"name": "demo", "version": "1.0.0", "scripts": {"test": "pytest -q"}}\n',
    '#!/usr/bin/env bash\nset -euo pipefail\nfor file in *.log; do\n  grep -c "ERROR" "$file" || true\ndone\n',
]

SYNTHETIC_WORDS = (  # noqa: SIM905 - a word list reads better as prose
    "system server client request response latency throughput token model memory cache device "
    "queue worker thread process config deploy release version update error retry timeout "
    "metric report value result table index query schema record field column user team owner "
    "review change test check build package module function method class input output stream "
    "batch window context prompt decode encode parse format number"
).split()


def build_corpus() -> list[str]:
    """Fixed text plus seeded synthetic sentences, so BPE sees enough distinct pairs."""
    rng = random.Random(SEED)  # noqa: S311 - seeded on purpose: the corpus must be reproducible
    synthetic = []
    for _ in range(600):
        words = [rng.choice(SYNTHETIC_WORDS) for _ in range(rng.randint(6, 14))]
        snake = "_".join(rng.sample(SYNTHETIC_WORDS, 2))
        camel = "".join(word.capitalize() for word in rng.sample(SYNTHETIC_WORDS, 2))
        number = rng.randint(0, 99999)
        synthetic.append(" ".join(words).capitalize() + f" {snake}({camel}, {number}).")
    return CORPUS_PARAGRAPHS + CORPUS_CODE + synthetic


def train_tokenizer(out_dir: Path) -> int:
    """Train a byte-level BPE tokenizer, save it as a HF fast tokenizer, return its size."""
    # Only the vLLM venv has these; the main venv type-checks this file without them.
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # type: ignore[import-not-found,unused-ignore]
    from transformers import PreTrainedTokenizerFast  # type: ignore[import-not-found,unused-ignore]

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=TARGET_VOCAB_SIZE,
        min_frequency=1,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(build_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        chat_template=CHAT_TEMPLATE,
        model_max_length=32768,
    )
    fast.save_pretrained(str(out_dir))
    vocab_size: int = tokenizer.get_vocab_size()
    return vocab_size


def build_model(out_dir: Path, vocab_size: int, token_ids: dict[str, int], dtype: str) -> int:
    """Create the random-weight model with a fixed seed and save it; return parameter count.

    Untied embeddings keep greedy output varied (with tied ones the residual stream dominates
    and the model repeats one token forever) yet repetitive enough, like real text, for n-gram
    speculation to find drafts: about 60 distinct tokens in the first 100.
    The special tokens' output rows are zeroed so they are never the argmax: completions run
    to max_tokens instead of stopping at a random EOS.
    """
    import torch  # type: ignore[import-not-found,unused-ignore]
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM  # type: ignore[import-not-found,unused-ignore]

    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,  # vLLM's CPU attention backend needs head_dim >= 64
        max_position_embeddings=40960,
        tie_word_embeddings=False,
        initializer_range=0.02,
        bos_token_id=token_ids[END_OF_TEXT],
        eos_token_id=token_ids[IM_END],
        pad_token_id=token_ids[END_OF_TEXT],
        dtype=dtype,
    )
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight[sorted(token_ids.values())] = 0.0
    model = model.to(getattr(torch, dtype))
    model.generation_config = GenerationConfig(
        bos_token_id=token_ids[END_OF_TEXT],
        eos_token_id=[token_ids[IM_END], token_ids[END_OF_TEXT]],
        pad_token_id=token_ids[END_OF_TEXT],
    )
    model.save_pretrained(str(out_dir), safe_serialization=True)
    return sum(parameter.numel() for parameter in model.parameters())


def _normalise_json(path: Path) -> None:
    """Rewrite a JSON file with sorted keys so field order never depends on dict history."""
    data: Any = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def generate(out_dir: Path, dtype: str) -> None:
    started = time.perf_counter()
    if out_dir.exists():
        shutil.rmtree(out_dir)
    out_dir.mkdir(parents=True)
    print(f"[demo_model] training BPE tokenizer (target vocab {TARGET_VOCAB_SIZE})", flush=True)
    trained_size = train_tokenizer(out_dir)
    tokenizer_json = json.loads((out_dir / "tokenizer.json").read_text(encoding="utf-8"))
    token_ids = {item["content"]: item["id"] for item in tokenizer_json["added_tokens"]}
    # The model vocab equals the tokenizer's exactly: a padded id could be sampled and then
    # fail to detokenize.
    vocab_size = trained_size
    print(f"[demo_model] tokenizer trained: {vocab_size} tokens", flush=True)
    print(f"[demo_model] building Qwen3 model: 2 layers, hidden 128, head_dim 64, {dtype}", flush=True)
    parameters = build_model(out_dir, vocab_size, token_ids, dtype)
    for json_file in sorted(out_dir.glob("*.json")):
        _normalise_json(json_file)
    elapsed = time.perf_counter() - started
    print(f"[demo_model] {parameters:,} parameters saved to {out_dir} in {elapsed:.1f} s")
    for path in sorted(out_dir.iterdir()):
        print(f"[demo_model]   {path.name} ({path.stat().st_size:,} bytes)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="output directory (replaced)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default=DEFAULT_DTYPE, help="stored weight dtype")
    args = parser.parse_args(argv)
    generate(args.out, args.dtype)
    return 0


if __name__ == "__main__":
    sys.exit(main())
