/** gRPC methods over raw bytes for tests and benchmarks (@grpc/grpc-js): messages are Buffers, passed as they are. */
import type * as grpc from '@grpc/grpc-js';

export const pass = (b: Buffer): Buffer => b;

/** The method at `path` (`/package.Service/Method`), unary unless told it streams. */
export function bufferMethod(
  path: string,
  requestStream = false,
  responseStream = false,
): grpc.MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream,
    responseStream,
    requestSerialize: pass,
    requestDeserialize: pass,
    responseSerialize: pass,
    responseDeserialize: pass,
  };
}
