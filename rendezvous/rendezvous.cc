#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <ringtorch/error.h>
#include <ringtorch/join.h>
#include <ringtorch/rendezvous.h>

#include "rendezvous/init_method.h"
#include "rendezvous/store_factory.h"

namespace ringtorch {
namespace {

struct Identity {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
};

Identity resolve_identity(const RendezvousOptions& o, const InitMethod& m, const JobEnvironment& job) {
  Identity id;
  std::optional<int> rank = o.rank ? o.rank : m.rank ? m.rank : job.rank;
  std::optional<int> world = o.world_size ? o.world_size : m.world_size ? m.world_size : job.world_size;
  const std::string where = m.text;
  if (!rank || !world) {
    throw InvalidArgumentError(
        str_cat("init method '", where, "': ", !rank ? "the rank" : "the world size",
                " is unknown; set RANK and WORLD_SIZE (or launch with ringrun / torchrun / srun / mpirun), "
                "or pass ?rank=R&world_size=N in the URL"));
  }
  if (*world < 1)
    throw InvalidArgumentError(str_cat("init method '", where, "': world size ", *world, " must be >= 1"));
  if (*rank < 0 || *rank >= *world) {
    throw InvalidArgumentError(str_cat("init method '", where, "': rank ", *rank, " is outside [0, ", *world,
                                       ") for world size ", *world, "; ranks run from 0 to world size - 1"));
  }
  id.rank = *rank;
  id.world_size = *world;
  id.local_rank = job.local_rank.value_or(0);
  id.local_world_size = job.local_world_size.value_or(1);
  if (id.local_rank >= id.local_world_size && job.local_world_size) {
    throw InvalidArgumentError(str_cat("LOCAL_RANK ", id.local_rank, " is outside [0, ", id.local_world_size,
                                       ") for LOCAL_WORLD_SIZE ", id.local_world_size));
  }
  return id;
}

// env:// names no store itself: turn it into the store URL the variables describe.
InitMethod resolve_env_store(const InitMethod& m, const JobEnvironment& job, bool* host_tcp) {
  if (job.rdzv_endpoint) {
    InitMethod store = parse_init_method(*job.rdzv_endpoint);
    if (store.scheme == InitScheme::kEnv) {
      throw InvalidArgumentError("RINGTORCH_RDZV_ENDPOINT=env:// is circular; give a tcp://, file:// or redis:// URL");
    }
    *host_tcp = false;  // the launcher on node 0 hosts a tcp:// endpoint
    return store;
  }
  if (!job.master_addr || !job.master_port) {
    throw InvalidArgumentError(str_cat("init method '", m.text, "': ", !job.master_addr ? "MASTER_ADDR" : "MASTER_PORT",
                                       " is not set; set MASTER_ADDR and MASTER_PORT to the address and a free port "
                                       "of rank 0's machine (ringrun and torchrun set them)"));
  }
  InitMethod store;
  store.scheme = InitScheme::kTcp;
  store.host = *job.master_addr;
  store.port = *job.master_port;
  store.text = str_cat("tcp://", store.host, ":", store.port);
  *host_tcp = !job.agent_store;  // rank 0 decides below
  return store;
}

}  // namespace

std::string Rendezvous::key_prefix() const { return str_cat(run_id, "/", restart, "/", round, "/"); }

std::string Rendezvous::describe() const { return str_cat("[rank ", rank, "/", world_size, "] "); }

Rendezvous rendezvous(const RendezvousOptions& options) {
  const JobEnvironment job = read_job_environment(options.env);
  const InitMethod method = parse_init_method(options.init_method);
  const Identity id = resolve_identity(options, method, job);

  Rendezvous r;
  r.rank = id.rank;
  r.world_size = id.world_size;
  r.local_rank = id.local_rank;
  r.local_world_size = id.local_world_size;
  r.init_method = method.text;
  r.run_id = options.run_id.value_or(job.run_id.value_or("ringtorch"));
  if (r.run_id.empty() || r.run_id.find('/') != std::string::npos) {
    throw InvalidArgumentError("run id '" + r.run_id + "' must be non-empty and contain no '/'");
  }
  r.restart = job.restart_count;
  r.timeout = options.timeout  ? *options.timeout
              : method.timeout ? *method.timeout
                               : job.timeout.value_or(kDefaultTimeout);

  StoreRequest request;
  request.timeout = r.timeout;
  request.context = r.describe();
  if (method.scheme == InitScheme::kEnv) {
    bool may_host = false;
    request.method = resolve_env_store(method, job, &may_host);
    request.host_tcp_server = may_host && r.rank == 0;
  } else {
    request.method = method;
    request.host_tcp_server = method.scheme == InitScheme::kTcp && r.rank == 0;
  }
  r.master_addr = request.method.host;

  auto base = open_store(request);
  MemberContext who{r.rank, r.world_size, "rank", "rendezvous via " + request.method.text};
  auto scope = c10::make_intrusive<c10d::PrefixStore>(str_cat(r.run_id, "/", r.restart), base);
  r.round = join_round(*scope, who, r.timeout);
  r.job_store = c10::make_intrusive<c10d::PrefixStore>(str_cat(r.run_id, "/", r.restart, "/", r.round), base);
  r.store = c10::make_intrusive<c10d::PrefixStore>(options.group, r.job_store);
  r.base_store = base;
  return r;
}

}  // namespace ringtorch
