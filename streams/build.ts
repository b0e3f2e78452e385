/** Builds a Pipeline from a validated stream config: one component class per type. */
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/logger.js';
import type { InputSpecT, OutputSpecT, ProcessorSpecT, StreamSpecT } from '../crds/schemas/streaming.js';
import { GenerateInput } from './inputs/generate.js';
import { HttpServerInput } from './inputs/http-server.js';
import { RedisStreamsInput } from './inputs/redis-streams.js';
import type { StreamMeter } from './metrics.js';
import { DropOutput } from './outputs/drop.js';
import { HttpClientOutput } from './outputs/http-client.js';
import { StdoutOutput, type LineWriter } from './outputs/stdout.js';
import { Pipeline, type ByteBudget } from './pipeline.js';
import { HttpClientProcessor } from './processors/http-client.js';
import { MappingProcessor } from './processors/mapping.js';
import type { LocalRateLimit } from './rate-limit.js';
import type { Input, InputContext, Output, Processor } from './types.js';

export interface BuildContext {
  api: string;
  name: string;
  logger: Logger;
  clock: Clock;
  meter: StreamMeter;
  redisUrl?: string;
  stdout?: LineWriter;
  limiter(label: string | undefined): LocalRateLimit | undefined;
  /** Raw payload bytes every pipeline of the process may buffer together. */
  budget?: ByteBudget;
}

/** Throws (with a message naming the field) when the stream cannot run here, e.g. no Redis URL. */
export function checkBuildable(spec: StreamSpecT, redisUrl: string | undefined): void {
  const r = spec.input.redis_streams;
  if (r && !r.url && !redisUrl) {
    throw new Error('input.redis_streams.url: not set and the gateway has no Redis store (--redis)');
  }
}

function buildInput(spec: InputSpecT, b: BuildContext, ctx: InputContext): Input {
  if (spec.http_server) return new HttpServerInput(spec.http_server, ctx, b.name);
  if (spec.redis_streams) {
    const url = spec.redis_streams.url ?? b.redisUrl;
    if (!url) throw new Error('input.redis_streams.url: not set and the gateway has no Redis store');
    return new RedisStreamsInput(spec.redis_streams, ctx, b.name, url);
  }
  if (spec.generate) return new GenerateInput(spec.generate, ctx, b.name);
  throw new Error('input: no component type');
}

function buildProcessor(spec: ProcessorSpecT, b: BuildContext, concurrency: number): Processor {
  if (spec.mapping) return new MappingProcessor(spec.mapping);
  if (spec.http_client)
    return new HttpClientProcessor(
      spec.http_client,
      b.limiter(spec.http_client.rate_limit),
      b.clock,
      b.meter,
      concurrency,
    );
  throw new Error('processor: no component type');
}

function buildOutput(spec: OutputSpecT, b: BuildContext): Output {
  if (spec.http_client)
    return new HttpClientOutput(spec.http_client, b.limiter(spec.http_client.rate_limit), b.clock, b.meter);
  if (spec.drop) return new DropOutput();
  if (spec.stdout) return new StdoutOutput(b.stdout);
  throw new Error('output: no component type');
}

export function buildPipeline(spec: StreamSpecT, b: BuildContext): Pipeline {
  checkBuildable(spec, b.redisUrl);
  const output = buildOutput(spec.output, b);
  const processors = (spec.pipeline?.processors ?? []).map((p) => buildProcessor(p, b, output.maxInFlight));
  return new Pipeline({
    api: b.api,
    name: b.name,
    logger: b.logger,
    meter: b.meter,
    input: (ctx) => buildInput(spec.input, b, ctx),
    processors,
    output,
    budget: b.budget,
  });
}
