"""Launches a few kernels, then fails: the session must keep those launches."""
import torch

x = torch.randn(1024, 1024, device="cuda")
y = x @ x
torch.cuda.synchronize()
raise RuntimeError("workload failed on purpose after its kernels ran")
