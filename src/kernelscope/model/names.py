"""Short, readable kernel names from demangled C++ signatures."""
from __future__ import annotations


def _strip_brackets(s: str, open_c: str, close_c: str) -> str:
    out, depth = [], 0
    for ch in s:
        if ch == open_c:
            depth += 1
        elif ch == close_c:
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def short_kernel_name(name: str) -> str:
    """``void at::native::(anonymous namespace)::foo_kernel<float, 4>(int)`` -> ``foo_kernel``."""
    s = name.strip()
    if s.startswith("void "):
        s = s[5:]
    s = s.replace("(anonymous namespace)", "anon")
    s = _strip_brackets(s, "(", ")")
    s = _strip_brackets(s, "<", ">")
    s = s.strip().split("::")[-1].strip()
    return s or name
