// torch.distributed backend "uroce": a c10d::ProcessGroup over uroce's
// collectives (include/uroce/coll.h). CPU tensors; every collective runs
// on one worker thread per process group, in the order it was called, and
// the caller gets a Work handle at once (async_op=True returns it, the
// default waits on it).
//
// Rendezvous goes through the store torch.distributed already made (no
// port of our own): each rank sets its blob under a key and reads
// everyone's. Ranks of one host talk through shared memory, the others
// RoCEv2 (uroce_coll_native_setup_fn; their address from UROCE_ADDR).
#include <torch/extension.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

extern "C" {
#include "uroce/coll.h"
}

namespace {

using c10d::ReduceOp;

uroce_coll_dtype to_dtype(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
    return UROCE_COLL_FLOAT32;
  case at::kHalf:
    return UROCE_COLL_FLOAT16;
  case at::kBFloat16:
    return UROCE_COLL_BFLOAT16;
  case at::kInt:
    return UROCE_COLL_INT32;
  case at::kLong:
    return UROCE_COLL_INT64;
  case at::kDouble:
    return UROCE_COLL_FLOAT64;
  default:
    throw std::invalid_argument(std::string("uroce: unsupported dtype ") +
                                c10::toString(t.scalar_type()));
  }
}

uroce_coll_op to_op(const ReduceOp &op) {
  switch (op) {
  case ReduceOp::SUM:
    return UROCE_COLL_SUM;
  case ReduceOp::PRODUCT:
    return UROCE_COLL_PROD;
  case ReduceOp::MIN:
    return UROCE_COLL_MIN;
  case ReduceOp::MAX:
    return UROCE_COLL_MAX;
  default:
    throw std::invalid_argument("uroce: unsupported reduce op (sum, product, "
                                "min and max are)");
  }
}

void check_cpu(const at::Tensor &t) {
  if (!t.device().is_cpu())
    throw std::invalid_argument("uroce: only CPU tensors");
  if (!t.is_contiguous())
    throw std::invalid_argument("uroce: tensors must be contiguous");
}

class WorkUroce : public c10d::Work {
public:
  WorkUroce(c10d::OpType op, std::vector<at::Tensor> out)
      : c10d::Work(-1, op), out_(std::move(out)),
        fut_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  // On the worker thread: wakes the waiters, then completes the future
  // (DDP's reducer chains its work on it).
  void finish(std::exception_ptr e) {
    {
      std::lock_guard<std::mutex> g(wm_);
      err_ = e;
      done_ = true;
      wcv_.notify_all();
    }
    if (e)
      fut_->setError(e);
    else
      fut_->markCompleted(c10::IValue(out_));
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return fut_;
  }

  bool isCompleted() override {
    std::lock_guard<std::mutex> g(wm_);
    return done_;
  }
  bool isSuccess() const override {
    std::lock_guard<std::mutex> g(wm_);
    return done_ && !err_;
  }
  std::exception_ptr exception() const override {
    std::lock_guard<std::mutex> g(wm_);
    return err_;
  }
  bool wait(std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> l(wm_);
    if (timeout == kNoTimeout) {
      wcv_.wait(l, [&] { return done_; });
    } else if (!wcv_.wait_for(l, timeout, [&] { return done_; })) {
      throw std::runtime_error("uroce: wait timed out");
    }
    if (err_)
      std::rethrow_exception(err_);
    return true;
  }
  std::vector<at::Tensor> result() override {
    return out_;
  }

private:
  std::vector<at::Tensor> out_;
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
  mutable std::mutex wm_;
  std::condition_variable wcv_;
  bool done_ = false;
  std::exception_ptr err_;
};

struct StoreCtx {
  c10::intrusive_ptr<c10d::Store> store;
  int rank, size, round;
};

int store_allgather(void *ctx, const void *blob, size_t len, void *all) {
  auto *s = static_cast<StoreCtx *>(ctx);
  try {
    std::string base = "uroce/" + std::to_string(s->round++) + "/";
    const uint8_t *b = static_cast<const uint8_t *>(blob);
    s->store->set(base + std::to_string(s->rank),
                  std::vector<uint8_t>(b, b + len));
    for (int r = 0; r < s->size; r++) {
      auto v = s->store->get(base + std::to_string(r));
      if (v.size() != len)
        return UROCE_COLL_ERR_BOOTSTRAP;
      memcpy(static_cast<char *>(all) + (size_t)r * len, v.data(), len);
    }
    return 0;
  } catch (const std::exception &e) {
    fprintf(stderr, "uroce: rendezvous through the store: %s\n", e.what());
    return UROCE_COLL_ERR_BOOTSTRAP;
  }
}

class ProcessGroupUroce : public c10d::ProcessGroup {
public:
  ProcessGroupUroce(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                    int size, std::chrono::milliseconds timeout)
      : c10d::ProcessGroup(rank, size) {
    uroce_coll_env env;
    memset(&env, 0, sizeof env);
    env.rank = rank;
    env.size = size;
    env.local_rank = -1;
    env.launcher = "torch";
    uroce_coll_native_attr attr;
    uroce_coll_native_attr_init(&attr);
    // Yield while waiting: a torch process runs more threads than its
    // rank (the interpreter, the intra-op pool spinning after each
    // parallel region), so the rank count does not say whether the cores
    // are oversubscribed. 2 ranks on 2 cores, 1 MiB all_reduce: 2.2-2.9
    // GB/s yielding, 0.4-0.5 spinning. UROCE_COLL_YIELD still overrides.
    attr.yield = 1;
    uroce_coll_config cfg;
    uroce_coll_config_init(&cfg);
    cfg.timeout_ns = (uint64_t)timeout.count() * 1000000ull;
    StoreCtx ctx{store, rank, size, 0};
    int rc = uroce_coll_native_setup_fn(&env, &attr, &cfg,
                                        (uint64_t)timeout.count() * 1000000ull,
                                        store_allgather, &ctx, &nat_, &comm_);
    if (rc < 0)
      throw std::runtime_error(std::string("uroce: setup failed: ") +
                               uroce_coll_strerror(rc));
    worker_ = std::thread([this] { run(); });
  }

  ~ProcessGroupUroce() override {
    {
      std::lock_guard<std::mutex> g(m_);
      stop_ = true;
      cv_.notify_all();
    }
    worker_.join();
    uroce_coll_comm_del(comm_);
    uroce_coll_native_del(nat_);
  }

  const std::string getBackendName() const override {
    return "uroce";
  }

  c10::intrusive_ptr<c10d::Work>
  allreduce(std::vector<at::Tensor> &ts,
            const c10d::AllreduceOptions &o) override {
    auto t = one(ts);
    auto op = to_op(o.reduceOp);
    return enqueue(c10d::OpType::ALLREDUCE, {t}, [=]() {
      run_coll(UROCE_COLL_ALLREDUCE, t.data_ptr(), t.data_ptr(), t.numel(),
               to_dtype(t), op, 0);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  broadcast(std::vector<at::Tensor> &ts,
            const c10d::BroadcastOptions &o) override {
    auto t = one(ts);
    int root = (int)o.rootRank;
    return enqueue(c10d::OpType::BROADCAST, {t}, [=]() {
      run_coll(UROCE_COLL_BROADCAST, t.data_ptr(), t.data_ptr(), t.numel(),
               to_dtype(t), UROCE_COLL_SUM, root);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &ts,
                                        const c10d::ReduceOptions &o) override {
    auto t = one(ts);
    auto op = to_op(o.reduceOp);
    int root = (int)o.rootRank;
    return enqueue(c10d::OpType::REDUCE, {t}, [=]() {
      run_coll(UROCE_COLL_REDUCE, t.data_ptr(), t.data_ptr(), t.numel(),
               to_dtype(t), op, root);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  allgather(std::vector<std::vector<at::Tensor>> &outs,
            std::vector<at::Tensor> &ins,
            const c10d::AllgatherOptions &) override {
    auto in = one(ins);
    if (outs.size() != 1 || (int)outs[0].size() != getSize())
      throw std::invalid_argument("uroce: allgather wants one list of "
                                  "world-size output tensors");
    auto outl = outs[0];
    for (auto &o : outl)
      if (o.numel() != in.numel() || o.scalar_type() != in.scalar_type())
        throw std::invalid_argument("uroce: allgather output tensors must "
                                    "match the input");
    return enqueue(c10d::OpType::ALLGATHER, outl, [=]() {
      auto flat = at::empty({(int64_t)getSize() * in.numel()}, in.options());
      run_coll(UROCE_COLL_ALLGATHER, in.data_ptr(), flat.data_ptr(), in.numel(),
               to_dtype(in), UROCE_COLL_SUM, 0);
      for (int r = 0; r < getSize(); r++)
        outl[r].view(-1).copy_(flat.narrow(0, r * in.numel(), in.numel()));
    });
  }

  c10::intrusive_ptr<c10d::Work>
  _allgather_base(at::Tensor &out, at::Tensor &in,
                  const c10d::AllgatherOptions &) override {
    check_cpu(out);
    check_cpu(in);
    if (out.numel() != in.numel() * getSize())
      throw std::invalid_argument("uroce: output must be world-size x input");
    auto o = out, i = in;
    return enqueue(c10d::OpType::_ALLGATHER_BASE, {o}, [=]() {
      run_coll(UROCE_COLL_ALLGATHER, i.data_ptr(), o.data_ptr(), i.numel(),
               to_dtype(i), UROCE_COLL_SUM, 0);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  reduce_scatter(std::vector<at::Tensor> &outs,
                 std::vector<std::vector<at::Tensor>> &ins,
                 const c10d::ReduceScatterOptions &o) override {
    auto out = one(outs);
    if (ins.size() != 1 || (int)ins[0].size() != getSize())
      throw std::invalid_argument("uroce: reduce_scatter wants one list of "
                                  "world-size input tensors");
    auto inl = ins[0];
    for (auto &i : inl)
      if (i.numel() != out.numel() || i.scalar_type() != out.scalar_type())
        throw std::invalid_argument("uroce: reduce_scatter input tensors "
                                    "must match the output");
    auto op = to_op(o.reduceOp);
    return enqueue(c10d::OpType::REDUCE_SCATTER, {out}, [=]() {
      auto flat = at::cat(flatten(inl));
      run_coll(UROCE_COLL_REDUCE_SCATTER, flat.data_ptr(), out.data_ptr(),
               out.numel(), to_dtype(out), op, 0);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                       const c10d::ReduceScatterOptions &o) override {
    check_cpu(out);
    check_cpu(in);
    if (in.numel() != out.numel() * getSize())
      throw std::invalid_argument("uroce: input must be world-size x output");
    auto op = to_op(o.reduceOp);
    auto ot = out, it = in;
    return enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {ot}, [=]() {
      run_coll(UROCE_COLL_REDUCE_SCATTER, it.data_ptr(), ot.data_ptr(),
               ot.numel(), to_dtype(ot), op, 0);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  alltoall_base(at::Tensor &out, at::Tensor &in, std::vector<int64_t> &osplit,
                std::vector<int64_t> &isplit,
                const c10d::AllToAllOptions &) override {
    check_cpu(out);
    check_cpu(in);
    auto even = [&](const std::vector<int64_t> &s, const at::Tensor &t) {
      if (s.empty())
        return true;
      for (auto v : s)
        if (v * getSize() != t.size(0))
          return false;
      return true;
    };
    if (!even(osplit, out) || !even(isplit, in) || in.numel() != out.numel() ||
        in.numel() % getSize())
      throw std::invalid_argument("uroce: all_to_all needs equal splits");
    auto ot = out, it = in;
    return enqueue(c10d::OpType::ALLTOALL_BASE, {ot}, [=]() {
      run_coll(UROCE_COLL_ALLTOALL, it.data_ptr(), ot.data_ptr(),
               it.numel() / getSize(), to_dtype(it), UROCE_COLL_SUM, 0);
    });
  }

  c10::intrusive_ptr<c10d::Work>
  alltoall(std::vector<at::Tensor> &outs, std::vector<at::Tensor> &ins,
           const c10d::AllToAllOptions &) override {
    if ((int)outs.size() != getSize() || (int)ins.size() != getSize())
      throw std::invalid_argument("uroce: all_to_all wants world-size lists");
    int64_t n = ins[0].numel();
    for (int r = 0; r < getSize(); r++)
      if (ins[r].numel() != n || outs[r].numel() != n)
        throw std::invalid_argument("uroce: all_to_all needs equal sizes");
    auto ol = outs, il = ins;
    return enqueue(c10d::OpType::ALLTOALL, ol, [=]() {
      auto flat = at::cat(flatten(il));
      auto res = at::empty_like(flat);
      run_coll(UROCE_COLL_ALLTOALL, flat.data_ptr(), res.data_ptr(), n,
               to_dtype(flat), UROCE_COLL_SUM, 0);
      for (int r = 0; r < getSize(); r++)
        ol[r].view(-1).copy_(res.narrow(0, r * n, n));
    });
  }

  c10::intrusive_ptr<c10d::Work>
  barrier(const c10d::BarrierOptions &) override {
    return enqueue(c10d::OpType::BARRIER, {}, [=]() {
      int32_t x = 0;
      run_coll(UROCE_COLL_ALLREDUCE, &x, &x, 1, UROCE_COLL_INT32,
               UROCE_COLL_SUM, 0);
    });
  }

  static c10::intrusive_ptr<ProcessGroupUroce>
  create(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
         int64_t timeout_ms) {
    return c10::make_intrusive<ProcessGroupUroce>(
        store, rank, size, std::chrono::milliseconds(timeout_ms));
  }

private:
  static std::vector<at::Tensor> flatten(const std::vector<at::Tensor> &l) {
    std::vector<at::Tensor> f;
    for (auto &t : l)
      f.push_back(t.contiguous().view(-1));
    return f;
  }

  at::Tensor one(std::vector<at::Tensor> &ts) {
    if (ts.size() != 1)
      throw std::invalid_argument("uroce: one tensor per call");
    check_cpu(ts[0]);
    to_dtype(ts[0]);
    return ts[0];
  }

  void run_coll(uroce_coll_kind kind, const void *send, void *recv,
                size_t count, uroce_coll_dtype dt, uroce_coll_op op, int root) {
    uroce_coll_req *req;
    int rc = uroce_coll_start(comm_, kind, send, recv, count, dt, op, root,
                              UROCE_COLL_ALGO_AUTO, &req);
    if (rc == 0)
      rc = uroce_coll_wait(req, UINT64_MAX);
    if (rc < 0)
      throw std::runtime_error(
          std::string("uroce: ") + uroce_coll_kind_name(kind) + ": " +
          uroce_coll_strerror(rc) + ": " + uroce_coll_errmsg(comm_));
  }

  using Job = std::pair<c10::intrusive_ptr<WorkUroce>, std::function<void()>>;

  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType op,
                                         std::vector<at::Tensor> out,
                                         std::function<void()> fn) {
    auto w = c10::make_intrusive<WorkUroce>(op, std::move(out));
    std::lock_guard<std::mutex> g(m_);
    q_.emplace_back(w, std::move(fn));
    cv_.notify_all();
    return w;
  }

  void run() {
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return stop_ || !q_.empty(); });
        if (q_.empty())
          return;
        j = std::move(q_.front());
        q_.pop_front();
      }
      std::exception_ptr e;
      try {
        j.second();
      } catch (...) {
        e = std::current_exception();
      }
      j.first->finish(e);
    }
  }

  uroce_coll_native *nat_ = nullptr;
  uroce_coll_comm *comm_ = nullptr;
  std::thread worker_;
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Job> q_;
  bool stop_ = false;
};

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<ProcessGroupUroce, c10d::ProcessGroup,
             c10::intrusive_ptr<ProcessGroupUroce>>(m, "ProcessGroupUroce")
      .def(py::init(&ProcessGroupUroce::create),
           py::call_guard<py::gil_scoped_release>());
}
