"""A failure's calls (transcript.py) written out as a script the candidate can run next to
their file: each input rebuilt exactly, each call made again, what it returns printed."""

from __future__ import annotations

import keyword
import re
import sys
from typing import Any

from grader.engine.proxy import RemoteMethod, RemoteObject
from grader.engine.transcript import MAX_SNIPPET_CHARS, Call, Made, ModuleSnap, Segment, Transcript
from grader.worker import values
from grader.worker.codec import Verbatim

MAX_FINAL_READS = 40  # state reads printed after the last call


def _module_source(module: Any, var: str) -> list[str] | None:
    """Lines that rebuild `module` as `var` (a torch.nn.Linear, with its weights, flags and
    mode), or None for a kind of module this cannot rebuild."""
    import torch

    if type(module) is not torch.nn.Linear:
        return None
    weight = module.weight
    lines = [f"{var} = torch.nn.Linear({module.in_features}, {module.out_features}, "
             f"bias={module.bias is not None}, dtype={weight.dtype})"]
    state = ", ".join(f"{k!r}: {values.tensor_literal(v.detach())}" for k, v in module.state_dict().items())
    lines.append(f"{var}.load_state_dict({{{state}}})")
    for name, param in module.named_parameters():
        if not param.requires_grad:
            lines.append(f"{var}.{name}.requires_grad_(False)")
    if not module.training:
        lines.append(f"{var}.eval()")
    return lines


class _Names:
    def __init__(self, module: str) -> None:
        self.module = module
        self.by_id: dict[int, str] = {}
        self.used: dict[str, int] = {module: 1, "torch": 1}  # never shadow the imports
        self.setup: list[str] = []
        self.imports: set[str] = set()  # modules the rendered literals need besides torch
        self.module_proxy: Any = None  # the candidate's module, as the test's calls reached it

    def __call__(self, value: Any) -> str:
        """A nested value's literal (what the value table's renderers call)."""
        return literal(value, self)

    def of(self, proxy: Any) -> str:
        name = self.by_id.get(id(proxy))
        if name is None:
            # A function or class of the module, read (and cached by the module's proxy) in
            # an earlier example: it is still `module.name`.
            cache = getattr(getattr(self, "module_proxy", None), "_kata_cache", None) or {}
            attr = next((k for k, v in list(cache.items()) if v is proxy), None)
            if attr is not None and attr.isidentifier():
                return f"{self.module}.{attr}"
            name = f"<an object from an earlier call: {_type_name(proxy)}>"
        return name

    def new(self, proxy: Any) -> str:
        name = self.new_name(_type_name(proxy))
        self.by_id[id(proxy)] = name
        return name

    def new_name(self, type_name: str) -> str:
        base = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", type_name).lower() or "obj"
        base = base if base.isidentifier() and not keyword.iskeyword(base) else "obj"
        self.used[base] = self.used.get(base, 0) + 1
        return base if self.used[base] == 1 else f"{base}_{self.used[base]}"


def _type_name(proxy: Any) -> str:
    info = getattr(proxy, "_kata_type", None)
    return info.qualname.split(".")[-1] if info is not None else type(proxy).__name__


def callee(call: Call, module_proxy: Any) -> str:
    """The name of what `call` called, as the candidate's file spells it: "allocate_prompt"
    (a method), "apply_rope" (a function of the module), "RotaryEmbedding" (a class)."""
    if call.op != "call":
        return str(call.name)
    if call.target is module_proxy:
        return "the module"
    cache = getattr(module_proxy, "_kata_cache", None) or {}
    name = next((k for k, v in list(cache.items()) if v is call.target), None)
    if name is None and isinstance(call.target, RemoteObject) and not call.target._kata_type.is_class:
        name = _type_name(call.target)  # an object of theirs called as a function
    return name or "a function of your code"


def literal(value: Any, names: _Names) -> str:
    """Python source that rebuilds `value` exactly: a candidate's object by the name the
    snippet gave it, a value by its row of the value table (grader/worker/values.py)."""
    if isinstance(value, (RemoteObject, Made)):
        if value is names.module_proxy:
            return names.module
        return names.of(value)
    if isinstance(value, RemoteMethod):
        return f"{literal(value._obj, names)}.{value._name}"
    if isinstance(value, ModuleSnap):
        return _module_literal(value, names)
    row = values.nearest(type(value))
    if row is not None:
        return row.literal(value, names)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.nn.Module):
        return f"<a {type(value).__name__} module built by the test>"
    if callable(value):
        return f"<a function of the test: {getattr(value, '__qualname__', type(value).__name__)}>"
    return f"<{type(value).__name__}>"


def _module_literal(value: ModuleSnap, names: _Names) -> str:
    name = names.by_id.get(value.original_id)
    if name is not None:
        return name
    kind = type(value.module).__name__ if value.module is not None else "module"
    if value.source is not None:
        kind = value.source.split("(")[0].split(".")[-1]
    var = names.new_name(kind)
    if value.source is not None:
        names.imports.add(value.source.split(".")[0])
        lines: list[str] | None = [f"{var} = {value.source}"]
    else:
        lines = _module_source(value.module, var) if value.module is not None else None
    if lines is None:
        return f"<a {kind} module built by the test>"
    names.setup.extend(lines)
    names.by_id[value.original_id] = var
    return var


def render(transcript: Transcript | Segment, *, module: str, module_proxy: Any, test: str, seed: Any,
           message: str, details: dict[str, Any] | None = None) -> str | None:
    """The snippet for a failed test, or None when the test made no call into the code."""
    calls = transcript.calls
    if not calls:
        return None
    names = _Names(module)
    names.module_proxy = module_proxy
    header = [f"# Replays the calls of the failing example of {test} (seed {seed}).",
             f"# Run it next to your {module}.py:  python this_file.py",
             "import torch" if _uses_torch(calls) else None,
             f"import {module}", ""]
    lines = [line for line in header if line is not None]
    if transcript.dropped:
        lines.append(f"# ({transcript.dropped} earlier calls not shown)")
    for call in calls:
        target = literal(call.target, names)
        args = [literal(a, names) for a in call.args] + [f"{k}={literal(v, names)}" for k, v in call.kwargs]
        lines += names.setup  # what the arguments need first (a module built by the test)
        names.setup.clear()
        if call.seed is not None:
            lines.append(f"torch.manual_seed({call.seed})  # the random state your code saw")
        if call.op == "call":
            expr = f"{target}({', '.join(args)})"
        elif call.op == "callmethod":
            expr = f"{target}.{call.name}({', '.join(args)})"
        elif call.op == "getattr":
            expr = f"{target}.{call.name}"
        elif call.op == "setattr":
            lines.append(f"{target}.{call.name} = {args[0] if args else '...'}")
            continue
        else:
            continue
        if call.raised:
            lines.append(f"{expr}  # raises {call.raised}")
        elif isinstance(call.result, (RemoteObject, Made)):
            if call.op == "getattr" and call.target is module_proxy:
                names.by_id[id(call.result)] = expr  # paged_kv.PagedKVCacheAllocator
                continue
            lines.append(f"{names.new(call.result)} = {expr}")
        else:
            lines.append(f"print({expr})")
    lines += _looked_at_last(calls[-1], names, module_proxy)
    at = lines.index(f"import {module}")  # after torch, before the candidate's module
    for extra in sorted(names.imports, reverse=True):
        lines.insert(at, f"import {extra}")
    lines += ["", "# The test then reported: " + (message.splitlines()[0][:300] if message else "a failure")]
    for key in ("expected", "got"):
        value = (details or {}).get(key)
        if isinstance(value, str) and value:
            shown = value if len(value) <= 300 else value[:300] + " ..."
            lines.append(f"#   {key}: " + shown.replace("\n", "\n#     "))
    text = "\n".join(lines).rstrip() + "\n"
    return text[:MAX_SNIPPET_CHARS]


def _looked_at_last(call: Call, names: _Names, module_proxy: Any) -> list[str]:
    """Lines that print what the test looked at after the example's last call, where a
    failure is found: the object that call returned (a scheduler's Batch) and the state read
    with it (a lockstep test's tables and counts), so the snippet ends by showing "got"."""
    if call.raised:
        return []
    lines = []
    constructed = call.op == "call" and getattr(getattr(call.target, "_kata_type", None), "is_class", False)
    if isinstance(call.result, RemoteObject) and call.op != "getattr" and not constructed:
        name = names.by_id.get(id(call.result))
        if name is not None:
            lines.append(f"print({name})")
    reads = call.reads.value if isinstance(call.reads, Verbatim) else call.reads
    if type(reads) is not tuple or not reads:
        return lines
    target = literal(call.target, names)
    lines.append("# what the test then read:")
    for read in reads[:MAX_FINAL_READS]:
        if type(read) is not tuple or len(read) < 2 or type(read[0]) is not str or not read[0].isidentifier():
            continue
        name, args = read[0], read[1]
        if args is None:
            lines.append(f"print({target}.{name})")
        elif type(args) is tuple:
            lines.append(f"print({target}.{name}({', '.join(literal(a, names) for a in args)}))")
    return lines


def _uses_torch(calls: list[Call]) -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False

    def has(value: Any) -> bool:
        if isinstance(value, (torch.Tensor, torch.dtype, torch.Generator, torch.device, torch.Size, ModuleSnap)):
            return True
        if isinstance(value, (list, tuple)):
            return any(has(v) for v in value)
        if isinstance(value, dict):
            return any(has(v) for v in value.values())
        return False

    return any(c.seed is not None or has(c.args) or has([v for _, v in c.kwargs]) for c in calls)
