// BUGGY corpus solution for paged-kv (C++): release() puts a block on the free list once its count drops to 1:
// a shared block is handed out while its other holder reads it, and pushed a
// second time when that holder frees it (a double free).
//
// (A copy of reference/cpp/paged_kv.cpp with this one change; the original header follows.)
//
// Paged KV-cache block allocator (vLLM style), the C++ reference of the `paged-kv` kata.
//
// The KV cache is a pool of `num_blocks` physical blocks of `block_size` tokens each. Every
// request has a block table: logical block i of the request lives in physical block
// block_table[i]. `kata show paged-kv` has the statement; this file behaves exactly as
// reference/paged_kv.py.
//
// Levels:
//   1. allocate / free / block_table / num_tokens / num_free_blocks
//   2. fork with copy-on-write, pop_copies
//   3. allocate_prompt with prefix caching (a hash chain, LRU eviction of cached free blocks)
//
// Errors, as Python sees them:
//   ValueError          <- throw std::invalid_argument(msg)
//   KeyError            <- throw KeyError(msg)         (defined below)
//   NotImplementedError <- throw NotImplemented(msg)   (defined below)
//
// References: Kwon et al., "Efficient Memory Management for Large Language Model Serving with
// PagedAttention", SOSP 2023 (block tables, copy-on-write); vLLM v1 core, block_pool.py and
// kv_cache_manager.py (ref_cnt, free_block_queue, block hashes chained through the parent's).

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <list>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

struct KeyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct NotImplemented : std::logic_error {
    using std::logic_error::logic_error;
};

using BlockId = std::int64_t;
using TokenId = std::int64_t;
// The hash of a full block chains the hash of the block before it, so equal hashes mean equal
// tokens *and* an equal whole prefix. 64 bits of a strong mixer, like Python's hash(); a
// production system uses a cryptographic hash so that collisions are out of the question.
using BlockHash = std::uint64_t;

namespace detail {

constexpr BlockHash kRootHash = 0x6b762d63616368ULL;  // the "parent" of a prompt's first block

// splitmix64's finalizer: every input bit flips about half the output bits.
inline std::uint64_t mix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

// Blocks needed to hold num_tokens tokens: ceil(num_tokens / block_size), num_tokens >= 0.
inline std::int64_t num_blocks_for(std::int64_t num_tokens, std::int64_t block_size) {
    return (num_tokens + block_size - 1) / block_size;
}

// The chained hash of every *full* block of token_ids, in logical order: O(len).
inline std::vector<BlockHash> block_hashes(const std::vector<TokenId>& token_ids, std::int64_t block_size) {
    std::vector<BlockHash> hashes;
    const std::size_t size = static_cast<std::size_t>(block_size);
    BlockHash parent = kRootHash;
    for (std::size_t start = 0; start + size <= token_ids.size(); start += size) {
        BlockHash h = mix64(parent);
        for (std::size_t i = start; i < start + size; ++i) {
            h = mix64(h ^ static_cast<std::uint64_t>(token_ids[i]));  // order matters: a chain, not a sum
        }
        hashes.push_back(h);
        parent = h;
    }
    return hashes;
}

}  // namespace detail

// Hands out fixed-size KV-cache blocks to requests; shares them on fork and on prefix hits.
//
// Layout (num_blocks = 8, block_size = 4; "b" was forked from "a", then "b" wrote its 11th
// token, which copied the shared partly filled block 7 into block 3):
//
//     request  tokens  block_table
//     "a"      10      [5, 2, 7]        block 7: t8 t9 _ _
//     "b"      11      [5, 2, 3]        block 3: t8 t9 t10 _   (copy 7 -> 3 pending)
//
//     physical block   0  1  2  3  4  5  6  7
//     ref_cnt          0  0  2  1  0  2  0  1
//     free queues      uncached: [0 4 6]   cached (evicted first ... last): [ ]
//
// Free blocks wait in two queues. Uncached ones hold nothing worth keeping and go first.
// Cached ones (a full prompt block whose count dropped to 0) still hold reusable KV data: they
// count as free, a prefix hit takes them back (O(1): each remembers its place in the list),
// and a fresh block evicts the one that became free longest ago. One free() appends a
// request's blocks last to first, so its later blocks are evicted before its earlier ones.
//
// Invariants (after every public call):
//   * a live request holding n tokens has exactly ceil(n / block_size) blocks in its table;
//   * ref_cnt_[b] is the number of live table slots holding b; a block is in exactly one of:
//     some live table (ref_cnt_ > 0), free_uncached_, free_cached_;
//   * num_free_blocks() + (distinct blocks in live tables) == num_blocks;
//   * hash_to_block_ and block_hash_ are inverse maps; a cached block is full; a block in
//     free_uncached_ has no hash;
//   * a block with ref_cnt_ > 1 is never written: allocate() copies a shared, partly filled
//     last block before writing into it.
class PagedKVCacheAllocator {
public:
    PagedKVCacheAllocator(std::int64_t num_blocks, std::int64_t block_size)
        : block_size_(block_size) {
        if (num_blocks < 1 || block_size < 1) {
            throw std::invalid_argument("num_blocks and block_size must be >= 1, got " +
                                        std::to_string(num_blocks) + " and " + std::to_string(block_size));
        }
        const auto size = static_cast<std::size_t>(num_blocks);
        ref_cnt_.assign(size, 0);
        cached_place_.resize(size);
        block_hash_.resize(size);
        for (BlockId b = 0; b < num_blocks; ++b) free_uncached_.push_back(b);
    }

    // ------------------------------------------------------------------ level 1

    // Blocks no request holds: the uncached free ones and the cached free ones.
    std::int64_t num_free_blocks() const {
        return static_cast<std::int64_t>(free_uncached_.size() + free_cached_.size());
    }

    // Room for num_new_tokens more tokens of request_id (new or existing); false, and no
    // change, when they do not fit. A shared, partly filled last block is copied first.
    bool allocate(const std::string& request_id, std::int64_t num_new_tokens) {
        if (num_new_tokens < 0) {
            throw std::invalid_argument("num_new_tokens must be >= 0, got " + std::to_string(num_new_tokens));
        }
        const auto found = requests_.find(request_id);
        const Request none;  // what a new request holds: no token, no block
        const Request& current = found == requests_.end() ? none : found->second;
        if (num_new_tokens > kMaxTokens - current.num_tokens - block_size_) return false;  // cannot fit anyway
        const std::int64_t num_tokens_after = current.num_tokens + num_new_tokens;
        const bool needs_copy = num_new_tokens > 0 && last_block_is_shared_and_partial(current);
        const std::int64_t num_new_blocks = detail::num_blocks_for(num_tokens_after, block_size_) -
                                            static_cast<std::int64_t>(current.block_table.size());
        if (num_new_blocks + (needs_copy ? 1 : 0) > num_free_blocks()) {
            return false;  // atomic: checked before anything changes (a new request is not created)
        }
        Request& request = requests_[request_id];
        if (needs_copy) copy_last_block(request.block_table);
        for (std::int64_t i = 0; i < num_new_blocks; ++i) request.block_table.push_back(take_free_block());
        request.num_tokens = num_tokens_after;
        return true;
    }

    // Release every block of request_id (KeyError if unknown); the id is unknown afterwards.
    void free(const std::string& request_id) {
        const auto found = find_request(request_id);
        const std::vector<BlockId> table = std::move(found->second.block_table);
        requests_.erase(found);
        for (auto it = table.rbegin(); it != table.rend(); ++it) release(*it);  // later blocks queue first
    }

    // Physical block ids of request_id in logical order (KeyError if unknown).
    std::vector<BlockId> block_table(const std::string& request_id) const {
        return find_request(request_id)->second.block_table;  // a copy: the caller cannot change ours
    }

    // Tokens request_id holds (KeyError if unknown).
    std::int64_t num_tokens(const std::string& request_id) const {
        return find_request(request_id)->second.num_tokens;
    }

    // ------------------------------------------------------------------ level 2

    // child_id starts with parent_id's tokens, sharing all of its blocks (no free block used).
    void fork(const std::string& parent_id, const std::string& child_id) {
        // A reference stays valid when emplace rehashes: unordered_map nodes never move.
        const Request& parent = find_request(parent_id)->second;  // KeyError first
        if (requests_.count(child_id) != 0) {
            throw std::invalid_argument("request '" + child_id + "' already exists");
        }
        for (BlockId b : parent.block_table) ++ref_cnt_[index(b)];
        requests_.emplace(child_id, parent);
    }

    // Pending (src, dst) block copies in the order they were made; clears them.
    std::vector<std::pair<BlockId, BlockId>> pop_copies() {
        std::vector<std::pair<BlockId, BlockId>> copies;
        copies.swap(pending_copies_);
        return copies;
    }

    // ------------------------------------------------------------------ level 3

    // Start request_id with a prompt, reusing cached full blocks of the same prefix: the
    // number of prompt tokens served from the cache, or nullopt (None) if there is no room.
    std::optional<std::int64_t> allocate_prompt(const std::string& request_id,
                                                const std::vector<TokenId>& token_ids) {
        if (requests_.count(request_id) != 0) {
            throw std::invalid_argument("request '" + request_id + "' already exists");
        }
        if (token_ids.empty()) throw std::invalid_argument("the prompt is empty");
        const std::vector<BlockHash> hashes = detail::block_hashes(token_ids, block_size_);
        const auto num_prompt_tokens = static_cast<std::int64_t>(token_ids.size());
        // The last prompt token is always computed: the model needs its logits.
        const std::int64_t max_hits = (num_prompt_tokens - 1) / block_size_;
        const std::vector<BlockId> hit_blocks = cached_prefix(hashes, static_cast<std::size_t>(max_hits));
        const std::int64_t num_fresh =
            detail::num_blocks_for(num_prompt_tokens, block_size_) - static_cast<std::int64_t>(hit_blocks.size());
        std::int64_t num_hits_now_free = 0;
        for (BlockId b : hit_blocks) num_hits_now_free += ref_cnt_[index(b)] == 0 ? 1 : 0;
        if (num_fresh > num_free_blocks() - num_hits_now_free) return std::nullopt;

        std::vector<BlockId> table = hit_blocks;
        for (BlockId b : hit_blocks) touch(b);  // before taking fresh blocks: none of them is evicted
        for (std::int64_t i = 0; i < num_fresh; ++i) table.push_back(take_free_block());
        for (std::size_t logical_id = hit_blocks.size(); logical_id < hashes.size(); ++logical_id) {
            // A prefix that is still cached keeps its entry; the new block stays plain.
            if (hash_to_block_.count(hashes[logical_id]) == 0) cache(table[logical_id], hashes[logical_id]);
        }
        requests_.emplace(request_id, Request{std::move(table), num_prompt_tokens});
        return static_cast<std::int64_t>(hit_blocks.size()) * block_size_;
    }

private:
    struct Request {
        std::vector<BlockId> block_table;  // physical block ids, in logical order
        std::int64_t num_tokens = 0;
    };
    using Requests = std::unordered_map<std::string, Request>;
    // Python ints never overflow; the int64 token sums here must not either. A request that
    // large cannot fit in any pool, so allocate() turns it down before summing.
    static constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int64_t>::max();

    static std::size_t index(BlockId b) { return static_cast<std::size_t>(b); }

    Requests::iterator find_request(const std::string& request_id) {
        const auto found = requests_.find(request_id);
        if (found == requests_.end()) throw KeyError("unknown request '" + request_id + "'");
        return found;
    }
    Requests::const_iterator find_request(const std::string& request_id) const {
        const auto found = requests_.find(request_id);
        if (found == requests_.end()) throw KeyError("unknown request '" + request_id + "'");
        return found;
    }

    bool last_block_is_shared_and_partial(const Request& request) const {
        return request.num_tokens % block_size_ != 0 && ref_cnt_[index(request.block_table.back())] > 1;
    }

    void copy_last_block(std::vector<BlockId>& table) {
        const BlockId src = table.back();
        const BlockId dst = take_free_block();
        --ref_cnt_[index(src)];  // still > 0: another request holds it
        table.back() = dst;
        pending_copies_.emplace_back(src, dst);
    }

    // The cached blocks of the longest run of leading hashes (at most max_hits) all cached.
    std::vector<BlockId> cached_prefix(const std::vector<BlockHash>& hashes, std::size_t max_hits) const {
        std::vector<BlockId> blocks;
        for (std::size_t i = 0; i < hashes.size() && i < max_hits; ++i) {
            const auto found = hash_to_block_.find(hashes[i]);
            if (found == hash_to_block_.end()) break;
            blocks.push_back(found->second);
        }
        return blocks;
    }

    // A block with ref_cnt 1: an uncached one if any, else evict the oldest cached one.
    BlockId take_free_block() {
        BlockId b;
        if (!free_uncached_.empty()) {
            b = free_uncached_.front();
            free_uncached_.pop_front();
        } else if (!free_cached_.empty()) {
            b = free_cached_.front();
            free_cached_.pop_front();
            hash_to_block_.erase(*block_hash_[index(b)]);
            block_hash_[index(b)].reset();
        } else {
            // The room checks make this unreachable; a bug here must not read an empty queue.
            throw std::logic_error("PagedKVCacheAllocator: no free block left (room check missed)");
        }
        ref_cnt_[index(b)] = 1;
        return b;
    }

    // A hit: the block's count goes up; a free (cached) one leaves the free pool.
    void touch(BlockId b) {
        if (ref_cnt_[index(b)] == 0) free_cached_.erase(cached_place_[index(b)]);
        ++ref_cnt_[index(b)];
    }

    void release(BlockId b) {
        if (--ref_cnt_[index(b)] > 1) return;  // another holder still reads it
        if (block_hash_[index(b)].has_value()) {
            cached_place_[index(b)] = free_cached_.insert(free_cached_.end(), b);
        } else {
            free_uncached_.push_back(b);
        }
    }

    void cache(BlockId b, BlockHash h) {
        hash_to_block_.emplace(h, b);
        block_hash_[index(b)] = h;
    }

    std::int64_t block_size_;                           // tokens per block
    std::vector<std::int64_t> ref_cnt_;                 // block -> live table slots holding it
    std::deque<BlockId> free_uncached_;                 // free, nothing cached: handed out first
    std::list<BlockId> free_cached_;                    // free, cached: front is evicted first
    std::vector<std::list<BlockId>::iterator> cached_place_;  // block -> its node in free_cached_
    std::vector<std::optional<BlockHash>> block_hash_;  // block -> its cache entry, if any
    std::unordered_map<BlockHash, BlockId> hash_to_block_;
    Requests requests_;
    std::vector<std::pair<BlockId, BlockId>> pending_copies_;  // (src, dst), in the order made
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
