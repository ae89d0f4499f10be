// Kata: a priority continuous-batching scheduler (chunked prefill, KV preemption), in C++.
//
// Write the scheduler of an inference server. Each call to Scheduler::step() plans ONE model
// iteration and applies it, returning a Batch: the requests that compute a chunk of their
// prompt (prefill), those that generate one token (decode), those preempted, those finished.
//
// Urgency: (priority, arrival_time, request_id), smallest first; a lower priority value is
// more urgent. `decode` and `finished` list requests in urgency order, `preempted` in the
// order of preemption.
//
// Worked example: Scheduler(max_num_batched_tokens=4, max_num_seqs=2, num_blocks=100,
// block_size=2); add a(prompt 3, new 2, priority 1, t=0) and b(prompt 5, new 2, priority 0, t=1):
//   step 1 -> Batch(prefill={'b': 4}, decode=[], preempted=[], finished=[])
//   step 2 -> Batch(prefill={'b': 1, 'a': 3}, decode=[], preempted=[], finished=[])
// (`kata show scheduler` has the interviewer's words, and the answers to what you ask.)
//
// Levels: 1 priorities, token budget and chunked prefill (memory never binds); 2 KV blocks
// and preemption by recompute; 3 abort, aging and thread safety: add_request and abort are
// called from other threads while step() runs, and the bindings release the GIL, so your own
// locking (a std::mutex) is what keeps the scheduler's state consistent.
//
// Errors as Python sees them: ValueError <- throw std::invalid_argument(msg),
// IndexError <- throw std::out_of_range(msg), KeyError <- throw KeyError(msg),
// NotImplementedError <- throw NotImplemented(msg).

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

struct KeyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};
struct NotImplemented : std::logic_error {
    using std::logic_error::logic_error;
};

// An inference request (immutable from Python).
//   request_id: unique for the scheduler's lifetime.
//   prompt_len: prompt tokens, >= 1.  max_new_tokens: tokens to generate, >= 1.
//   priority: lower value = more urgent.
//   arrival_time: ties in priority go to the earliest arrival, then the smallest id.
struct Request {
    std::string request_id;
    int prompt_len = 0;
    int max_new_tokens = 0;
    int priority = 0;
    double arrival_time = 0.0;
};

// What one step ran.
//   prefill: request_id -> prompt tokens computed this step (a chunk, >= 1); a dict in Python.
//   decode: request_ids generating one token this step, in urgency order.
//   preempted: request_ids evicted this step, in the order of preemption.
//   finished: request_ids that completed with this step, in urgency order.
struct Batch {
    std::map<std::string, int> prefill;
    std::vector<std::string> decode;
    std::vector<std::string> preempted;
    std::vector<std::string> finished;
};

// Plans model iterations over a KV cache of `num_blocks` blocks of `block_size` slots.
// [level 3]
// Level 3: add_request and abort may be called from other threads while step() runs.
// [/level 3]
class Scheduler {
public:
    // max_num_batched_tokens: the token budget of one step; max_num_seqs: the cap on running
    // requests; num_blocks, block_size: the KV cache (level 2); aging_steps: std::nullopt
    // (None), or >= 1 (level 3).
    // ValueError (std::invalid_argument) if any count is < 1, or aging_steps is neither
    // None nor >= 1.
    Scheduler([[maybe_unused]] int max_num_batched_tokens, [[maybe_unused]] int max_num_seqs,
              [[maybe_unused]] int num_blocks, [[maybe_unused]] int block_size,
              [[maybe_unused]] std::optional<int> aging_steps = std::nullopt) {
        // TODO: validate, then set up the waiting queue, the running set and the free blocks
        throw NotImplemented("Scheduler::Scheduler");
    }

    // Queue a request.
    // ValueError (std::invalid_argument): an id seen before (waiting, running, finished or
    // aborted), prompt_len < 1 or max_new_tokens < 1, or a request that could never fit in
    // the KV cache.
    void add_request([[maybe_unused]] const Request& request) {
        // TODO
        throw NotImplemented("Scheduler::add_request");
    }

    // [level 3]
    // Drop a waiting or running request: it never runs again, and what it holds is freed.
    // KeyError: the id is not waiting or running (unknown, finished or already aborted).
    void abort([[maybe_unused]] const std::string& request_id) {
        // TODO (level 3)
        throw NotImplemented("Scheduler::abort");
    }
    // [/level 3]

    // Plan one model iteration, apply it, and return what ran.
    Batch step() {
        // TODO
        throw NotImplemented("Scheduler::step");
    }

    // True while any request is waiting or running.
    bool has_unfinished() const {
        // TODO
        throw NotImplemented("Scheduler::has_unfinished");
    }

private:
    // TODO: your state (level 3: a `mutable std::mutex`, so has_unfinished() const can lock)
};

// ---- bindings: you do not need to change anything below ----

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;

PYBIND11_MODULE(scheduler, m) {
    m.doc() = "A priority continuous-batching scheduler (chunked prefill, KV preemption)";

    py::register_exception_translator([](std::exception_ptr p) {
        try {
            if (p) std::rethrow_exception(p);
        } catch (const KeyError& e) {
            PyErr_SetString(PyExc_KeyError, e.what());
        } catch (const NotImplemented& e) {
            PyErr_SetString(PyExc_NotImplementedError, e.what());
        }
    });

    // Request: a frozen dataclass to Python (read-only fields, ==, hash, repr).
    py::class_<Request>(m, "Request")
        .def(py::init([](std::string request_id, int prompt_len, int max_new_tokens,
                         int priority, double arrival_time) {
                 return Request{std::move(request_id), prompt_len, max_new_tokens, priority,
                                arrival_time};
             }),
             py::arg("request_id"), py::arg("prompt_len"), py::arg("max_new_tokens"),
             py::arg("priority") = 0, py::arg("arrival_time") = 0.0)
        .def_readonly("request_id", &Request::request_id)
        .def_readonly("prompt_len", &Request::prompt_len)
        .def_readonly("max_new_tokens", &Request::max_new_tokens)
        .def_readonly("priority", &Request::priority)
        .def_readonly("arrival_time", &Request::arrival_time)
        .def("__eq__", [](const Request& a, const Request& b) {
                 return std::tie(a.request_id, a.prompt_len, a.max_new_tokens, a.priority,
                                 a.arrival_time) ==
                        std::tie(b.request_id, b.prompt_len, b.max_new_tokens, b.priority,
                                 b.arrival_time);
             }, py::is_operator())
        .def("__hash__", [](const Request& r) {
            return py::hash(py::make_tuple(r.request_id, r.prompt_len, r.max_new_tokens,
                                           r.priority, r.arrival_time));
        })
        .def("__repr__", [](const Request& r) {
            return py::str("Request(request_id={!r}, prompt_len={!r}, max_new_tokens={!r}, "
                           "priority={!r}, arrival_time={!r})")
                .format(r.request_id, r.prompt_len, r.max_new_tokens, r.priority,
                        r.arrival_time);
        });

    // Batch: a dataclass to Python (keyword construction with defaults, ==, repr). A field
    // read returns a copy (a new dict or list).
    py::class_<Batch>(m, "Batch")
        .def(py::init([](std::map<std::string, int> prefill, std::vector<std::string> decode,
                         std::vector<std::string> preempted, std::vector<std::string> finished) {
                 return Batch{std::move(prefill), std::move(decode), std::move(preempted),
                              std::move(finished)};
             }),
             py::arg("prefill") = std::map<std::string, int>{},
             py::arg("decode") = std::vector<std::string>{},
             py::arg("preempted") = std::vector<std::string>{},
             py::arg("finished") = std::vector<std::string>{})
        .def_readwrite("prefill", &Batch::prefill)
        .def_readwrite("decode", &Batch::decode)
        .def_readwrite("preempted", &Batch::preempted)
        .def_readwrite("finished", &Batch::finished)
        .def("__eq__", [](const Batch& a, const Batch& b) {
                 return std::tie(a.prefill, a.decode, a.preempted, a.finished) ==
                        std::tie(b.prefill, b.decode, b.preempted, b.finished);
             }, py::is_operator())
        .def("__repr__", [](const Batch& b) {
            return py::str("Batch(prefill={!r}, decode={!r}, preempted={!r}, finished={!r})")
                .format(b.prefill, b.decode, b.preempted, b.finished);
        });

    // The GIL is released while the scheduler runs: threads really run concurrently, and
    // the scheduler's own lock is what keeps its state consistent.
    py::class_<Scheduler>(m, "Scheduler")
        .def(py::init<int, int, int, int, std::optional<int>>(),
             py::arg("max_num_batched_tokens"), py::arg("max_num_seqs"), py::arg("num_blocks"),
             py::arg("block_size"), py::arg("aging_steps") = py::none())
        .def("add_request", &Scheduler::add_request, py::arg("request"),
             py::call_guard<py::gil_scoped_release>())
        // [level 3]
        .def("abort", &Scheduler::abort, py::arg("request_id"),
             py::call_guard<py::gil_scoped_release>())
        // [/level 3]
        .def("step", &Scheduler::step, py::call_guard<py::gil_scoped_release>())
        .def("has_unfinished", &Scheduler::has_unfinished,
             py::call_guard<py::gil_scoped_release>());
}
