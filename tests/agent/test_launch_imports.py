"""A launch imports only what it uses: a rank of a plain GPT entry, set up and trained, never loads
torch's compiler stack, diffusers or the controller's libraries; an entry with `compile: true` loads
the compiler with the ranks' imports."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.controller.plans import with_defaults
from tests.conftest import REPO

GPT = {"model": "tiny", "micro_batch": 2, "seq_len": 32, "global_batches": [2], "steps": 2, "warmup_steps": 1,
       "precision": "fp32"}
COMPILER = ("torch._dynamo", "torch._inductor", "sympy")
NEVER_ON_A_RANK = ("diffusers", "matplotlib", "jsonschema", "yaml")


def loaded_by(mode: str, params: dict, tmp_path) -> set[str]:
    entry = with_defaults({"suites": [{"suite": "ddp", "params": params}]})["suites"][0]["params"]
    done = subprocess.run([sys.executable, str(REPO / "tests" / "helpers" / "launch_modules.py"), mode, "ddp",
                           json.dumps(entry), str(tmp_path)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_a_plain_gpt_launch_loads_no_compiler_and_no_diffusers(tmp_path):
    loaded = loaded_by("launch", {**GPT, "compile": False}, tmp_path)
    assert (tmp_path / "results.jsonl").read_text().count('"status": "ok"') == 1  # it trained
    assert not loaded & {*COMPILER, *NEVER_ON_A_RANK}, sorted(loaded & {*COMPILER, *NEVER_ON_A_RANK})


def test_a_compiled_entry_loads_the_compiler_with_the_ranks_imports(tmp_path):
    loaded = loaded_by("imports", {**GPT, "compile": True}, tmp_path)
    assert set(COMPILER) <= loaded, sorted(set(COMPILER) - loaded)
    assert not loaded & set(NEVER_ON_A_RANK), sorted(loaded & set(NEVER_ON_A_RANK))


def test_the_eager_optimizers_step_as_torchs_own():
    """The optimizer a launch without compile makes is torch's, step for step, to the bit."""
    import torch

    from bench.agent.training import eager

    def trained(kind, **options) -> list:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        optimizer = kind(model.parameters(), **options)
        for step in range(4):
            model(torch.randn(5, 8, generator=torch.Generator().manual_seed(step))).square().sum().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=step % 2 == 0)
        return [p.detach().clone() for p in model.parameters()]

    for kind, options in ((torch.optim.AdamW, {"lr": 1e-2, "fused": False}), (torch.optim.AdamW, {"lr": 1e-2, "fused": True}),
                          (torch.optim.Adafactor, {"lr": 1e-2, "foreach": True})):
        assert all(torch.equal(a, b) for a, b in zip(trained(eager(kind), **options), trained(kind, **options))), kind
    assert eager(torch.optim.AdamW).__name__ == "AdamW"


def test_profiling_steps_loads_no_compiler():
    """torch.profiler.profile imports torch._inductor as it starts (3-6 s a process); the agent's profiling does not."""
    code = ("import json, sys, torch\nfrom bench.agent import kernel_time\n"
            "marked = kernel_time.profile_steps(lambda: torch.ones(8).sum(), 2, torch.device('cpu'))\n"
            "print(json.dumps([len(marked), sorted(sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={"PYTHONPATH": str(REPO), "PATH": ""})
    assert done.returncode == 0, done.stderr
    steps, loaded = json.loads(done.stdout.splitlines()[-1])
    assert steps == 2  # both steps found in the trace
    assert not set(loaded) & set(COMPILER), sorted(set(loaded) & set(COMPILER))
