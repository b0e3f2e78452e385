/**
 * The client commands for pipelines: `gw keys`, `gw oauth`, `gw proxy` call a running
 * facade (`gw facade` or the admin listener of `gw standalone`). Exit codes: exit-codes.ts.
 */
import type { Command } from 'commander';
import { keysCommand } from './keys.js';
import { oauthCommand } from './oauth.js';
import { proxyCommand } from './proxy.js';

export function registerClientCommands(program: Command): void {
  program.addCommand(keysCommand());
  program.addCommand(oauthCommand());
  program.addCommand(proxyCommand());
}
