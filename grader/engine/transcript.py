"""The calls a test made into the candidate's code, as a Python script that replays them.

The judge records every call of the current hypothesis example (a new example starts a new
transcript), with its arguments as they were at the time of the call. When the test fails,
the transcript of the last example — hypothesis's minimal failing one, replayed last — becomes
a snippet the candidate can paste next to their file: it rebuilds each input exactly
(tensors as ``torch.tensor([...], dtype=...)`` literals), makes the same calls and prints
what their code returns.
"""

from __future__ import annotations

import keyword
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

MAX_CALLS = 400          # per example: a longer transcript is cut at its start
MAX_LITERAL_ELEMENTS = 4096
MAX_PACKED_BYTES = 24_000  # a larger tensor is rebuilt exactly from base64 up to this size
MAX_SNIPPET_CHARS = 40_000


@dataclass
class Call:
    op: str
    target: Any          # the proxy called (or whose attribute is read)
    name: str | None     # method or attribute name
    args: tuple
    kwargs: tuple
    result: Any = None
    raised: str | None = None
    seed: int | None = None  # torch's global generator was seeded with this just before the call


@dataclass
class Transcript:
    calls: list[Call] = field(default_factory=list)
    example: Any = None
    dropped: int = 0

    def start(self, example: Any) -> None:
        if example is not self.example:
            self.example = example
            self.calls.clear()
            self.dropped = 0

    def add(self, call: Call) -> None:
        self.calls.append(call)
        if len(self.calls) > MAX_CALLS:
            del self.calls[0]
            self.dropped += 1


_context_var: Any = None


def current_example() -> Any:
    """An object standing for the running hypothesis example (None outside one)."""
    global _context_var
    if _context_var is None:
        try:
            from hypothesis.control import _current_build_context

            _context_var = _current_build_context
        except ImportError:  # an API that moved: one transcript per test
            _context_var = False
    if _context_var is False:
        return None
    try:
        return _context_var.value
    except Exception:  # noqa: BLE001
        return None


_IMMUTABLE = frozenset({type(None), bool, int, float, complex, str, bytes})


def snapshot(value: Any, depth: int = 0) -> Any:
    """The argument as it is now (later in-place changes must not alter the transcript)."""
    t = type(value)
    if t in _IMMUTABLE or (t is tuple and all(map(_IMMUTABLE.__contains__, map(type, value)))):
        return value  # (most arguments: request ids, token counts)
    if depth > 6:
        return value
    if t is list:
        return [snapshot(v, depth + 1) for v in value]
    if t is dict:
        return {k: snapshot(v, depth + 1) for k, v in value.items()}
    if t is tuple:
        return tuple(snapshot(v, depth + 1) for v in value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor) \
            and value.numel() * value.element_size() <= max(MAX_PACKED_BYTES, 8 * MAX_LITERAL_ELEMENTS):
        return value.detach().clone()
    if torch is not None and isinstance(value, torch.nn.Module):
        return _ModuleSnap(value)
    return value


# A module's recipe: a dotted constructor call with plain arguments (names, numbers).
_RECIPE = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+\([\w\s=,.+\-]*\)")


class _ModuleSnap:
    """A module the test built and passed in (LoRALinear's base layer), as it was then."""

    __slots__ = ("original_id", "module", "source")

    def __init__(self, module: Any) -> None:
        import copy

        self.original_id = id(module)
        # A suite may say how to rebuild a module it made (a kata's model from its seed):
        # `module._kata_rebuild = "pkg.Class(args)"`, valid while the module is unchanged.
        source = getattr(module, "_kata_rebuild", None)
        self.source = source if isinstance(source, str) and _RECIPE.fullmatch(source) else None
        try:
            small = sum(p.numel() for p in module.state_dict().values()) <= MAX_LITERAL_ELEMENTS
            self.module = copy.deepcopy(module) if small else None
        except Exception:  # noqa: BLE001 - a transcript must never fail a test
            self.module = None


def _module_source(module: Any, var: str) -> list[str] | None:
    """Lines that rebuild `module` as `var` (a torch.nn.Linear, with its weights, flags and
    mode), or None for a kind of module this cannot rebuild."""
    import torch

    if type(module) is not torch.nn.Linear:
        return None
    weight = module.weight
    lines = [f"{var} = torch.nn.Linear({module.in_features}, {module.out_features}, "
             f"bias={module.bias is not None}, dtype={weight.dtype})"]
    state = ", ".join(f"{k!r}: {_tensor_literal(v.detach())}" for k, v in module.state_dict().items())
    lines.append(f"{var}.load_state_dict({{{state}}})")
    for name, param in module.named_parameters():
        if not param.requires_grad:
            lines.append(f"{var}.{name}.requires_grad_(False)")
    if not module.training:
        lines.append(f"{var}.eval()")
    return lines


# ------------------------------------------------------------------------ rendering


class _Names:
    def __init__(self, module: str) -> None:
        self.module = module
        self.by_id: dict[int, str] = {}
        self.used: dict[str, int] = {module: 1, "torch": 1}  # never shadow the imports
        self.setup: list[str] = []
        self.imports: set[str] = set()  # modules the rendered literals need besides torch

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


def literal(value: Any, names: _Names) -> str:
    """Python source that rebuilds `value` exactly."""
    import sys

    from grader.engine.judge_bridge import RemoteMethod, RemoteObject

    torch = sys.modules.get("torch")
    if isinstance(value, RemoteObject):
        if value is names.module_proxy:
            return names.module
        return names.of(value)
    if isinstance(value, RemoteMethod):
        return f"{literal(value._obj, names)}.{value._name}"
    if isinstance(value, float):
        if math.isnan(value):
            return "float('nan')"
        if math.isinf(value):
            return "float('inf')" if value > 0 else "-float('inf')"
        return repr(value)
    if isinstance(value, (bool, int, str, bytes, type(None))):
        return repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(literal(v, names) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(literal(v, names) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k, names)}: {literal(v, names)}" for k, v in value.items()) + "}"
    if isinstance(value, (set, frozenset)):
        return ("{" + ", ".join(literal(v, names) for v in value) + "}") if value else "set()"
    if torch is not None:
        if isinstance(value, torch.Tensor):
            return _tensor_literal(value, names)
        if isinstance(value, torch.dtype):
            return str(value)
        if isinstance(value, torch.device):
            return f"torch.device({str(value)!r})"
        if isinstance(value, torch.Generator):
            return f"torch.Generator().manual_seed({value.initial_seed()})"
        if isinstance(value, torch.nn.Module):
            return f"<a {type(value).__name__} module built by the test>"
    if isinstance(value, _ModuleSnap):
        name = names.by_id.get(value.original_id)
        if name is not None:
            return name
        kind = type(value.module).__name__ if value.module is not None else "module"
        if value.source is not None:
            kind = value.source.split("(")[0].split(".")[-1]
        var = names.new_name(kind)
        if value.source is not None:
            names.imports.add(value.source.split(".")[0])
            lines = [f"{var} = {value.source}"]
        else:
            lines = _module_source(value.module, var) if value.module is not None else None
        if lines is None:
            return f"<a {kind} module built by the test>"
        names.setup.extend(lines)
        names.by_id[value.original_id] = var
        return var
    if callable(value):
        return f"<a function of the test: {getattr(value, '__qualname__', type(value).__name__)}>"
    return f"<{type(value).__name__}>"


def _tensor_literal(t: Any, names: "_Names | None" = None) -> str:
    dtype = str(t.dtype)
    grad = ", requires_grad=True" if t.requires_grad and t.is_leaf else ""
    if t.numel() > MAX_LITERAL_ELEMENTS:
        nbytes = t.numel() * t.element_size()
        if nbytes <= MAX_PACKED_BYTES and t.device.type == "cpu" and names is not None:
            import base64

            import torch

            names.imports.add("base64")
            raw = t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes()
            packed = base64.b64encode(raw).decode()
            rebuilt = (f"torch.frombuffer(bytearray(base64.b64decode({packed!r})), dtype={dtype})"
                       f".reshape({tuple(t.shape)})")
            return rebuilt + (".requires_grad_()" if grad else "")
        if names is not None:
            names.setup.append(f"# (a {tuple(t.shape)} tensor below is shown as zeros: its "
                               f"{t.numel()} values are too many to print)")
        return f"torch.zeros({tuple(t.shape)}, dtype={dtype}{grad})"
    values = t.detach().cpu()
    if values.dtype == torch_bfloat16_or_half(values):
        values = values.float()
    body = _nested(values.tolist())
    if t.numel() == 0:
        return f"torch.empty({tuple(t.shape)}, dtype={dtype}{grad})"
    return f"torch.tensor({body}, dtype={dtype}{grad})"


def torch_bfloat16_or_half(t: Any) -> Any:
    import torch

    return t.dtype if t.dtype in (torch.bfloat16, torch.float16) else None


def _nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_nested(v) for v in values) + "]"
    if isinstance(values, float):
        if math.isnan(values):
            return "float('nan')"
        if math.isinf(values):
            return "float('inf')" if values > 0 else "-float('inf')"
        return repr(values)
    return repr(values)


def render(transcript: Transcript, *, module: str, module_proxy: Any, test: str, seed: Any,
           message: str, details: dict[str, Any] | None = None) -> str | None:
    """The snippet for a failed test, or None when the test made no call into the code."""
    calls = transcript.calls
    if not calls:
        return None
    names = _Names(module)
    names.module_proxy = module_proxy  # type: ignore[attr-defined]
    lines = [f"# Replays the calls of the failing example of {test} (seed {seed}).",
             f"# Run it next to your {module}.py:  python this_file.py",
             "import torch" if _uses_torch(calls) else None,
             f"import {module}", ""]
    lines = [line for line in lines if line is not None]
    if transcript.dropped:
        lines.append(f"# ({transcript.dropped} earlier calls not shown)")
    from grader.engine.judge_bridge import RemoteObject

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
        elif isinstance(call.result, RemoteObject):
            if call.op == "getattr" and call.target is module_proxy:
                names.by_id[id(call.result)] = expr  # paged_kv.PagedKVCacheAllocator
                continue
            lines.append(f"{names.new(call.result)} = {expr}")
        else:
            lines.append(f"print({expr})")
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


def _uses_torch(calls: list[Call]) -> bool:
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return False

    def has(value: Any) -> bool:
        if isinstance(value, (torch.Tensor, torch.dtype, torch.Generator, torch.device, _ModuleSnap)):
            return True
        if isinstance(value, (list, tuple)):
            return any(has(v) for v in value)
        if isinstance(value, dict):
            return any(has(v) for v in value.values())
        return False

    return any(c.seed is not None or has(c.args) or has([v for _, v in c.kwargs]) for c in calls)
