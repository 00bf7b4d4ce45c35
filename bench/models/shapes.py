"""The model presets' shapes: plain data, no torch. The cost models and the plan checks read them
on the controller's side; bench/models/gpt.py and unet.py build the modules from them on the ranks.

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


GPT_PRESETS = {
    "tiny": GPTConfig(n_layer=2, n_head=4, n_embd=128, vocab_size=2048, block_size=256),
    "gpt2": GPTConfig(n_layer=12, n_head=12, n_embd=768),
    "gpt2-medium": GPTConfig(n_layer=24, n_head=16, n_embd=1024),
    "gpt2-large": GPTConfig(n_layer=36, n_head=20, n_embd=1280),
    "gpt2-xl": GPTConfig(n_layer=48, n_head=25, n_embd=1600),
}


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
