/** `gw facade`: the management endpoints over the custom resources of a cluster. */
import { Registry, collectDefaultMetrics } from 'prom-client';
import { createFacadeServer } from '../controller/facade/server.js';
import { KubeBackend } from '../controller/facade/backend-kube.js';
import { loadKubeConfig } from '../lib/kube/client.js';
import { createLogger } from '../lib/logger.js';
import { loadGatewayOptions } from '../lib/options.js';
import { createOpsServer } from '../lib/ops-server.js';
import { drain, listen } from '../lib/serve.js';
import { onShutdown } from './shutdown.js';

export interface FacadeFlags {
  kubeconfig?: string;
  namespace: string;
  listen: string;
  config?: string;
  redis?: string;
}

export async function runFacade(flags: FacadeFlags): Promise<void> {
  const logger = createLogger('facade');
  const options = loadGatewayOptions(flags.config);
  if (!options.secret) throw new Error('secret: required (config file `secret` or env GW_SECRET)');
  if (!options.access_tokens?.length) throw new Error('access_tokens: required (config file `access_tokens` or env GW_ACCESS_TOKENS)');
  const kc = loadKubeConfig(flags.kubeconfig);
  const backend = new KubeBackend({ kc, namespace: flags.namespace, logger });
  const facade = createFacadeServer({ backend, options, gatewayOrigins: options.gateway_urls ?? [], logger, namespace: flags.namespace });
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let ready = false;
  const server = createOpsServer(registry, () => ready, (req, res) => facade.emit('request', req, res));
  const addr = await listen(server, flags.listen, '--listen');
  ready = true;
  logger.info({ listen: addr }, 'gw facade ready');
  onShutdown(logger, async () => {
    ready = false;
    await drain(server);
    facade.close();
  });
}
