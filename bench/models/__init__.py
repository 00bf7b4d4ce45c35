"""The models the training suites train: a GPT-2 in a page (gpt.py), a Llama 3 decoder in a page
(llama.py), SDXL's UNet through diffusers (unet.py), their shapes as plain data (shapes.py, no torch)
and the workloads built from them (workload.py: a module that returns its loss and the synthetic
micro-batches of a step)."""
