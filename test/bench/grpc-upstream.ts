/**
 * The gRPC upstream of `make bench`'s gRPC row (test/bench/protocols.ts): a @grpc/grpc-js server on
 * 127.0.0.1:<port> (h2c) with one unary method, /bench.Echo/Unary, answering each message with itself.
 * Prints "grpc upstream ready".
 */
import * as grpc from '@grpc/grpc-js';
import { bufferMethod } from '../helpers/grpc.js';

const SERVICE = {
  Unary: bufferMethod('/bench.Echo/Unary'),
} satisfies grpc.ServiceDefinition;
const server = new grpc.Server();
server.addService(SERVICE, {
  Unary: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => cb(null, call.request),
});
server.bindAsync(`127.0.0.1:${process.argv[2]}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    console.error(err.message);
    process.exit(1);
  }
  console.log('grpc upstream ready');
});
process.on('SIGTERM', () => server.tryShutdown(() => process.exit(0)));
