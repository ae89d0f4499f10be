// Correct scheduler (sorted vectors and a block table): the C++ reference's behaviour with
// another design.
//
// Physical block ids on a free stack and a block table per request (not a count); the
// running requests in a std::vector kept sorted by urgency (the victim is its back());
// requests owned by std::unique_ptr in one table, waiting or running by a state flag; a wait
// count per request, incremented at the end of every step (as the Python reference does); a
// step planned as a list of grants and the Batch built at the end; std::scoped_lock.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
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

// An inference request (immutable from Python). Lower `priority` is more urgent.
struct Request {
    std::string request_id;
    int prompt_len = 0;       // >= 1
    int max_new_tokens = 0;   // >= 1
    int priority = 0;
    double arrival_time = 0.0;
};

// What one step ran.
struct Batch {
    std::map<std::string, int> prefill;   // request_id -> prompt tokens this step (a dict)
    std::vector<std::string> decode;      // urgency order
    std::vector<std::string> preempted;   // order of preemption
    std::vector<std::string> finished;    // urgency order
};

namespace {

enum class State { kWaiting, kRunning };

struct Seq {
    Request request;
    State state = State::kWaiting;
    int num_prompt_done = 0;
    int num_generated = 0;
    int num_wait_steps = 0;          // steps ended in the waiting queue since it entered it
    std::vector<int> block_table;    // physical block ids, in slot order

    int num_slots() const { return num_prompt_done + num_generated; }
};

bool base_less(const Seq* a, const Seq* b) {
    return std::tie(a->request.priority, a->request.arrival_time, a->request.request_id) <
           std::tie(b->request.priority, b->request.arrival_time, b->request.request_id);
}

// One grant of the step being planned.
struct Grant {
    Seq* seq;
    bool is_decode;
    int num_tokens;
};

}  // namespace

// Invariants: free_block_ids_ plus every running request's block table is a partition of
// 0..num_blocks-1; a waiting request holds no block and has no progress; running_ is sorted
// by base urgency (its back() is the victim); requests_ owns every live request.
class Scheduler {
public:
    Scheduler(int max_num_batched_tokens, int max_num_seqs, int num_blocks, int block_size,
              std::optional<int> aging_steps = std::nullopt)
        : token_budget_(max_num_batched_tokens), max_running_(max_num_seqs),
          block_size_(block_size), aging_steps_(aging_steps.value_or(0)) {
        if (max_num_batched_tokens < 1 || max_num_seqs < 1 || num_blocks < 1 || block_size < 1) {
            throw std::invalid_argument("every count must be >= 1");
        }
        if (aging_steps && *aging_steps < 1) {
            throw std::invalid_argument("aging_steps must be None or >= 1");
        }
        free_block_ids_.reserve(num_blocks);
        for (int id = num_blocks - 1; id >= 0; --id) {
            free_block_ids_.push_back(id);  // a stack: block 0 handed out first
        }
        num_blocks_ = num_blocks;
    }

    void add_request(const Request& request) {
        std::scoped_lock lock(mutex_);
        if (used_ids_.count(request.request_id) != 0) {
            throw std::invalid_argument("request id already used: " + request.request_id);
        }
        if (request.prompt_len < 1 || request.max_new_tokens < 1) {
            throw std::invalid_argument("prompt_len and max_new_tokens must be >= 1");
        }
        const std::int64_t total = std::int64_t{request.prompt_len} + request.max_new_tokens;
        if ((total + block_size_ - 1) / block_size_ > num_blocks_) {
            throw std::invalid_argument("request can never fit: " + request.request_id);
        }
        auto seq = std::make_unique<Seq>();
        seq->request = request;
        used_ids_.insert(request.request_id);
        requests_.emplace(request.request_id, std::move(seq));
    }

    void abort(const std::string& request_id) {
        std::scoped_lock lock(mutex_);
        auto found = requests_.find(request_id);
        if (found == requests_.end()) {
            throw KeyError(request_id);
        }
        Seq* seq = found->second.get();
        if (seq->state == State::kRunning) {
            release_blocks(*seq);
            running_.erase(std::find(running_.begin(), running_.end(), seq));
        }
        requests_.erase(found);
    }

    bool has_unfinished() const {
        std::scoped_lock lock(mutex_);
        return !requests_.empty();
    }

    Batch step() {
        std::scoped_lock lock(mutex_);
        std::vector<Grant> grants;
        std::vector<std::string> preempted;
        int budget = token_budget_;
        for (bool decodes : {true, false}) {
            std::vector<Seq*> order = running_;  // a copy: preemption edits running_
            for (Seq* seq : order) {
                if (budget == 0) break;
                bool prompt_done = seq->num_prompt_done == seq->request.prompt_len;
                if (seq->state == State::kRunning && prompt_done == decodes) {
                    serve(*seq, decodes, budget, grants, preempted);
                }
            }
        }
        if (preempted.empty()) {
            admit(budget, grants);
        }
        return apply(grants, std::move(preempted));
    }

private:
    // Give `seq` its grant, preempting from the back of running_ until its blocks fit.
    void serve(Seq& seq, bool is_decode, int& budget, std::vector<Grant>& grants,
               std::vector<std::string>& preempted) {
        for (;;) {
            int prompt_left = seq.request.prompt_len - seq.num_prompt_done;
            int num_tokens = is_decode ? 1 : std::min(prompt_left, budget);
            if (grow(seq, seq.num_slots() + num_tokens)) {
                grants.push_back({&seq, is_decode, num_tokens});
                budget -= num_tokens;
                return;
            }
            Seq* victim = running_.back();
            running_.pop_back();
            auto mine = std::find_if(grants.begin(), grants.end(),
                                     [victim](const Grant& g) { return g.seq == victim; });
            if (mine != grants.end()) {
                budget += mine->num_tokens;
                grants.erase(mine);
            }
            release_blocks(*victim);
            victim->state = State::kWaiting;
            victim->num_prompt_done = victim->num_generated = victim->num_wait_steps = 0;
            preempted.push_back(victim->request.request_id);
            if (victim == &seq) return;
        }
    }

    void admit(int& budget, std::vector<Grant>& grants) {
        if (static_cast<int>(running_.size()) >= max_running_ || budget == 0) return;
        std::vector<Seq*> queue;
        for (auto& [id, seq] : requests_) {
            if (seq->state == State::kWaiting) queue.push_back(seq.get());
        }
        auto key = [this](const Seq* s) {
            int boost = aging_steps_ > 0 ? s->num_wait_steps / aging_steps_ : 0;
            return std::make_tuple(s->request.priority - boost, s->request.arrival_time,
                                   std::cref(s->request.request_id));
        };
        std::sort(queue.begin(), queue.end(),
                  [&key](const Seq* a, const Seq* b) { return key(a) < key(b); });
        for (Seq* seq : queue) {
            if (static_cast<int>(running_.size()) >= max_running_ || budget == 0) return;
            int num_tokens = std::min(seq->request.prompt_len, budget);
            if (!grow(*seq, num_tokens)) return;
            seq->state = State::kRunning;
            auto place = std::upper_bound(running_.begin(), running_.end(), seq, base_less);
            running_.insert(place, seq);
            grants.push_back({seq, false, num_tokens});
            budget -= num_tokens;
        }
    }

    // Take blocks from the free stack until `seq` covers `num_slots` slots, or change nothing.
    bool grow(Seq& seq, int num_slots) {
        std::size_t need = static_cast<std::size_t>((num_slots + block_size_ - 1) / block_size_);
        if (need <= seq.block_table.size()) return true;
        std::size_t extra = need - seq.block_table.size();
        if (extra > free_block_ids_.size()) return false;
        for (std::size_t i = 0; i < extra; ++i) {
            seq.block_table.push_back(free_block_ids_.back());
            free_block_ids_.pop_back();
        }
        return true;
    }

    void release_blocks(Seq& seq) {
        const auto& table = seq.block_table;
        free_block_ids_.insert(free_block_ids_.end(), table.rbegin(), table.rend());
        seq.block_table.clear();
    }

    Batch apply(const std::vector<Grant>& grants, std::vector<std::string> preempted) {
        Batch batch;
        batch.preempted = std::move(preempted);
        std::vector<Seq*> done;
        for (const Grant& g : grants) {
            if (g.is_decode) {
                batch.decode.push_back(g.seq->request.request_id);
                if (++g.seq->num_generated == g.seq->request.max_new_tokens) done.push_back(g.seq);
            } else {
                batch.prefill.emplace(g.seq->request.request_id, g.num_tokens);
                g.seq->num_prompt_done += g.num_tokens;
            }
        }
        for (Seq* seq : done) {  // decodes were granted in urgency order
            batch.finished.push_back(seq->request.request_id);
            release_blocks(*seq);
            running_.erase(std::find(running_.begin(), running_.end(), seq));
            requests_.erase(requests_.find(seq->request.request_id));  // destroys *seq
        }
        for (auto& [id, seq] : requests_) {
            if (seq->state == State::kWaiting) ++seq->num_wait_steps;
        }
        return batch;
    }

    const int token_budget_;
    const int max_running_;
    const int block_size_;
    const int aging_steps_;  // 0: no aging
    int num_blocks_ = 0;

    mutable std::mutex mutex_;
    std::vector<int> free_block_ids_;
    std::vector<Seq*> running_;  // sorted by base urgency
    std::unordered_map<std::string, std::unique_ptr<Seq>> requests_;  // waiting or running
    std::unordered_set<std::string> used_ids_;
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
