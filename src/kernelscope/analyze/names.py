"""Kernel-name helpers live in the model (collectors need them too); re-exported here."""
from kernelscope.model.names import short_kernel_name

__all__ = ["short_kernel_name"]
