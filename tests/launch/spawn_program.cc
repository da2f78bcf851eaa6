// A program that spawns its own ranks with ringtorch::spawn(), one scenario per run, for
// tests/launch/spawn_test.cc (each scenario needs a fresh program: the children re-run main()).
//
//   spawn_program allreduce N        N ranks all-reduce rank+1 and check the sum
//   spawn_program throw              rank 1 throws; rank 0 waits to be stopped
//   spawn_program abort              rank 0 calls abort(); rank 1 waits to be stopped
//   spawn_program abort_in_allreduce rank 0 aborts while rank 1 waits for it in an all-reduce
//   spawn_program hang PIDFILE       rank 1 exits 7 once rank 2 ignores SIGTERM; 0 and 2 hang
//   spawn_program orphans PIDFILE    join=false, children sleep; the parent sleeps too
//   spawn_program interrupt PIDFILE  join=true, children sleep and note the signal they get
//   spawn_program site_mismatch      the children reach a spawn() call at another line
//   spawn_program nested             fn calls spawn()
//   spawn_program join_timeout       join=false; join(50 ms) then join()
//   spawn_program not_reached        the children take another path and never reach spawn()
//   spawn_program two_calls          spawn() twice; children of the second skip the first
//   spawn_program after_thread_pool  the parent uses LibTorch's intra-op pool, then spawns
//   spawn_program openblas_kernels   one rank prints its OPENBLAS_CORETYPE and the kernels OpenBLAS runs
//   spawn_program print_then_wait    prints a line without flushing, then sleeps 60 s (no spawn)
//
// The parent prints "caught: ..." and exits 3 when spawn() throws.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <ringtorch/error.h>
#include <ringtorch/process_group.h>
#include <ringtorch/rendezvous.h>
#include <ringtorch/spawn.h>

#include "base/openblas.h"

namespace {

using ringtorch::SpawnOptions;

void sleep_seconds(double s) { std::this_thread::sleep_for(std::chrono::duration<double>(s)); }

void write_pids(const std::string& path, const ringtorch::SpawnContext& context) {
  std::ofstream out(path + ".tmp");
  for (pid_t pid : context.pids()) out << pid << "\n";
  out.close();
  std::rename((path + ".tmp").c_str(), path.c_str());
}

void allreduce_ranks(int rank) {
  auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
  at::Tensor t = at::full({4}, rank + 1, at::kFloat);
  group->allreduce(t);
  const int n = group->size();
  const float expected = n * (n + 1) / 2.0f;
  if (t[0].item<float>() != expected) {
    throw ringtorch::MismatchError("allreduce gave " + std::to_string(t[0].item<float>()));
  }
  std::printf("rank %d of %d: allreduce sum %g\n", rank, n, expected);
}

int run(int argc, char** argv) {
  if (argc < 2) return 2;
  const std::string scenario = argv[1];
  const std::string arg = argc > 2 ? argv[2] : "";
  SpawnOptions options;
  if (scenario == "allreduce") {
    options.nprocs = std::atoi(arg.c_str());
    auto context = ringtorch::spawn(allreduce_ranks, options);
    std::printf("parent: %d ranks joined:", context->nprocs());
    for (const auto& status : context->exit_statuses()) std::printf(" %s", status->describe().c_str());
    std::printf("\n");
  } else if (scenario == "throw") {
    options.nprocs = 2;
    ringtorch::spawn(
        [](int rank) {
          if (rank == 1) throw ringtorch::InvalidArgumentError("rank 1 gives up on purpose");
          sleep_seconds(60);
        },
        options);
  } else if (scenario == "abort") {
    options.nprocs = 2;
    ringtorch::spawn(
        [](int rank) {
          if (rank == 0) std::abort();
          sleep_seconds(60);
        },
        options);
  } else if (scenario == "abort_in_allreduce") {
    options.nprocs = 2;
    ringtorch::spawn(
        [](int rank) {
          auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
          if (rank == 0) std::abort();
          at::Tensor t = at::ones({4});
          group->allreduce(t);  // PeerLostError: rank 0 is gone
        },
        options);
  } else if (scenario == "hang") {
    options.nprocs = 3;
    options.term_timeout = std::chrono::milliseconds(500);
    options.join = false;
    const std::string ignoring = arg + ".rank2_ignores_sigterm";
    auto context = ringtorch::spawn(
        [&](int rank) {
          if (rank == 1) {
            while (::access(ignoring.c_str(), F_OK) != 0) sleep_seconds(0.01);
            std::exit(7);
          }
          if (rank == 2) {
            ::signal(SIGTERM, SIG_IGN);  // only SIGKILL ends it
            std::ofstream(ignoring).close();
          }
          sleep_seconds(600);
        },
        options);
    write_pids(arg, *context);
    try {
      context->join();
    } catch (const ringtorch::ProcessFailedError&) {
      std::printf("parent: ranks ended with");
      for (const auto& status : context->exit_statuses()) std::printf(" [%s]", status->describe().c_str());
      std::printf("\n");
      throw;
    }
  } else if (scenario == "orphans" || scenario == "interrupt") {
    options.nprocs = 2;
    options.join = false;
    const std::string noted = arg + ".signal";
    auto context = ringtorch::spawn(
        [&](int rank) {
          static std::string path;  // for the handler: built before it can run
          path = noted + std::to_string(rank);
          ::signal(SIGINT, [](int sig) {
            const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            const char* name = sig == SIGINT ? "SIGINT\n" : "other\n";
            (void)!::write(fd, name, std::strlen(name));
            ::_exit(128 + sig);
          });
          std::ofstream(path + ".ready").close();
          sleep_seconds(600);
        },
        options);
    write_pids(arg, *context);
    if (scenario == "orphans") sleep_seconds(600);
    context->join();
  } else if (scenario == "site_mismatch") {
    options.nprocs = 2;
    if (ringtorch::in_spawned_child()) {
      ringtorch::spawn([](int) {}, options);  // what the documentation says not to do
    } else {
      ringtorch::spawn([](int) {}, options);
    }
  } else if (scenario == "nested") {
    options.nprocs = 2;
    ringtorch::spawn([&](int) { ringtorch::spawn([](int) {}, options); }, options);
  } else if (scenario == "join_timeout") {
    options.nprocs = 2;
    options.join = false;
    auto context = ringtorch::spawn([](int) { sleep_seconds(1.5); }, options);
    const bool first = context->join(std::chrono::milliseconds(50));
    const bool second = context->join();
    std::printf("parent: join(50 ms) %s, join() %s, exit codes %d %d\n", first ? "true" : "false",
                second ? "true" : "false", context->exit_statuses()[0]->code, context->exit_statuses()[1]->code);
  } else if (scenario == "not_reached") {
    if (std::getenv("SPAWN_PROGRAM_CHILD")) return 0;  // a child that takes another path
    options.nprocs = 2;
    options.env["SPAWN_PROGRAM_CHILD"] = "1";
    ringtorch::spawn([](int) {}, options);
  } else if (scenario == "two_calls") {
    options.nprocs = 2;
    ringtorch::spawn([](int rank) { std::printf("first call, rank %d\n", rank); }, options);
    std::printf("between the calls\n");
    std::fflush(stdout);
    ringtorch::spawn([](int rank) { std::printf("second call, rank %d\n", rank); }, options);
  } else if (scenario == "openblas_kernels") {
    options.nprocs = 1;
    ringtorch::spawn(
        [](int rank) {
          const char* coretype = std::getenv("OPENBLAS_CORETYPE");
          std::printf("rank %d: OPENBLAS_CORETYPE=[%s], runs [%s]\n", rank, coretype ? coretype : "(unset)",
                      ringtorch::openblas_kernels().loaded.c_str());
        },
        options);
  } else if (scenario == "print_then_wait") {
    // No flush: the line reaches a pipe at once only if stdout is line-buffered.
    std::printf("a line before waiting\n");
    sleep_seconds(60);
  } else if (scenario == "after_thread_pool") {
    // The parent's intra-op pool has threads now; a fork() without exec would copy none of them.
    at::set_num_threads(2);
    at::Tensor a = at::rand({256, 256});
    at::parallel_for(0, 1 << 16, 1, [](int64_t, int64_t) {});
    const double parent_sum = at::mm(a, a).sum().item<double>();
    options.nprocs = 2;
    ringtorch::spawn(
        [&](int rank) {
          at::set_num_threads(2);
          at::parallel_for(0, 1 << 16, 1, [](int64_t, int64_t) {});
          at::Tensor b = at::rand({256, 256});
          std::printf("rank %d: matmul on %d intra-op threads: %s\n", rank, at::get_num_threads(),
                      at::mm(b, b).sum().item<double>() > 0 ? "ok" : "wrong");
          allreduce_ranks(rank);
        },
        options);
    std::printf("parent: matmul before spawn %s, children joined\n", parent_sum > 0 ? "ok" : "wrong");
  } else {
    return 2;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const ringtorch::ProcessFailedError& e) {
    std::printf("caught: rank %d, %s, kind %s: %s\n", e.rank, e.status.describe().c_str(),
                ringtorch::error_kind_name(e.kind()), e.what());
    std::printf("child message: %s\n", e.child_message.c_str());
    return 3;
  } catch (const std::exception& e) {
    std::printf("caught: %s\n", e.what());
    return 4;
  }
}
