#include "runtime/launch/launch_config.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

#include <ringtorch/error.h>
#include <ringtorch/str_cat.h>

#include "base/command_line.h"
#include "base/log.h"
#include "base/parse.h"
#include "base/small_file.h"
#include "rendezvous/elastic_settings.h"
#include "rendezvous/init_method.h"

namespace ringtorch {
namespace {

// "N" or torchrun's elastic "MIN:MAX" into c->min_nnodes and c->nnodes (the maximum).
void parse_nnodes(const std::string& value, LaunchConfig* c) {
  auto colon = value.find(':');
  if (colon == std::string::npos) {
    c->nnodes = c->min_nnodes = parse_int_in_range(value, 1, 1 << 16, "--nnodes");
    return;
  }
  c->min_nnodes = parse_int_in_range(value.substr(0, colon), 1, 1 << 16, "--nnodes minimum");
  c->nnodes = parse_int_in_range(value.substr(colon + 1), 1, 1 << 16, "--nnodes maximum");
  if (c->min_nnodes > c->nnodes) {
    throw InvalidArgumentError("--nnodes " + value +
                               ": the minimum is above the maximum; give MIN:MAX with MIN <= MAX");
  }
}

// --rdzv_conf K=V,...: password_file is the launcher's own (a path, not a rendezvous setting);
// the rest are ElasticSettings.
void parse_rdzv_conf_flag(const std::string& text, LaunchConfig* c) {
  std::stringstream items(text);
  std::string item, rest;
  while (std::getline(items, item, ',')) {
    if (item.rfind("password_file=", 0) == 0) {
      // The rest of the item: a path with a comma cannot be given here (the items' separator).
      c->redis_password_file = item.substr(std::strlen("password_file="));
      if (c->redis_password_file.empty()) throw InvalidArgumentError("--rdzv_conf password_file=: give a path");
    } else {
      rest += (rest.empty() ? "" : ",") + item;
    }
  }
  parse_rdzv_conf(rest, &c->rdzv_conf);
}

}  // namespace

LaunchConfig parse_launch_args(const std::vector<std::string>& args, bool* help) {
  LaunchConfig c;
  *help = false;
  bool master_port_given = false;
  CommandLine cli("ringrun", launch_usage());
  cli.option("--nproc_per_node",
             [&](const std::string& v) { c.nproc_per_node = parse_int_in_range(v, 1, 1 << 12, "--nproc_per_node"); })
      .option("--nnodes", [&](const std::string& v) { parse_nnodes(v, &c); })
      .repeatable("--rdzv_conf", [&](const std::string& v) { parse_rdzv_conf_flag(v, &c); })
      .option("--node_rank",
              [&](const std::string& v) { c.node_rank = parse_int_in_range(v, 0, 1 << 16, "--node_rank"); })
      .option("--master_addr", [&](const std::string& v) { c.master_addr = v; })
      .option("--master_port",
              [&](const std::string& v) {
                c.master_port = static_cast<uint16_t>(parse_int_in_range(v, 1, 65535, "--master_port"));
                master_port_given = true;
              })
      .option("--rdzv_endpoint", [&](const std::string& v) { c.rdzv_endpoint = v; })
      .option("--rdzv_backend",
              [&](const std::string& v) {
                if (v != "c10d" && v != "static") {
                  throw InvalidArgumentError("--rdzv_backend " + v +
                                             ": ringrun supports c10d and static (both mean: "
                                             "the store named by --rdzv_endpoint or --master_addr/--master_port)");
                }
              })
      .option("--max_restarts",
              [&](const std::string& v) { c.max_restarts = parse_int_in_range(v, 0, 1 << 20, "--max_restarts"); })
      .option("--log_dir", [&](const std::string& v) { c.log_dir = v; })
      .option("--timeline", [&](const std::string& v) { c.timeline = v; })
      .option("--run_id,--rdzv_id", [&](const std::string& v) { c.run_id = v; })
      .option("--timeout", [&](const std::string& v) { c.timeout = parse_seconds(v, "--timeout"); })
      .option("--term_timeout", [&](const std::string& v) { c.term_timeout = parse_seconds(v, "--term_timeout"); })
      .option("--monitor_interval",
              [&](const std::string& v) { c.monitor_interval = parse_seconds(v, "--monitor_interval"); })
      .flag("--standalone", [&](bool on) { c.standalone = on; })
      .flag("--use_env", [&](bool on) { c.use_env = on; })
      .flag("--no_python", [](bool) {})  // ringrun always executes the program directly
      .rest_from_first_positional();
  if (!cli.parse(args)) {
    *help = true;
    return c;
  }
  c.program = cli.rest();
  if (c.program.empty()) throw InvalidArgumentError("no program to launch; usage: ringrun [flags] PROGRAM [ARGS...]");
  if (c.standalone) {
    if (c.nnodes != 1 || c.node_rank != 0)
      throw InvalidArgumentError("--standalone runs one node: drop --nnodes/--node_rank");
    if (!c.rdzv_endpoint.empty()) throw InvalidArgumentError("--standalone hosts its own store: drop --rdzv_endpoint");
    c.master_addr = "127.0.0.1";
    if (!master_port_given) c.master_port = 0;  // a free port
  }
  if (c.node_rank >= c.nnodes) {
    throw InvalidArgumentError("--node_rank " + std::to_string(c.node_rank) + " is outside [0, " +
                               std::to_string(c.nnodes) + ") for --nnodes " + std::to_string(c.nnodes));
  }
  if (c.standalone && c.min_nnodes != 1) throw InvalidArgumentError("--standalone runs one node: drop --nnodes");
  if (!c.rdzv_endpoint.empty() && c.rdzv_endpoint.find("://") == std::string::npos) {
    c.rdzv_endpoint = "tcp://" + c.rdzv_endpoint;  // torchrun's HOST:PORT form
  }
  if (!c.rdzv_endpoint.empty()) {
    InitMethod m = parse_init_method(c.rdzv_endpoint);
    if (m.scheme == InitScheme::kEnv)
      throw InvalidArgumentError("--rdzv_endpoint env:// names no store; give tcp://, file:// or redis://");
    if (!m.password.empty() && !c.redis_password_file.empty()) {
      throw InvalidArgumentError(
          "--rdzv_conf password_file and a password in --rdzv_endpoint: give the password once (the file)");
    }
    if (!c.redis_password_file.empty() && m.scheme != InitScheme::kRedis) {
      throw InvalidArgumentError("--rdzv_conf password_file: only a redis:// --rdzv_endpoint takes a password");
    }
  } else if (!c.redis_password_file.empty()) {
    throw InvalidArgumentError("--rdzv_conf password_file: only a redis:// --rdzv_endpoint takes a password");
  }
  if (!c.run_id.empty() && c.run_id.find('/') != std::string::npos) {
    throw InvalidArgumentError("--run_id " + c.run_id + ": must not contain '/'");
  }
  return c;
}

void take_redis_password(const LaunchConfig& config) {
  if (!config.rdzv_endpoint.empty() && !parse_init_method(config.rdzv_endpoint).password.empty()) {
    log_line(LogLevel::kWarning,
             "the Redis password is in --rdzv_endpoint, on ringrun's command line, which every user of this machine "
             "can read (/proc/PID/cmdline); give it in RINGTORCH_REDIS_PASSWORD or --rdzv_conf password_file=PATH",
             "ringrun");
  }
  if (config.redis_password_file.empty()) return;
  const std::string what = "--rdzv_conf password_file";
  std::string text = read_small_file(config.redis_password_file, 4096, what);
  text = text.substr(0, text.find('\n'));
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty())
    throw InvalidArgumentError(str_cat(what, " ", config.redis_password_file, ": its first line is empty"));
  ::setenv("RINGTORCH_REDIS_PASSWORD", text.c_str(), 1);
}

std::string launch_usage() {
  return R"(usage: ringrun [flags] PROGRAM [ARGS...]

Starts --nproc_per_node copies of PROGRAM on this node, as torchrun does, with RANK, LOCAL_RANK,
WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID,
TORCHELASTIC_RESTART_COUNT and TORCHELASTIC_USE_AGENT_STORE=True set for each. Node 0's ringrun
hosts the rendezvous store. Each output line of a worker is prefixed "[rank N]: ".

  --nproc_per_node N     workers on this node (default 1)
  --nnodes N|MIN:MAX     nodes in the job (default 1); MIN:MAX: elastic, the job goes on with
                         any number of nodes from MIN to MAX (nodes may leave and join)
  --node_rank R          this node's place in [0, nnodes) (default 0): nodes are ordered by it,
                         then by their id; with tcp:// node 0 hosts the store
  --rdzv_conf K=V,...    rendezvous settings in seconds: join_timeout (600), last_call_timeout
                         (30), keep_alive_interval (5), keep_alive_max_attempt (3),
                         admit_interval (10); and password_file=PATH: the Redis password is
                         the file's first line (or set RINGTORCH_REDIS_PASSWORD), never
                         needed in the URL, which every local user can read
  --master_addr HOST     address of node 0 (default 127.0.0.1)
  --master_port PORT     port of the store on node 0 (default 29500)
  --rdzv_endpoint URL    the store instead: tcp://HOST:PORT (hosted by node 0), file:///PATH,
                         redis://[USER:PASSWORD@]HOST[:PORT][/DB], or HOST:PORT
  --rdzv_backend NAME    accepted for torchrun compatibility: c10d or static
  --standalone           one node; the store on 127.0.0.1 at a free port
  --run_id ID            the job's id (alias --rdzv_id); generated when absent, required with a
                         file:// or redis:// endpoint and several nodes
  --max_restarts N       restart the whole group up to N times when a worker fails or a node is
                         lost (default 0; admitting a new node does not count)
  --log_dir DIR          also append each rank's output to DIR/rank_N.log; flight-recorder
                         files go to DIR/flight_recorder
  --timeline FILE        each worker records a timeline (a Chrome trace: steps, DDP buckets,
                         collectives, checkpoints); ringrun merges them into FILE at the end
                         (node N > 0: FILE.nodeN.json). RINGTORCH_TIMELINE=FILE does the same
  --use_env              do not pass --local_rank=N to PROGRAM (torch.distributed.launch passes
                         it unless --use_env; give --use_env for programs that reject it)
  --no_python            accepted for torchrun compatibility (PROGRAM is always executed directly)
  --timeout SECONDS      rendezvous and store timeout, exported to workers as RINGTORCH_TIMEOUT
  --term_timeout SECONDS grace between SIGTERM and SIGKILL when stopping workers (default 5)
  --monitor_interval S   how often workers and the store are checked (default 0.1)
  -h, --help             this text

Every flag takes --flag VALUE or --flag=VALUE, with underscores or dashes (--nproc-per-node);
--standalone, --use_env and --no_python also take =true or =false.

Exit status: 0 when every worker succeeded; else the failing worker's exit code (128 + signal
number when it was killed by a signal); 2 for bad flags; 128 + signal when ringrun itself was
interrupted (SIGINT/SIGTERM are passed on to every worker). SIGUSR1 is passed on: every worker
writes its flight recorder (ringtrace DIR reads them). When a worker fails, ringrun prints what
the workers' flight recorders say.
)";
}

}  // namespace ringtorch
