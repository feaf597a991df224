"""Short, readable kernel names from demangled C++ signatures."""
from __future__ import annotations

import functools

import re
from typing import Iterable


def _strip_brackets(s: str, open_c: str, close_c: str) -> str:
    """``s`` without what its brackets enclose (nested; a close with none open is dropped). Jumps from bracket
    to bracket: a name of millions of characters has few of them."""
    if open_c not in s and close_c not in s:
        return s
    out, depth, at = [], 0, 0
    for m in re.finditer(re.escape(open_c) + "|" + re.escape(close_c), s):
        if depth == 0:
            out.append(s[at:m.start()])
        depth = depth + 1 if m.group() == open_c else max(0, depth - 1)
        at = m.end()
    if depth == 0:
        out.append(s[at:])
    return "".join(out)


@functools.lru_cache(maxsize=8192)  # pure, and asked once per launch by views of many launches
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


_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_WRAPPERS = {"void", "const", "unsigned", "int", "long", "char", "operator", "lambda", "anonymous", "namespace"}


def _signature_tokens(name: str) -> list[str]:
    """The words of a demangled signature after the kernel's own name, namespaces dropped:
    ``reduce_kernel<512, 1, at::native::ReduceOp<float, ...MaxNanFunctor...>>`` -> 512, 1, ReduceOp, float, ..."""
    words = _TOKEN.findall(name)
    short = short_kernel_name(name)
    if short in words:
        words = words[words.index(short) + 1:]
    namespaces = {w for w in re.findall(r"([A-Za-z_][A-Za-z0-9_]*)::", name)}
    return [w for w in words if w not in namespaces and w not in _WRAPPERS]


def _first_difference(a: list[str], b: list[str]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def distinct_short_names(names: Iterable[str]) -> dict[str, str]:
    """Full name -> short name, with what tells it apart where two full names share a short name.

    The suffix is the words of the signature where it first differs from each other kernel of
    the same short name, preferring words over bare numbers (``reduce_kernel (MaxNanFunctor)``
    and ``reduce_kernel (sum_functor)``); when the words never differ, the kernel's place among
    them (``#1``, ``#2``) in the order given.
    """
    names = list(dict.fromkeys(names))
    by_short: dict[str, list[str]] = {}
    for n in names:
        by_short.setdefault(short_kernel_name(n), []).append(n)
    out = {}
    for short, group in by_short.items():
        if len(group) == 1:
            out[group[0]] = short
            continue
        labels = {}
        for n in group:
            mine = _signature_tokens(n)
            words = [w for w in mine if not w.isdigit()]
            picked: list[str] = []
            for other in group:
                if other == n:
                    continue
                theirs = _signature_tokens(other)
                i = _first_difference(words, [w for w in theirs if not w.isdigit()])
                seq = words
                if i is None or i >= len(seq):
                    i, seq = _first_difference(mine, theirs), mine
                if i is not None and i < len(seq) and seq[i] not in picked:
                    picked.append(seq[i])
            labels[n] = ", ".join(picked)
        if len(set(labels.values())) < len(group) or not all(labels.values()):
            labels = {n: f"#{i}" for i, n in enumerate(group, 1)}
        for n in group:
            out[n] = f"{short} ({labels[n]})"
    return out
