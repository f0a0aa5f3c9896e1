// A server interceptor that makes a request that does not parse say so.
// gRPC answers a request whose bytes do not parse as the method's protobuf
// message with INTERNAL and an empty message; with this interceptor the
// caller gets INVALID_ARGUMENT "request: the N-byte message to <method> does
// not parse as its protobuf request ...". Every other status passes as is.
//
// Thread-safety: the factory is shared by all calls; each call gets its own
// interceptor.
#pragma once

#include <memory>

#include <grpcpp/support/server_interceptor.h>

namespace autotuned {

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> ParseErrorsFactory();

}  // namespace autotuned
