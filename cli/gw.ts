#!/usr/bin/env node
/** The gw CLI: one binary, four subcommands (docs/contract.md#processes). Flags win over GW_* environment variables. */
import { Command, InvalidArgumentError, Option } from 'commander';
// Subcommands load on demand: each process carries only its own dependencies (the controller, for
// one, never loads @kubernetes/client-node's generated API code).
import type { ControllerFlags } from './controller.js';
import type { FacadeFlags } from './facade.js';
import type { SidecarFlags } from './sidecar.js';
import type { StandaloneFlags } from './standalone.js';
import type { ReleaseFlags } from './release-finalizers.js';
import type { ValidateFlags } from './validate.js';
import type { WebhookFlags } from './webhook.js';
// The injection defaults have one home (inject.ts, no runtime imports, cheap to load).
import { defaultInjectOptions as D } from '../webhook/inject.js';
import { parseHostPort } from '../lib/serve.js';
import { buildInfo, formatBuildInfo } from '../lib/build-info.js';

// stdout or stderr whose reader has gone (`gw standalone | head`, a log collector restarted): what is
// written there is lost, and the process goes on (an unhandled EPIPE on them ended it)
process.stdout.on('error', () => undefined);
process.stderr.on('error', () => undefined);

function fail(message: string): never {
  process.stderr.write(`gw: ${message}\n`);
  process.exit(1);
}

// package.json's engines: an older node fails later with an unrelated TypeError (a missing built-in API)
if (Number(process.versions.node.split('.')[0]) < 22)
  fail(`needs Node.js 22 or later (this is ${process.version}); \`make run\` fetches one`);

/** A namespace flag: a Kubernetes namespace name (DNS-1123 label), or commander's one-line error. */
const namespaceOption = (flag: string, envName: string, description: string, def?: string): Option =>
  env(flag, envName, description, def).argParser((v: string) => {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(v))
      throw new InvalidArgumentError(
        'must be a Kubernetes namespace name (DNS-1123 label: lower-case letters, digits and -, at most 63).',
      );
    return v;
  });

/**
 * An on/off flag that its environment variable can also turn off: commander sets a plain boolean flag
 * whenever its variable is set, so GW_X=false would mean true. The flag alone is true.
 */
const boolOption = (flag: string, envName: string, description: string): Option =>
  new Option(flag, description)
    .env(envName)
    .preset('true')
    .argParser((v: string) => {
      const b = { true: true, '1': true, yes: true, false: false, '0': false, no: false }[v.trim().toLowerCase()];
      if (b === undefined) throw new InvalidArgumentError('must be true or false.');
      return b;
    });

/** A listen address flag: HOST:PORT, checked when the flags are read (before any start-up work). */
const addressOption = (flag: string, envName: string, description: string, def: string): Option =>
  env(flag, envName, description, def).argParser((v: string) => {
    try {
      parseHostPort(v, flag); // the check listen() makes, made when the flags are read
    } catch {
      throw new InvalidArgumentError('expected HOST:PORT.');
    }
    return v;
  });

const env = (flag: string, envName: string, description: string, def?: string): Option => {
  const o = new Option(flag, description).env(envName);
  return def === undefined ? o : o.default(def);
};

/**
 * The gateway listener's TLS flags, `gw sidecar`'s and `gw standalone`'s: in place of the --config file's
 * `tls` (lib/options.ts listenerOverrides checks them, docs/proxy.md "TLS and HTTP/2"), added to `cmd`.
 */
function withGatewayTls(cmd: Command): Command {
  return cmd
    .addOption(env('--tls-cert <file>', 'GW_GATEWAY_TLS_CERT', "the gateway listener's certificate (PEM): TLS on"))
    .addOption(env('--tls-key <file>', 'GW_GATEWAY_TLS_KEY', "the gateway listener's key (PEM)"))
    .addOption(
      env(
        '--tls-client-ca <file>',
        'GW_GATEWAY_TLS_CLIENT_CA',
        'CA bundle (PEM) client certificates are verified against',
      ),
    )
    .addOption(env('--tls-min-version <version>', 'GW_GATEWAY_TLS_MIN_VERSION', 'TLSv1.2 (default) or TLSv1.3'));
}

const program = new Command('gw')
  .description('gw: a Kubernetes-native API gateway that rate-limits traffic')
  .configureOutput({ writeErr: (s) => process.stderr.write(s) })
  .version(formatBuildInfo().trimEnd(), '-V, --version', 'print the version, the Node.js version and the git commit');

program
  .command('version')
  .description('The package version, the Node.js version and the git commit of the build (when built from a checkout)')
  .addOption(new Option('--output <format>', 'text or json').choices(['text', 'json']).default('text'))
  .action((opts: { output: 'text' | 'json' }) => {
    process.stdout.write(opts.output === 'json' ? `${JSON.stringify(buildInfo())}\n` : formatBuildInfo());
  });

withGatewayTls(
  program
    .command('standalone')
    .description('Gateway, facade and resources in one process, from a directory of manifests')
    .addOption(env('--resources <dir>', 'GW_RESOURCES', 'directory of YAML/JSON manifests').makeOptionMandatory())
    .addOption(addressOption('--listen <host:port>', 'GW_LISTEN', 'gateway listen address', '0.0.0.0:8080'))
    .addOption(
      addressOption(
        '--admin-listen <host:port>',
        'GW_ADMIN_LISTEN',
        'management (facade) and metrics listen address',
        '127.0.0.1:8081',
      ),
    )
    .addOption(env('--config <file>', 'GW_CONFIG', 'gateway configuration file (YAML)'))
    .addOption(env('--redis <url>', 'GW_REDIS', 'shared store URL (default: in memory)'))
    // h2c of the gateway listener, as gw sidecar's: in place of the --config file's `h2c`
    .addOption(env('--h2c <true|false>', 'GW_GATEWAY_H2C', 'HTTP/2 with prior knowledge on a plain listener')),
).action((opts: StandaloneFlags) =>
  import('./standalone.js').then((m) => m.runStandalone(opts)).catch((e: unknown) => fail((e as Error).message)),
);

program
  .command('controller')
  .description('Operator: reconciles the four resource kinds into ConfigMaps and Redis')
  .addOption(env('--kubeconfig <file>', 'GW_KUBECONFIG', 'kubeconfig (default: in-cluster)'))
  .addOption(namespaceOption('--namespace <ns>', 'GW_NAMESPACE', 'namespace to watch (default: all)'))
  .addOption(env('--redis <url>', 'GW_REDIS', 'Redis URL'))
  .addOption(
    boolOption(
      '--leader-elect [enabled]',
      'GW_LEADER_ELECT',
      'enable leader election (true/false; the flag alone: true)',
    ),
  )
  .addOption(
    addressOption('--metrics-listen <host:port>', 'GW_METRICS_LISTEN', 'metrics and health address', '0.0.0.0:9090'),
  )
  .addOption(env('--resync-period <seconds>', 'GW_RESYNC_PERIOD', 'full resync period', '60').hideHelp())
  .addOption(env('--lease-duration <seconds>', 'GW_LEASE_DURATION', 'leader election lease duration', '15').hideHelp())
  .addOption(
    namespaceOption(
      '--lease-namespace <ns>',
      'GW_LEASE_NAMESPACE',
      'namespace of the leader-election Lease (default: $POD_NAMESPACE, else --namespace, else default)',
    ),
  )
  .addOption(env('--identity <id>', 'GW_IDENTITY', 'leader election identity (default: hostname + random)').hideHelp())
  .addOption(env('--concurrency <n>', 'GW_CONCURRENCY', 'reconciles running at once', '32').hideHelp())
  .addOption(
    env(
      '--config-shard-bytes <n>',
      'GW_CONFIG_SHARD_BYTES',
      'bytes of compiled config and owner references per ConfigMap (tests; at most 900000)',
      '900000',
    ).hideHelp(),
  )
  .addOption(
    env(
      '--store-check-period <seconds>',
      'GW_STORE_CHECK_PERIOD',
      'how often the Redis marker key is checked (an emptied store is restored when it is missing)',
      '1',
    ).hideHelp(),
  )
  .action((opts: ControllerFlags) =>
    import('./controller.js').then((m) => m.runController(opts)).catch((e: unknown) => fail((e as Error).message)),
  );

program
  .command('release-finalizers')
  .description("Stops the controller and removes its finalizers (the chart's pre-delete hook, docs/helm.md)")
  .addOption(env('--kubeconfig <file>', 'GW_KUBECONFIG', 'kubeconfig (default: in-cluster)'))
  .addOption(
    env('--controller <namespace/deployment>', 'GW_CONTROLLER', "the controller's Deployment, scaled to 0 first"),
  )
  .addOption(namespaceOption('--namespace <ns>', 'GW_NAMESPACE', 'namespace the controller watches (default: all)'))
  .addOption(env('--timeout <seconds>', 'GW_TIMEOUT', 'how long to wait for the controller pods to go', '90'))
  .action((opts: ReleaseFlags) =>
    import('./release-finalizers.js')
      .then((m) => m.runReleaseFinalizers(opts))
      .catch((e: unknown) => fail((e as Error).message)),
  );

program
  .command('facade')
  .description('Management endpoints over the custom resources')
  .addOption(env('--kubeconfig <file>', 'GW_KUBECONFIG', 'kubeconfig (default: in-cluster)'))
  .addOption(namespaceOption('--namespace <ns>', 'GW_NAMESPACE', 'namespace for created resources', 'default'))
  .addOption(addressOption('--listen <host:port>', 'GW_LISTEN', 'listen address', '0.0.0.0:8081'))
  .addOption(env('--config <file>', 'GW_CONFIG', 'gateway configuration file (YAML)'))
  .addOption(env('--redis <url>', 'GW_REDIS', 'Redis URL (live quota values)'))
  .addOption(
    env(
      '--ready-timeout <seconds>',
      'GW_READY_TIMEOUT',
      'how long a write waits for the controller to report it Ready (then 504)',
      '10',
    ),
  )
  .action((opts: FacadeFlags) =>
    import('./facade.js').then((m) => m.runFacade(opts)).catch((e: unknown) => fail((e as Error).message)),
  );

withGatewayTls(
  program
    .command('sidecar')
    .description('Reverse proxy in front of the pod application, enforcing every limit')
    .addOption(env('--upstream <url>', 'GW_UPSTREAM', 'the application URL').makeOptionMandatory())
    .addOption(addressOption('--listen <host:port>', 'GW_LISTEN', 'listen address', '0.0.0.0:8080'))
    .addOption(env('--kubeconfig <file>', 'GW_KUBECONFIG', 'kubeconfig (default: in-cluster)'))
    .addOption(namespaceOption('--namespace <ns>', 'GW_NAMESPACE', 'namespace of the compiled config', 'default'))
    .addOption(env('--group <name>', 'GW_GROUP', 'DRL peer group', 'default'))
    .addOption(env('--config <file>', 'GW_CONFIG', 'gateway configuration file (YAML)'))
    .addOption(
      env(
        '--config-map <name>',
        'GW_CONFIG_MAP',
        'ConfigMap of --namespace whose key config.yaml is --config: changes are followed through the API (watch)',
      ),
    )
    .addOption(env('--redis <url>', 'GW_REDIS', 'Redis URL'))
    .addOption(
      addressOption('--metrics-listen <host:port>', 'GW_METRICS_LISTEN', 'metrics and health address', '0.0.0.0:9091'),
    ),
)
  // h2c of the gateway listener for this process, as the TLS flags (withGatewayTls), in place of the --config
  // file's `h2c` (the injection webhook sets them per pod from its annotations: docs/helm.md, "TLS and h2c per pod")
  .addOption(env('--h2c <true|false>', 'GW_GATEWAY_H2C', 'HTTP/2 with prior knowledge on a plain listener'))
  .addOption(
    env(
      '--drain-delay <seconds>',
      'GW_DRAIN_DELAY',
      "how long GET /prestop (the pod's preStop hook, metrics port) holds while responses close their connections",
      '0',
    ),
  )
  .action((opts: SidecarFlags) =>
    import('./sidecar.js').then((m) => m.runSidecar(opts)).catch((e: unknown) => fail((e as Error).message)),
  );

// Manifests checked offline (docs/standalone.md, "Checking manifests before they are applied"): exit 0
// valid, 1 errors, 2 usage — commander's own usage errors (unknown flag, bad --output) included.
program
  .command('validate')
  .description('Check manifests (files, directories, - for stdin) with the checks the controller and standalone apply')
  .argument('[paths...]', 'manifest files and directories (- reads stdin)')
  .addOption(
    new Option('-f, --filename <path>', 'a file, a directory, or - for stdin (repeatable)').argParser(
      (v: string, prev: string[] | undefined) => [...(prev ?? []), v],
    ),
  )
  .addOption(new Option('--strict', 'a reference to something the input does not have is an error, not a warning'))
  .addOption(
    new Option('--output <format>', 'text or json (one JSON object per problem and line)')
      .choices(['text', 'json'])
      .default('text'),
  )
  .exitOverride((e) => {
    if (e.exitCode !== 0) process.exit(2);
  })
  .action((paths: string[], opts: ValidateFlags) =>
    import('./validate.js')
      .then(async (m) => {
        try {
          process.exitCode = await m.runValidate(paths, opts);
        } catch (e) {
          if (!(e instanceof m.UsageError)) throw e;
          process.stderr.write(m.usageLine(e));
          process.exitCode = m.ValidateExit.USAGE;
        }
      })
      .catch((e: unknown) => fail((e as Error).message)),
  );

// Clients of the facade for CI pipelines: gw keys|oauth|proxy (docs/facade.md, exit-code table).
// A server command (or validate, version) does not load the client commands: less code held by every sidecar.
const WITHOUT_CLIENTS = new Set(['standalone', 'controller', 'facade', 'sidecar', 'webhook', 'validate', 'version']);
if (!WITHOUT_CLIENTS.has(process.argv[2] ?? '')) (await import('./client/index.js')).registerClientCommands(program);

program
  .command('webhook')
  .description('Mutating admission webhook: injects `gw sidecar` into pods annotated gw.io/inject: "true"')
  .addOption(addressOption('--listen <host:port>', 'GW_LISTEN', 'HTTPS listen address', '0.0.0.0:8443'))
  .addOption(env('--tls-cert <file>', 'GW_TLS_CERT', 'serving certificate (PEM)').makeOptionMandatory())
  .addOption(env('--tls-key <file>', 'GW_TLS_KEY', 'serving key (PEM)').makeOptionMandatory())
  .addOption(env('--image <image>', 'GW_SIDECAR_IMAGE', 'image of the injected sidecar', D.image))
  .addOption(
    env(
      '--image-pull-policy <policy>',
      'GW_SIDECAR_IMAGE_PULL_POLICY',
      'Always, IfNotPresent or Never',
      D.imagePullPolicy,
    ),
  )
  .addOption(
    env('--sidecar-listen-port <port>', 'GW_SIDECAR_LISTEN_PORT', 'port the sidecar proxies on', String(D.listenPort)),
  )
  .addOption(
    env(
      '--sidecar-metrics-port <port>',
      'GW_SIDECAR_METRICS_PORT',
      'port of the sidecar health and metrics',
      String(D.metricsPort),
    ),
  )
  .addOption(
    env(
      '--redis-secret <name>',
      'GW_SIDECAR_REDIS_SECRET',
      "Secret (pod's namespace, key url) with the Redis URL; empty: none",
      D.redisSecretName,
    ),
  )
  .addOption(
    env(
      '--sidecar-config-map <name>',
      'GW_SIDECAR_CONFIG_MAP',
      "ConfigMap (pod's namespace, key config.yaml) mounted as the sidecar's --config",
    ),
  )
  .addOption(
    env(
      '--sidecar-config-namespaces <ns,...>',
      'GW_SIDECAR_CONFIG_NAMESPACES',
      'the namespaces that have that ConfigMap (default: all); pods elsewhere get no --config',
    ),
  )
  .addOption(
    env('--sidecar-cpu-request <q>', 'GW_SIDECAR_CPU_REQUEST', 'sidecar CPU request', D.resources.requests.cpu),
  )
  .addOption(
    env(
      '--sidecar-memory-request <q>',
      'GW_SIDECAR_MEMORY_REQUEST',
      'sidecar memory request',
      D.resources.requests.memory,
    ),
  )
  .addOption(env('--sidecar-cpu-limit <q>', 'GW_SIDECAR_CPU_LIMIT', 'sidecar CPU limit (default: none)'))
  .addOption(
    env('--sidecar-memory-limit <q>', 'GW_SIDECAR_MEMORY_LIMIT', 'sidecar memory limit', D.resources.limits.memory),
  )
  .addOption(
    env(
      '--sidecar-node-options <flags>',
      'GW_SIDECAR_NODE_OPTIONS',
      "the sidecar's NODE_OPTIONS (default: V8 heap flags derived from its memory limit)",
    ),
  )
  .addOption(
    env(
      '--sidecar-drain-delay <seconds>',
      'GW_SIDECAR_DRAIN_DELAY',
      "a terminating pod's time to leave its Service before the sidecar drains (preStop hooks); 0: none",
      String(D.drainDelaySeconds),
    ),
  )
  .addOption(
    env(
      '--sidecar-tls-secret <name>',
      'GW_SIDECAR_TLS_SECRET',
      "Secret (pod's namespace, keys tls.crt, tls.key) of the sidecars' TLS listener unless a pod names its own (gw.io/tls-secret)",
    ),
  )
  .addOption(
    env(
      '--sidecar-tls-client-ca <true|false>',
      'GW_SIDECAR_TLS_CLIENT_CA',
      "client certificates verified against that Secret's ca.crt (gw.io/tls-client-ca)",
      'false',
    ),
  )
  .addOption(
    env(
      '--sidecar-tls-min-version <version>',
      'GW_SIDECAR_TLS_MIN_VERSION',
      'TLSv1.2 or TLSv1.3 (gw.io/tls-min-version)',
    ),
  )
  .addOption(
    env(
      '--sidecar-h2c <true|false>',
      'GW_SIDECAR_H2C',
      "h2c on the sidecars' plain listener (gw.io/h2c); unset: the sidecar's config decides (on by default)",
    ),
  )
  .addOption(env('--run-as-user <uid>', 'GW_SIDECAR_RUN_AS_USER', 'UID of the sidecar', String(D.runAsUser)))
  .action((opts: WebhookFlags) =>
    import('./webhook.js').then((m) => m.runWebhook(opts)).catch((e: unknown) => fail((e as Error).message)),
  );

/**
 * Commander's own usage errors (unknown or missing flag, bad argument) read like every other start-up
 * error: one line, `gw <command>: <reason>`, exit 1.
 */
const prefixUsageErrors = (cmd: Command, path: string): void => {
  cmd.configureOutput({ outputError: (s, write) => write(`${path}: ${s.replace(/^error: /, '')}`) });
  for (const sub of cmd.commands) prefixUsageErrors(sub, `${path} ${sub.name()}`);
};
prefixUsageErrors(program, 'gw');

program.parseAsync(process.argv).catch((e: unknown) => fail((e as Error).message));
