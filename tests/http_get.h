// Test helper: the daemon's HTTP endpoint read as a scraper would, over a
// plain socket (the checks use Catch's REQUIRE).
#pragma once

#include <map>
#include <string>

namespace autotuned::testing {

// GET http://ADDRESS/path (ADDRESS "IPv4:PORT"); the whole answer, headers
// included, read for at most 10 s.
std::string HttpGet(const std::string& address, const std::string& path);

// "name{labels}" -> value of every sample line of a Prometheus text page
// (an HttpGet answer).
std::map<std::string, double> Samples(const std::string& page);

}  // namespace autotuned::testing
