"""The model presets' shapes: plain data, no torch. The cost models, the memory estimate and the plan
checks read them on the controller's side; bench/models/gpt.py, llama.py and unet.py build the modules
from them on the ranks.

Each transformer preset also says what it holds where (`units`): its blocks, and what sits outside
them (embeddings, final norm, head). The fsdp suite shards exactly so (one unit per block, then the
root), so the parameter counts here are its all-gather sizes too.

The UNet configuration is SDXL base 1.0's unet/config.json (2.57B parameters); what it does not
list is diffusers' default. Its `attention_head_dim` is, despite the name, heads per block
(64 channels each), as in the published file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int
    n_head: int
    n_embd: int
    vocab_size: int = 50304  # GPT-2's 50257 padded to a multiple of 64, as nanoGPT does, for fast matmuls
    block_size: int = 1024


    @property
    def n_layers(self) -> int:
        return self.n_layer

    @property
    def dim(self) -> int:
        return self.n_embd

    def block_params(self) -> int:
        """One block: attention (qkv, proj) and MLP (4x up, down) without biases, two LayerNorms (weight, bias)."""
        return 12 * self.n_embd ** 2 + 4 * self.n_embd

    def root_params(self) -> int:
        """Outside the blocks: token and position embeddings, the final LayerNorm (the head is the token embedding)."""
        return (self.vocab_size + self.block_size) * self.n_embd + 2 * self.n_embd

    def matmul_params(self) -> int:
        """Parameters a token's forward multiplies by: every one but the position embedding (a lookup)."""
        return self.n_layer * self.block_params() + self.root_params() - self.block_size * self.n_embd


GPT_PRESETS = {
    "tiny": GPTConfig(n_layer=2, n_head=4, n_embd=128, vocab_size=2048, block_size=256),
    "gpt2": GPTConfig(n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": GPTConfig(n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": GPTConfig(n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": GPTConfig(n_layer=48, n_head=25, n_embd=1600),
}


@dataclass(frozen=True)
class LlamaConfig:
    """A Llama 3 decoder: RMSNorm, SwiGLU, rotary embeddings, grouped-query attention, no biases."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    vocab_size: int = 128256
    tie_embeddings: bool = False
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    block_size: int = 131072  # max_position_embeddings: the longest seq_len

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads

    def block_params(self) -> int:
        """One decoder layer: q and o (dim x dim), k and v (dim x kv heads' width), gate, up and down, two RMSNorms."""
        kv_dim = self.n_kv_heads * self.head_dim
        return 2 * self.dim ** 2 + 2 * self.dim * kv_dim + 3 * self.dim * self.ffn_dim + 2 * self.dim

    def root_params(self) -> int:
        """Outside the layers: the token embedding, the final RMSNorm and, untied, the output head."""
        return self.vocab_size * self.dim * (1 if self.tie_embeddings else 2) + self.dim

    def matmul_params(self) -> int:
        """Parameters a token's forward multiplies by: all but an untied embedding (a lookup)."""
        lookup = 0 if self.tie_embeddings else self.vocab_size * self.dim
        return self.n_layers * self.block_params() + self.root_params() - lookup


# The published shapes (Hugging Face config.json of meta-llama/Llama-3.2-1B and meta-llama/Llama-3.1-8B:
# hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads, intermediate_size,
# vocab_size, tie_word_embeddings, rope_theta 500000, rms_norm_eps 1e-5, max_position_embeddings
# 131072): 1,235,814,400 and 8,030,261,248 parameters. Their rope_scaling ("llama3": longer contexts
# than 8192 tokens) changes the rotary frequencies, not the work, and is left out; the weights are random.
LLAMA_PRESETS = {
    "tiny-llama": LlamaConfig(dim=128, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=352, vocab_size=2048,
                              tie_embeddings=True, block_size=256),
    "llama3.2-1b": LlamaConfig(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192, tie_embeddings=True),
    "llama3.1-8b": LlamaConfig(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336),
}
# Every transformer preset: what the training suites' plan checks, cost models and memory estimate read.
TRANSFORMER_PRESETS = {**GPT_PRESETS, **LLAMA_PRESETS}


def num_params(cfg) -> int:
    return cfg.n_layers * cfg.block_params() + cfg.root_params()


def units(cfg) -> list[int]:
    """Parameters per FSDP unit, in the order a forward gathers them: the root first, then each block."""
    return [cfg.root_params()] + [cfg.block_params()] * cfg.n_layers


def flops_per_token(cfg, seq_len: int) -> int:
    """Training FLOPs per token, forward and backward: 6 x the parameters a token multiplies by, plus
    attention's 12 L H Q T (PaLM appendix B; grouped-query attention attends with every query head)."""
    return 6 * cfg.matmul_params() + 12 * cfg.n_layers * cfg.dim * seq_len


UNET_EXTRA = "sdxl"  # pyproject.toml's extra that installs diffusers
UNET_TEXT_TOKENS = 77  # CLIP's context: the text encoder's hidden states per prompt
UNET_TIME_IDS = 6  # original size, crop corner, target size

UNET_CONFIGS = {
    "sdxl-unet": dict(
        sample_size=128,  # latents of a 1024 x 1024 image
        in_channels=4,
        out_channels=4,
        layers_per_block=2,
        block_out_channels=(320, 640, 1280),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2, 10),
        attention_head_dim=(5, 10, 20),
        cross_attention_dim=2048,
        addition_embed_type="text_time",
        addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=2816,  # pooled text (1280) + 6 time ids x 256
        use_linear_projection=True,
    ),
    # The same code path at a size the CPU tests can afford.
    "tiny-unet": dict(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(32, 64),
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        transformer_layers_per_block=(1, 2),
        attention_head_dim=(2, 4),
        cross_attention_dim=32,
        addition_embed_type="text_time",
        addition_time_embed_dim=8,
        projection_class_embeddings_input_dim=16 + UNET_TIME_IDS * 8,
        use_linear_projection=True,
    ),
}
