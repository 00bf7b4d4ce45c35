"""SDXL's denoising UNet (the model of the SDXL fine-tuning workload): diffusers' UNet2DConditionModel, random weights.

diffusers is optional (the `sdxl` extra) and imported only when a UNet preset is built; the
runner refuses a plan that asks for one on a host without it, before anything launches.
Its configuration is in bench/models/shapes.py.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from bench.models.shapes import UNET_CONFIGS, UNET_TEXT_TOKENS, UNET_TIME_IDS


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

    return UNetLoss(UNet2DConditionModel(**UNET_CONFIGS[preset]))


def micro_batch(preset: str, size: int, device: torch.device, generator: torch.Generator) -> tuple:
    """Synthetic inputs of one micro-batch, made on the device: noised latents, a timestep,
    the text encoders' hidden states and pooled embedding, SDXL's size ids, the noise target."""
    cfg = UNET_CONFIGS[preset]
    side, channels = cfg["sample_size"], cfg["in_channels"]
    pooled = cfg["projection_class_embeddings_input_dim"] - UNET_TIME_IDS * cfg["addition_time_embed_dim"]
    randn = lambda *shape: torch.randn(*shape, device=device, generator=generator)
    resolution = float(side * 8)  # the VAE's 8x: latents 128 are a 1024-pixel image
    return (
        randn(size, channels, side, side),
        torch.randint(1000, (size,), device=device, generator=generator),
        randn(size, UNET_TEXT_TOKENS, cfg["cross_attention_dim"]),
        randn(size, pooled),
        torch.tensor([resolution, resolution, 0.0, 0.0, resolution, resolution], device=device).expand(size, UNET_TIME_IDS),
        randn(size, cfg["out_channels"], side, side),
    )
