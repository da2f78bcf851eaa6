// Parsing of the numbers users type (flags, environment variables, URL parameters, config
// values). Pure functions; every error is an InvalidArgumentError that names the value through
// `what` ("--lr", "environment variable RINGTORCH_TIMEOUT", "port in 'tcp://h:x'").
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ringtorch {

constexpr double kMaxTimeoutSeconds = 30.0 * 24 * 3600;

// A decimal integer in [min, max].
int parse_int_in_range(const std::string& text, long long min, long long max, const std::string& what);
// A finite number ("--lr: 'x' is not a number").
double parse_number(const std::string& text, const std::string& what);
// A finite number in [min, max].
double parse_number_in_range(const std::string& text, double min, double max, const std::string& what);
// "30", "0.5" (seconds, from 0.001 to kMaxTimeoutSeconds) into milliseconds.
std::chrono::milliseconds parse_seconds(const std::string& text, const std::string& what);
// A byte count with an optional K, M or G suffix (powers of 1024), at most 1 GiB before the suffix.
int64_t parse_byte_size(const std::string& text, const std::string& what);

}  // namespace ringtorch
