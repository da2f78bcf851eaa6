// Everything a ringtorch program uses, in one include (docs/ARCHITECTURE.md, "The public API"):
//
//   #include <ringtorch/ringtorch.h>
//   auto group = ringtorch::ProcessGroup::create(ringtorch::rendezvous());
//   ringtorch::DistributedDataParallel ddp(model, group);
//
// Link ringtorch::ringtorch (find_package(ringtorch)). The single headers below may be included
// on their own; each includes what it needs.
#pragma once

#include <ringtorch/batch_balancer.h>
#include <ringtorch/batch_split.h>
#include <ringtorch/checkpoint.h>
#include <ringtorch/checkpoint_format.h>
#include <ringtorch/comm_hooks.h>
#include <ringtorch/data_parallel.h>
#include <ringtorch/distributed_data_parallel.h>
#include <ringtorch/distributed_sampler.h>
#include <ringtorch/elastic_state.h>
#include <ringtorch/elastic_worker.h>
#include <ringtorch/error.h>
#include <ringtorch/exit_status.h>
#include <ringtorch/image_dataset.h>
#include <ringtorch/job_environment.h>
#include <ringtorch/join.h>
#include <ringtorch/keep_freed_memory.h>
#include <ringtorch/local_sgd.h>
#include <ringtorch/models.h>
#include <ringtorch/operation_label.h>
#include <ringtorch/powersgd.h>
#include <ringtorch/process_group.h>
#include <ringtorch/process_group_options.h>
#include <ringtorch/redis_store.h>
#include <ringtorch/reduce_op.h>
#include <ringtorch/rendezvous.h>
#include <ringtorch/spawn.h>
#include <ringtorch/state_broadcast.h>
#include <ringtorch/str_cat.h>
#include <ringtorch/timeline.h>
#include <ringtorch/weighted_sampler.h>
#include <ringtorch/work.h>
