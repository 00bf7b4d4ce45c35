"""The Llama presets: the published shapes' parameter counts, the FLOPs formula against torch's counter,
rotary embeddings that see only relative positions, grouped-query attention, and a tiny model that trains."""

from __future__ import annotations

import pytest
import torch

from bench.models import llama, workload
from bench.models.shapes import LLAMA_PRESETS, num_params, units

# Parameter counts of meta-llama/Llama-3.2-1B and meta-llama/Llama-3.1-8B (tied and untied embeddings).
PUBLISHED = {"llama3.2-1b": 1_235_814_400, "llama3.1-8b": 8_030_261_248}


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_published_shapes_have_the_published_parameter_counts(preset):
    cfg = LLAMA_PRESETS[preset]
    assert num_params(cfg) == sum(units(cfg)) == PUBLISHED[preset]
    with torch.device("meta"):
        module = llama.Llama(cfg)
    assert module.num_params() == PUBLISHED[preset]
    # One FSDP unit per decoder layer, the root holding what is outside them.
    assert sum(p.numel() for p in module.blocks[0].parameters()) == units(cfg)[1]
    kv_width = cfg.n_kv_heads * cfg.head_dim
    assert module.blocks[0].attn.k.weight.shape == (kv_width, cfg.dim) and kv_width * 4 == cfg.dim  # 8 of 32 heads


def test_flops_formula_matches_torch_flop_counter():
    tokens = torch.randint(100, (2, 65))
    batch = (tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
    counted = workload.count_training_flops(lambda: llama.Llama(LLAMA_PRESETS["tiny-llama"]), batch)
    with torch.device("meta"):
        formula = llama.Llama(LLAMA_PRESETS["tiny-llama"]).flops_per_token(64) * 64
    assert counted == pytest.approx(formula, rel=0.005)


def test_rotary_attention_scores_depend_on_relative_position_only():
    cos, sin = llama.rotary(32, 16, 500000.0, torch.device("cpu"))
    q, k = torch.randn(16), torch.randn(16)

    def score(i: int, j: int) -> float:
        return float(llama.rotate(q, cos[i], sin[i]) @ llama.rotate(k, cos[j], sin[j]))

    assert score(3, 1) == pytest.approx(score(20, 18), rel=1e-4)
    assert score(3, 1) != pytest.approx(score(3, 2), rel=1e-3)


def test_rms_norm_scales_to_unit_root_mean_square():
    out = llama.RMSNorm(64, 1e-5)(torch.randn(4, 64) * 7)
    assert out.detach().pow(2).mean(-1).sqrt().tolist() == pytest.approx([1.0] * 4, rel=1e-3)


def test_tiny_llama_trains():
    torch.manual_seed(0)
    module = llama.Llama(LLAMA_PRESETS["tiny-llama"])
    tokens = torch.randint(LLAMA_PRESETS["tiny-llama"].vocab_size, (2, 33))
    optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        loss = module(tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous())
        loss.backward()
        assert all(p.grad is not None for p in module.parameters())
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
