// Buggy scheduler (post-increment in the finish test): the C++ reference with one mistake.
//
// apply() tests `seq->num_decoded_tokens++ == max_new_tokens`: the post-increment compares
// the count before this decode, so every request finishes one decode late.

#include <algorithm>
#include <functional>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
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

// The scheduler's state of one request.
struct Seq {
    Request request;
    int num_computed_tokens = 0;  // prompt tokens computed
    int num_decoded_tokens = 0;   // decode steps done
    int num_blocks = 0;           // KV blocks held
    bool running = false;
    std::int64_t entered_waiting_at = 0;  // steps applied when it (re)entered the waiting queue

    int num_slots() const { return num_computed_tokens + num_decoded_tokens; }
    bool prompt_done() const { return num_computed_tokens == request.prompt_len; }
    int num_remaining_prompt() const { return request.prompt_len - num_computed_tokens; }
};

// Base urgency, smallest first. The key never changes while a Seq is in a set.
struct ByUrgency {
    bool operator()(const Seq* a, const Seq* b) const {
        const Request& x = a->request;
        const Request& y = b->request;
        return std::tie(x.priority, x.arrival_time, x.request_id) <
               std::tie(y.priority, y.arrival_time, y.request_id);
    }
};

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

}  // namespace

// Plans model iterations over a fixed pool of KV blocks.
//
// Invariants (between calls):
//   * every request id ever accepted is in seen_ids_; a live one (waiting or running) is in
//     live_ and in exactly one of waiting_, running_;
//   * num_free_blocks_ + the blocks held by running requests == num_blocks_; a waiting
//     request holds no blocks and has no progress;
//   * running_.size() <= max_num_seqs_;
//   * a running request holds exactly ceil(slots / block_size) blocks.
// Every public method takes mutex_, so add_request and abort may come from any thread.
class Scheduler {
public:
    Scheduler(int max_num_batched_tokens, int max_num_seqs, int num_blocks, int block_size,
              std::optional<int> aging_steps = std::nullopt)
        : max_num_batched_tokens_(max_num_batched_tokens),
          max_num_seqs_(max_num_seqs),
          num_blocks_(num_blocks),
          block_size_(block_size),
          aging_steps_(aging_steps),
          num_free_blocks_(num_blocks) {
        const std::pair<const char*, int> counts[] = {
            {"max_num_batched_tokens", max_num_batched_tokens}, {"max_num_seqs", max_num_seqs},
            {"num_blocks", num_blocks}, {"block_size", block_size}};
        for (const auto& [name, value] : counts) {
            if (value < 1) {
                throw std::invalid_argument(std::string(name) + " must be >= 1, got " +
                                            std::to_string(value));
            }
        }
        if (aging_steps && *aging_steps < 1) {
            throw std::invalid_argument("aging_steps must be None or >= 1, got " +
                                        std::to_string(*aging_steps));
        }
    }

    // Queue a request. ValueError for a seen id, bad fields, or one that never fits.
    void add_request(const Request& request) {
        std::lock_guard<std::mutex> guard(mutex_);
        const std::string& rid = request.request_id;
        if (seen_ids_.count(rid)) {
            throw std::invalid_argument("request id '" + rid + "' was already used");
        }
        if (request.prompt_len < 1 || request.max_new_tokens < 1) {
            throw std::invalid_argument("prompt_len and max_new_tokens must be >= 1");
        }
        std::int64_t num_slots = std::int64_t{request.prompt_len} + request.max_new_tokens;
        if (ceil_div(num_slots, block_size_) > num_blocks_) {
            throw std::invalid_argument("request '" + rid + "' needs more than " +
                                        std::to_string(num_blocks_) +
                                        " blocks and could never run");
        }
        seen_ids_.insert(rid);
        Seq& seq = live_[rid];  // unordered_map nodes never move: Seq* stay valid
        seq.request = request;
        seq.entered_waiting_at = num_steps_;
        waiting_.insert(&seq);
    }

    // Drop a waiting or running request and free its blocks; KeyError if it is not live.
    void abort(const std::string& request_id) {
        std::lock_guard<std::mutex> guard(mutex_);
        auto it = live_.find(request_id);
        if (it == live_.end()) {
            throw KeyError(request_id);
        }
        Seq& seq = it->second;
        if (seq.running) {
            running_.erase(&seq);
            num_free_blocks_ += seq.num_blocks;
        } else {
            waiting_.erase(&seq);
        }
        live_.erase(it);
    }

    bool has_unfinished() const {
        std::lock_guard<std::mutex> guard(mutex_);
        return !live_.empty();
    }

    // Plan one model iteration and apply it.
    Batch step() {
        std::lock_guard<std::mutex> guard(mutex_);
        Plan plan;
        plan.budget_left = max_num_batched_tokens_;
        schedule_running(plan, /*decodes=*/true);
        schedule_running(plan, /*decodes=*/false);
        if (plan.preempted.empty()) {
            admit_waiting(plan);
        }
        return apply(plan);
    }

private:
    // The step being planned: tokens granted so far and the budget left.
    struct Plan {
        int budget_left = 0;
        std::vector<std::pair<Seq*, int>> prefill;  // (request, chunk) in grant order
        std::vector<Seq*> decode;                   // urgency order
        std::vector<Seq*> preempted;                // order of preemption

        void refund(const Seq* seq) {
            auto chunk = std::find_if(prefill.begin(), prefill.end(),
                                      [seq](const auto& grant) { return grant.first == seq; });
            if (chunk != prefill.end()) {
                budget_left += chunk->second;
                prefill.erase(chunk);
            } else if (auto token = std::find(decode.begin(), decode.end(), seq);
                       token != decode.end()) {
                decode.erase(token);
                budget_left += 1;
            }
        }
    };

    // Phase 1a (decodes) or 1b (chunks for incomplete prompts), most urgent first. A
    // snapshot: preemption moves requests out of running_ while we walk it.
    void schedule_running(Plan& plan, bool decodes) {
        const std::vector<Seq*> in_order(running_.begin(), running_.end());
        for (Seq* seq : in_order) {
            if (plan.budget_left == 0) {
                return;
            }
            if (seq->running && seq->prompt_done() == decodes) {
                grant(plan, *seq, decodes);
            }
        }
    }

    // Give `seq` its tokens, preempting the least urgent running request while its blocks
    // are not free; stops when `seq` itself is the one preempted.
    void grant(Plan& plan, Seq& seq, bool is_decode) {
        while (true) {
            // Recomputed on every try: a refunded victim can enlarge the chunk.
            int num_tokens = is_decode ? 1 : std::min(seq.num_remaining_prompt(), plan.budget_left);
            if (try_allocate(seq, seq.num_slots() + num_tokens)) {
                if (is_decode) {
                    plan.decode.push_back(&seq);
                } else {
                    plan.prefill.emplace_back(&seq, num_tokens);
                }
                plan.budget_left -= num_tokens;
                return;
            }
            Seq* victim = *running_.rbegin();
            preempt(plan, *victim);
            if (victim == &seq) {
                return;
            }
        }
    }

    // Phase 2: admit waiting requests in urgency order; the first misfit ends it.
    void admit_waiting(Plan& plan) {
        if (static_cast<int>(running_.size()) >= max_num_seqs_ || plan.budget_left == 0) {
            return;  // nothing to admit: skip ordering the queue
        }
        std::vector<Seq*> queue(waiting_.begin(), waiting_.end());  // base urgency order
        if (aging_steps_) {
            std::sort(queue.begin(), queue.end(), [this](const Seq* a, const Seq* b) {
                return std::make_tuple(effective_priority(*a), a->request.arrival_time,
                                       std::cref(a->request.request_id)) <
                       std::make_tuple(effective_priority(*b), b->request.arrival_time,
                                       std::cref(b->request.request_id));
            });
        }
        for (Seq* seq : queue) {
            if (static_cast<int>(running_.size()) >= max_num_seqs_ || plan.budget_left == 0) {
                return;
            }
            int num_tokens = std::min(seq->request.prompt_len, plan.budget_left);
            if (!try_allocate(*seq, num_tokens)) {
                return;  // no less urgent request jumps ahead
            }
            waiting_.erase(seq);
            seq->running = true;
            running_.insert(seq);
            plan.prefill.emplace_back(seq, num_tokens);
            plan.budget_left -= num_tokens;
        }
    }

    // A waiting request's priority minus one per full aging_steps steps waited (no floor).
    // The wait is counted from num_steps_, not stored per request: aging every waiting
    // request at each step would make step() linear in the queue even with no free seat.
    std::int64_t effective_priority(const Seq& seq) const {
        std::int64_t num_wait_steps = num_steps_ - seq.entered_waiting_at;
        return seq.request.priority - num_wait_steps / *aging_steps_;
    }

    // Grow `seq` to hold `num_slots` slots if the blocks are free.
    bool try_allocate(Seq& seq, int num_slots) {
        int num_new_blocks = static_cast<int>(ceil_div(num_slots, block_size_)) - seq.num_blocks;
        if (num_new_blocks > num_free_blocks_) {
            return false;
        }
        num_new_blocks = std::max(num_new_blocks, 0);
        num_free_blocks_ -= num_new_blocks;
        seq.num_blocks += num_new_blocks;
        return true;
    }

    // Recompute preemption: free the blocks, forget progress, back to waiting.
    void preempt(Plan& plan, Seq& seq) {
        running_.erase(&seq);
        plan.refund(&seq);
        num_free_blocks_ += seq.num_blocks;
        seq.num_blocks = seq.num_computed_tokens = seq.num_decoded_tokens = 0;
        seq.running = false;
        seq.entered_waiting_at = num_steps_;  // this step counts as one waited
        waiting_.insert(&seq);
        plan.preempted.push_back(&seq);
    }

    // Advance progress, free finished requests, count the step (the waiting queue ages).
    Batch apply(const Plan& plan) {
        Batch batch;
        for (const auto& [seq, num_tokens] : plan.prefill) {
            seq->num_computed_tokens += num_tokens;
            batch.prefill[seq->request.request_id] = num_tokens;
        }
        std::vector<Seq*> finished;
        for (Seq* seq : plan.decode) {
            batch.decode.push_back(seq->request.request_id);
            if (seq->num_decoded_tokens++ == seq->request.max_new_tokens) {  // BUG: count before
                finished.push_back(seq);
            }
        }
        for (const Seq* seq : plan.preempted) {
            batch.preempted.push_back(seq->request.request_id);
        }
        for (Seq* seq : finished) {
            batch.finished.push_back(seq->request.request_id);
            running_.erase(seq);
            num_free_blocks_ += seq->num_blocks;
            live_.erase(seq->request.request_id);  // destroys *seq: last use
        }
        ++num_steps_;
        return batch;
    }

    const int max_num_batched_tokens_;
    const int max_num_seqs_;
    const int num_blocks_;
    const int block_size_;
    const std::optional<int> aging_steps_;

    mutable std::mutex mutex_;
    int num_free_blocks_;
    std::int64_t num_steps_ = 0;                   // steps applied so far
    std::unordered_map<std::string, Seq> live_;    // waiting or running, by id
    std::set<Seq*, ByUrgency> waiting_;            // base urgency order
    std::set<Seq*, ByUrgency> running_;            // base urgency: rbegin() is the victim
    std::unordered_set<std::string> seen_ids_;     // accepted ever (finished, aborted too)
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
