"""torch.nn modules the judge passes to the candidate (a base layer, a model), shared by
both sides: the worker gets a copy, identity survives the round trip, and training flags
and the parameters a module holds are kept in step on both sides."""

from __future__ import annotations

from typing import Any

from . import codec
from .wire import WireError


def module_members(module: Any) -> list[tuple[str, str, Any]]:
    out = [("p", name, p) for name, p in module.named_parameters(remove_duplicate=False)]
    out += [("b", name, b) for name, b in module.named_buffers(remove_duplicate=False)]
    return out


def encode_module_state(endpoint: Any, sid: int, module: Any, depth: int) -> Any:
    members = [(kind, name, endpoint.encode(t, depth) if t is not None else None)
               for kind, name, t in module_members(module)]
    return ("MU", sid, [m.training for m in module.modules()], members)


def apply_module_state(endpoint: Any, tree: tuple, depth: int) -> Any:
    """Bring a shared module up to date: training flags and which tensors it holds."""
    import torch

    if len(tree) != 4:
        raise WireError("malformed module state")
    _, sid, flags, members = tree
    module = endpoint.registry.objects.get(sid)
    if not isinstance(module, torch.nn.Module) or type(flags) is not list or type(members) is not list:
        raise WireError("a state for an unknown module")
    for sub, flag in zip(module.modules(), flags):
        sub.training = bool(flag)
    for member in members:
        if type(member) is not tuple or len(member) != 3 or member[0] not in ("p", "b"):
            raise WireError("malformed module member")
        kind, name, enc = member
        owner, _, attr = codec.ensure_str(name, "a member name").rpartition(".")
        try:
            target = module.get_submodule(owner) if owner else module
        except AttributeError:
            continue
        value = endpoint.decode(enc, depth) if enc is not None else None
        table = target._parameters if kind == "p" else target._buffers
        if kind == "p" and value is not None and not isinstance(value, torch.nn.Parameter):
            continue  # a plain tensor where a parameter was: leave the parameter as is
        if table.get(attr) is not value:
            table[attr] = value
    endpoint.registry.mark_synced(sid, module)
    return module


def adopt_module(endpoint: Any, tree: tuple) -> Any:
    """The worker's copy of a module the judge passed for the first time (pickled by the
    judge, which the worker trusts); its tensors are registered under the judge's ids."""
    from .serve import unpickle_trusted

    if len(tree) != 4:
        raise WireError("malformed module")
    _, sid, pickled, members = tree
    module = unpickle_trusted(pickled)
    reg = endpoint.registry
    reg.put(sid, module)
    for (kind, name, tsid), (_, _, tensor) in zip(members, module_members(module)):
        existing = reg.objects.get(tsid)
        if existing is not None and existing is not tensor:
            owner, _, attr = name.rpartition(".")
            target = module.get_submodule(owner) if owner else module
            (target._parameters if kind == "p" else target._buffers)[attr] = existing
        else:
            reg.put(tsid, tensor)
            reg.mark_synced(tsid, tensor)
    reg.mark_synced(sid, module)
    return module
