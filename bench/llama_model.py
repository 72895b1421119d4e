"""The Llama-style model the optimizer benchmarks train (transformers LlamaForCausalLM from a
config, random init, SDPA attention). Its own module so that a script training it with torch's
optimizers alone does not import luminamoon (bench/optim_llama_evidence.py starts those runs
while the package is still being built)."""
from __future__ import annotations

import torch


def llama(device, hidden, layers, heads, mlp, vocab, seq, init_seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM
    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                         num_attention_heads=heads, num_key_value_heads=heads, intermediate_size=mlp,
                         max_position_embeddings=seq, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    torch.manual_seed(init_seed)
    return LlamaForCausalLM(config).to(device)
