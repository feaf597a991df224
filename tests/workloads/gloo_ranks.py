"""A two-rank torchrun job on the CPU (gloo): checks that `kernelscope run -- torchrun` records every rank."""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.ones(4) * dist.get_rank()
dist.all_reduce(t)
print(f"rank {dist.get_rank()}: sum {t[0].item():.0f}", flush=True)
dist.destroy_process_group()
