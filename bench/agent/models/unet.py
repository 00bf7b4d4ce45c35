"""SDXL's denoising UNet (seed 000's model): diffusers' UNet2DConditionModel, random weights.

diffusers is optional (the `sdxl` extra) and imported only when a UNet preset is built; the
runner refuses a plan that asks for one on a host without it, before anything launches.
The configuration is SDXL base 1.0's unet/config.json (2.57B parameters); what it does not
list is diffusers' default. Its `attention_head_dim` is, despite the name, heads per block
(64 channels each), as in the published file.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

EXTRA = "sdxl"  # pyproject.toml's extra that installs diffusers
TEXT_TOKENS = 77  # CLIP's context: the text encoder's hidden states per prompt
TIME_IDS = 6  # original size, crop corner, target size

CONFIGS = {
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
        projection_class_embeddings_input_dim=16 + TIME_IDS * 8,
        use_linear_projection=True,
    ),
}


class UNetLoss(nn.Module):
    """One denoising training step's loss: predict the noise, MSE against it."""

    def __init__(self, unet: nn.Module):
        super().__init__()
        self.unet = unet

    def forward(self, latents, timesteps, text, text_embeds, time_ids, noise) -> torch.Tensor:
        predicted = self.unet(
            latents, timesteps, encoder_hidden_states=text,
            added_cond_kwargs={"text_embeds": text_embeds, "time_ids": time_ids},
        ).sample
        return F.mse_loss(predicted.float(), noise.float())


def build_module(preset: str) -> UNetLoss:
    from diffusers import UNet2DConditionModel

    return UNetLoss(UNet2DConditionModel(**CONFIGS[preset]))


def micro_batch(preset: str, size: int, device: torch.device, generator: torch.Generator) -> tuple:
    """Synthetic inputs of one micro-batch, made on the device: noised latents, a timestep,
    the text encoders' hidden states and pooled embedding, SDXL's size ids, the noise target."""
    cfg = CONFIGS[preset]
    side, channels = cfg["sample_size"], cfg["in_channels"]
    pooled = cfg["projection_class_embeddings_input_dim"] - TIME_IDS * cfg["addition_time_embed_dim"]
    randn = lambda *shape: torch.randn(*shape, device=device, generator=generator)
    resolution = float(side * 8)  # the VAE's 8x: latents 128 are a 1024-pixel image
    return (
        randn(size, channels, side, side),
        torch.randint(1000, (size,), device=device, generator=generator),
        randn(size, TEXT_TOKENS, cfg["cross_attention_dim"]),
        randn(size, pooled),
        torch.tensor([resolution, resolution, 0.0, 0.0, resolution, resolution], device=device).expand(size, TIME_IDS),
        randn(size, cfg["out_channels"], side, side),
    )
