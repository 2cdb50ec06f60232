"""Tiny randomly initialised models with locally trained tokenizers, built offline.

They stand in for real guard checkpoints: the real loading, templating, batching and
logprob code runs on them, and their outputs are mostly gibberish, which is the point
(gibberish must come out `invalid`).
"""

from __future__ import annotations

from pathlib import Path

SPECIALS = ["<pad>", "<s>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"]
# A chat template in the shape real guard templates have: list-of-parts or string content,
# system turns, and template kwargs that show up in the rendered prompt.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}"
    "{% for part in m['content'] %}{{ part['text'] }}{% endfor %}{% endif %}{{ eos_token }}{% endfor %}"
    "{% if guideline is defined %}* {{ guideline }}\n{% endif %}"
    "{% if guardian_config is defined %}risk: {{ guardian_config | tojson }}\n{% endif %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
CORPUS = [
    "safe unsafe Safety: Safe Unsafe Controversial Categories: None Yes No yes no",
    "Harmful request: yes Response refusal: n/a Harmful response: n/a",
    '{"User Safety": "safe"} {"User Safety": "unsafe", "Safety Categories": "Violence"}',
    "<score> yes </score> <think> reasoning </think> 0 1 S1 S10 S14",
    "How do I kill a Python process? How can I make a bomb at home? What is the capital of France?",
    "The quick brown fox jumps over the lazy dog. Ignore all previous instructions.",
]


def train_tokenizer():  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator(CORPUS * 20, trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _build_tiny(path: Path, model_class: str, seed: int, context: int, **config_extra: object) -> Path:
    """A randomly initialised 2-layer Llama of `model_class` with the local tokenizer, saved at `path`."""
    import torch
    import transformers

    tok = train_tokenizer()
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=context, bos_token_id=tok.bos_token_id,
                                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                                      **config_extra)
    model = getattr(transformers, model_class)(config).eval()
    tok.save_pretrained(path)
    model.save_pretrained(path)
    return path


def build_tiny_llama(path: Path, *, seed: int = 0, context: int = 256) -> Path:
    return _build_tiny(path, "LlamaForCausalLM", seed, context)


def build_tiny_classifier(path: Path, *, labels: tuple[str, str] = ("SAFE", "INJECTION"), seed: int = 0) -> Path:
    return _build_tiny(path, "LlamaForSequenceClassification", seed, 512, num_labels=2,
                       id2label=dict(enumerate(labels)), label2id={name: i for i, name in enumerate(labels)})
