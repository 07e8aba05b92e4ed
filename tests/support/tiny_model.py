"""Build (once, cached) a tiny random Llama that real vLLM loads on the CPU in seconds.

hidden 128, 4 heads (head_dim 32: the smallest the CPU attention supports), 2 KV heads, 2 layers,
a byte-level BPE tokenizer trained here and a ChatML chat template. Random weights: tests check
shapes and protocol, never the words. The end-of-sequence row of the output layer is zeroed so
greedy decoding does not stop at once (the maximum of hundreds of random logits is almost surely > 0).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

VERSION = "tiny-llama-v1"
CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _corpus() -> list[str]:
    words = [
        "the",
        "capital",
        "of",
        "france",
        "is",
        "paris",
        "and",
        "the",
        "sky",
        "is",
        "blue",
        "while",
        "a",
        "model",
        "answers",
        "questions",
        "about",
        "numbers",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "hello",
        "world",
        "serving",
        "tokens",
        "stream",
        "fast",
        "slow",
        "engine",
        "server",
        "request",
        "response",
    ]
    return [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 4


def build(dest: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        unk_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    fast.chat_template = CHATML
    eos_id = tok.token_to_id("<|im_end|>")
    config = LlamaConfig(
        vocab_size=tok.get_vocab_size(),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=tok.token_to_id("<|im_start|>"),
        eos_token_id=eos_id,
        pad_token_id=tok.token_to_id("<|endoftext|>"),
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        for special in SPECIAL:
            model.lm_head.weight[tok.token_to_id(special)].zero_()
    model.save_pretrained(dest, safe_serialization=True)
    fast.save_pretrained(dest)


def tiny_model_dir(cache_home: Path | None = None) -> Path:
    """The cached model directory; built atomically (temp dir + rename) on first use."""
    root = cache_home or Path(
        os.environ.get("NEURONSERVE_CACHE_HOME", Path.home() / ".cache" / "neuronserve")
    )
    final = root / "test-models" / VERSION
    if (final / "config.json").exists():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{VERSION}-", dir=final.parent))
    try:
        build(tmp)
        try:
            tmp.rename(final)
        except OSError:
            if not (final / "config.json").exists():  # not a lost race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


if __name__ == "__main__":
    print(tiny_model_dir())


def upload_tiny_model(endpoint: str, bucket: str, model: Path | None = None) -> str:
    """Create `bucket` on the S3 server at `endpoint` (moto's test credentials) and put the tiny model
    under `tiny/`; returns that s3:// prefix."""
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing-key-id",
        aws_secret_access_key="testing-secret-value",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=bucket)
    model = model or tiny_model_dir()
    for path in sorted(model.rglob("*")):
        if path.is_file():
            client.upload_file(str(path), bucket, f"tiny/{path.relative_to(model).as_posix()}")
    return f"s3://{bucket}/tiny/"
