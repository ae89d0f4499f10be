// Paged KV-cache block allocator (vLLM style), in C++17.
//
// The KV cache is a pool of `num_blocks` physical blocks of `block_size` tokens each. Every
// request has a block table: logical block i of the request lives in physical block
// block_table[i].
//
// Worked example (num_blocks = 4, block_size = 4), as Python sees your module:
//
//     alloc = PagedKVCacheAllocator(4, 4)
//     alloc.allocate("a", 6)       # True: "a" holds 2 blocks, say [0, 1]; 2 blocks free
//     alloc.allocate("a", 2)       # True: 8 tokens, still 2 blocks
//     alloc.allocate("a", 9)       # False: no room; nothing changes
//     alloc.free("a")              # 4 blocks free; "a" is unknown now
//
// Levels (`kata show paged-kv` has the interviewer's words, and the answers to what you ask):
//   1. allocate / free / block_table / num_tokens / num_free_blocks
//   2. fork with copy-on-write, pop_copies
//   3. allocate_prompt with prefix caching
//
// Which physical ids you hand out is your choice: the grader never depends on them.
// The standard library is enough. The hidden suite calls your class from Python; errors
// reach it as:
//   ValueError          <- throw std::invalid_argument(msg)
//   KeyError            <- throw KeyError(msg)         (defined below)
//   NotImplementedError <- throw NotImplemented(msg)   (defined below)

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct KeyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct NotImplemented : std::logic_error {
    using std::logic_error::logic_error;
};

using BlockId = std::int64_t;  // ids in [0, num_blocks)
using TokenId = std::int64_t;

// Hands out fixed-size KV-cache blocks to requests.
class PagedKVCacheAllocator {
public:
    // A pool of num_blocks blocks (>= 1) of block_size tokens (>= 1), all free.
    // Throws std::invalid_argument (ValueError) when num_blocks < 1 or block_size < 1.
    PagedKVCacheAllocator([[maybe_unused]] std::int64_t num_blocks, [[maybe_unused]] std::int64_t block_size) {
        // TODO: validate, then set up the free blocks and the per-request state.
        throw NotImplemented("PagedKVCacheAllocator::PagedKVCacheAllocator");
    }

    // ------------------------------------------------------------------ level 1: allocate, free

    // Number of blocks no request holds (a read-only property in Python).
    std::int64_t num_free_blocks() const {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::num_free_blocks");
    }

    // Make room for num_new_tokens more tokens of request_id (new or existing).
    // Returns true on success; false when the pool has no room for them (then nothing changes).
    // Throws std::invalid_argument (ValueError) when num_new_tokens < 0.
    bool allocate([[maybe_unused]] const std::string& request_id, [[maybe_unused]] std::int64_t num_new_tokens) {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::allocate");
    }

    // The request is done: release its blocks; the id is unknown afterwards.
    // Throws KeyError when request_id is unknown.
    void free([[maybe_unused]] const std::string& request_id) {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::free");
    }

    // Physical block ids of request_id, in logical order (Python gets a new list).
    // Throws KeyError when request_id is unknown.
    std::vector<BlockId> block_table([[maybe_unused]] const std::string& request_id) const {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::block_table");
    }

    // Number of tokens request_id holds.
    // Throws KeyError when request_id is unknown.
    std::int64_t num_tokens([[maybe_unused]] const std::string& request_id) const {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::num_tokens");
    }

    // [level 2] ---------------------------------------------- fork, copy-on-write

    // Start child_id with parent_id's tokens, sharing the parent's blocks (no free block is
    // used); a write into a shared block copies it first (copy-on-write).
    // Throws KeyError when parent_id is unknown (checked first), std::invalid_argument
    // (ValueError) when child_id already exists (fork(p, p) too).
    void fork([[maybe_unused]] const std::string& parent_id, [[maybe_unused]] const std::string& child_id) {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::fork");
    }

    // The pending (src_block_id, dst_block_id) copies made by copy-on-write since the last
    // call, in the order they were made (Python gets a list of tuples); clears them.
    std::vector<std::pair<BlockId, BlockId>> pop_copies() {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::pop_copies");
    }
    // [/level 2]

    // [level 3] ---------------------------------------------- prefix caching

    // Start request_id holding the whole prompt token_ids, reusing the blocks that earlier
    // prompts with the same prefix filled (prefix caching).
    // Returns the number of prompt tokens served from the cache (0 on a cold cache), or
    // std::nullopt (None) when there is no room (then nothing changes).
    // Throws std::invalid_argument (ValueError) when request_id already exists or token_ids
    // is empty.
    std::optional<std::int64_t> allocate_prompt([[maybe_unused]] const std::string& request_id,
                                                [[maybe_unused]] const std::vector<TokenId>& token_ids) {
        // TODO
        throw NotImplemented("PagedKVCacheAllocator::allocate_prompt");
    }
    // [/level 3]

private:
    // TODO: your state (free blocks, per-request block tables and token counts, ...).
};

// ---- bindings: you do not need to change anything below ----

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

PYBIND11_MODULE(paged_kv, m) {
    m.doc() = "Paged KV-cache block allocator (vLLM style): the paged-kv kata in C++.";
    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const KeyError& e) {
            PyErr_SetString(PyExc_KeyError, e.what());
        } catch (const NotImplemented& e) {
            PyErr_SetString(PyExc_NotImplementedError, e.what());
        }
    });
    py::class_<PagedKVCacheAllocator> cls(m, "PagedKVCacheAllocator");
    cls.def(py::init<std::int64_t, std::int64_t>(), py::arg("num_blocks"), py::arg("block_size"));
    cls.def_property_readonly("num_free_blocks", &PagedKVCacheAllocator::num_free_blocks);
    cls.def("allocate", &PagedKVCacheAllocator::allocate, py::arg("request_id"), py::arg("num_new_tokens"));
    cls.def("free", &PagedKVCacheAllocator::free, py::arg("request_id"));
    cls.def("block_table", &PagedKVCacheAllocator::block_table, py::arg("request_id"));
    cls.def("num_tokens", &PagedKVCacheAllocator::num_tokens, py::arg("request_id"));
    // [level 2]
    cls.def("fork", &PagedKVCacheAllocator::fork, py::arg("parent_id"), py::arg("child_id"));
    cls.def("pop_copies", &PagedKVCacheAllocator::pop_copies);
    // [/level 2]
    // [level 3]
    cls.def("allocate_prompt", &PagedKVCacheAllocator::allocate_prompt, py::arg("request_id"),
            py::arg("token_ids"));
    // [/level 3]
}
