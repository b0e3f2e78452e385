import { createStreamManager } from '../../../streams/manager.js';
import { quietLogger, until } from './helpers.js';

test('generate → mapping → stdout: count messages on a timer, mapped, one JSON line each', async () => {
  const lines: string[] = [];
  const mgr = createStreamManager({ logger: quietLogger(), stdout: { write: (c: string) => lines.push(c) } });
  await mgr.apply([
    {
      api_id: 'demo',
      listenPath: '/demo/',
      streaming: {
        streams: {
          tick: {
            input: { generate: { interval: '20ms', count: 3, message: { user: { id: 'u1' }, noise: 1 } } },
            pipeline: {
              processors: [
                { mapping: { move: { 'user.id': 'customer' }, set: { source: 'gw' }, delete: ['noise', 'user'] } },
              ],
            },
            output: { stdout: {} },
          },
        },
      },
    },
  ]);
  try {
    await until(() => lines.length === 3, 3000, '3 lines');
    expect(lines).toEqual(Array(3).fill('{"customer":"u1","source":"gw"}\n'));
  } finally {
    await mgr.stop();
  }
});
