// ringtrain's options from its flags and from a job config file: a JSON object whose keys are the
// flags without their leading dashes ({"model": "lenet", "lr": 0.01, "batch-size": 64,
// "resume": true, "gpus": [0, 1]}; "batch_size" works too).
// Every error is an InvalidArgumentError (IoError for an unreadable file) that names the flag or
// the file, key and value.
//
// Thread-safety: free functions over the caller's structs.
#pragma once

#include <string>
#include <vector>

#include <ringtorch/rendezvous.h>

#include "apps/trainer/trainer_options.h"

namespace ringtorch {

// Sets the option of one flag ("--lr", or "--batch_size" for "--batch-size") from its text
// value; false for a flag it does not know.
bool apply_trainer_flag(const std::string& flag, const std::string& value, TrainerOptions& options,
                        RendezvousOptions& rendezvous_options);

// ringtrain's command line (base/command_line.h), `--config FILE` applied first wherever it
// stands. Returns false when help was asked for. Throws InvalidArgumentError naming the flag.
bool parse_trainer_command_line(const std::vector<std::string>& args, const std::string& usage, TrainerOptions& options,
                                RendezvousOptions& rendezvous_options);

// Applies the job config `text`; `source` names it in messages (the file's path).
void apply_job_config(const std::string& text, const std::string& source, TrainerOptions& options,
                      RendezvousOptions& rendezvous_options);

// Reads the job config file at `path` and applies it.
void apply_job_config_file(const std::string& path, TrainerOptions& options, RendezvousOptions& rendezvous_options);

}  // namespace ringtorch
