// berth health and berth version: whether the Berth at --url is usable, and what runs there.
import { Command } from 'commander';
import { API_VERSION, apiVersionsFit } from '@berth/client';
import { cliVersion, type ContextOf } from '../context.js';
import { CliError } from '../errors.js';

export function healthCommand(contextOf: ContextOf): Command {
  return new Command('health')
    .description("show the server's health (exit code 1 when it is degraded)")
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const health = await berth.health();
      if (output.format === 'json') output.json(health);
      else {
        output.line(`${health.name} ${health.version}: ${health.status}`);
        output.list(health, health.components, [
          { header: 'COMPONENT', value: (component) => component.name },
          { header: 'STATUS', value: (component) => component.status },
        ], '');
      }
      if (health.status !== 'ok') throw new CliError(`the server is ${health.status}`);
    });
}

export function versionCommand(contextOf: ContextOf): Command {
  return new Command('version')
    .description("show this command's version and what the server runs")
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const server = await berth.version();
      // The version handshake, shown: whether this command's SDK and the server speak fitting API versions.
      const fits = apiVersionsFit(API_VERSION, server.api_version);
      output.record({ cli: cliVersion(), cli_api_version: API_VERSION, api_versions_fit: fits, server }, [
        ['berth (this command)', cliVersion()],
        ['server', server.version],
        ['api', server.api_version],
        ['api (this command)', `${API_VERSION}, ${fits ? 'fits the server' : 'does not fit the server (the major versions differ)'}`],
        ['engine', server.engine_version],
        ['engine image', server.engine_image],
        ['agent image', server.agent_image],
        ['commit', server.commit],
      ]);
    });
}
