"""`run --memory`: the PyTorch caching allocator's history (torch.cuda.memory._record_memory_history)."""
