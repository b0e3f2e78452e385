/** KubeConfig from --kubeconfig or the in-cluster service account. */
import { KubeConfig } from '@kubernetes/client-node';
import { firstLine } from '../errors.js';

export function loadKubeConfig(file?: string): KubeConfig {
  const kc = new KubeConfig();
  try {
    if (file) kc.loadFromFile(file);
    else kc.loadFromCluster();
  } catch (e) {
    throw new Error(`--kubeconfig: cannot load ${file ?? 'in-cluster config'}: ${firstLine((e as Error).message)}`, {
      cause: e,
    });
  }
  if (!kc.getCurrentCluster()) throw new Error(`--kubeconfig: ${file ?? 'in-cluster config'} has no current cluster`);
  return kc;
}
