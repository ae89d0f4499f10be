// A level-1 paged-kv allocator in C++ (tests/test_cpp_track.py): the engine's own fixture,
// independent of the kata's C++ stub and reference. It passes level 1.
#include <vector>
#include <string>
#include <unordered_map>
#include <stdexcept>
#include <optional>
#include <cstdint>
struct KeyError : std::runtime_error { using std::runtime_error::runtime_error; };
class PagedKVCacheAllocator {
 public:
  PagedKVCacheAllocator(int num_blocks, int block_size) : bs_(block_size) {
    if (num_blocks < 1 || block_size < 1) throw std::invalid_argument("bad");
    for (int i = num_blocks - 1; i >= 0; --i) free_.push_back(i);
  }
  int num_free_blocks() const { return (int)free_.size(); }
  bool allocate(const std::string& rid, int64_t n) {
    if (n < 0) throw std::invalid_argument("n < 0");
    auto it = reqs_.find(rid);
    int64_t have = it == reqs_.end() ? 0 : it->second.tokens;
    size_t blocks = it == reqs_.end() ? 0 : it->second.blocks.size();
    if (n > (int64_t)(free_.size() + 1) * bs_) return false;  // more than the pool could ever hold
    size_t need = (size_t)((have + n + bs_ - 1) / bs_);
    if (need - blocks > free_.size()) return false;
    auto& r = reqs_[rid];
    while (r.blocks.size() < need) { r.blocks.push_back(free_.back()); free_.pop_back(); }
    r.tokens += n;
    return true;
  }
  void free(const std::string& rid) {
    auto it = reqs_.find(rid);
    if (it == reqs_.end()) throw KeyError(rid);
    for (int b : it->second.blocks) free_.push_back(b);
    reqs_.erase(it);
  }
  std::vector<int> block_table(const std::string& rid) const {
    auto it = reqs_.find(rid); if (it == reqs_.end()) throw KeyError(rid); return it->second.blocks; }
  int64_t num_tokens(const std::string& rid) const {
    auto it = reqs_.find(rid); if (it == reqs_.end()) throw KeyError(rid); return it->second.tokens; }
 private:
  struct Req { std::vector<int> blocks; int64_t tokens = 0; };
  int bs_;
  std::vector<int> free_;
  std::unordered_map<std::string, Req> reqs_;
};
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
namespace py = pybind11;
PYBIND11_MODULE(paged_kv, m) {
  py::register_exception_translator([](std::exception_ptr p) {
    try { if (p) std::rethrow_exception(p); } catch (const KeyError& e) { PyErr_SetString(PyExc_KeyError, e.what()); } });
  py::class_<PagedKVCacheAllocator>(m, "PagedKVCacheAllocator")
    .def(py::init<int, int>(), py::arg("num_blocks"), py::arg("block_size"))
    .def_property_readonly("num_free_blocks", &PagedKVCacheAllocator::num_free_blocks)
    .def("allocate", &PagedKVCacheAllocator::allocate, py::arg("request_id"), py::arg("num_new_tokens"))
    .def("free", &PagedKVCacheAllocator::free, py::arg("request_id"))
    .def("block_table", &PagedKVCacheAllocator::block_table, py::arg("request_id"))
    .def("num_tokens", &PagedKVCacheAllocator::num_tokens, py::arg("request_id"));
}
