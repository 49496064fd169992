/**
 * The Redis password never reaches the logs: a refused reconnect's error carries its command (HELLO 3 AUTH <user>
 * <password>), and the limiter logs the error's name, message and code only (found by an attacker helper).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import pino from 'pino'
import { openRedis } from '../../src/redis/connect.js'
import { RedisLimiter } from '../../src/ratelimit/redis.js'
import { ResilientLimiter } from '../../src/ratelimit/resilient.js'
import { requireRedisServer, startRedisServer } from '../helpers/redis-servers.js'
import { waitFor } from '../helpers/wait.js'

if (await requireRedisServer('Redis credentials in logs')) {
  test('a refused reconnect is logged without the password', async (t) => {
    const server = await startRedisServer(t.after.bind(t), ['--requirepass', 'TopSecret123'])
    const client = openRedis({ mode: 'standalone', url: `redis://:TopSecret123@127.0.0.1:${server.port}`, onDown: 'local', commandTimeoutMs: 500 })
    t.after(() => client.disconnect())
    const lines: string[] = []
    // The service's logger is pino; its default serializers are what `serve` writes.
    const logger = pino({ level: 'info' }, { write: (line: string) => { lines.push(line) } })
    const limiter = new ResilientLimiter({ redis: new RedisLimiter({ client, prefix: 'test:logs:' }), logger })
    t.after(() => limiter.close())
    await waitFor('the limiter on Redis', () => limiter.backend === 'redis')
    // The password is rotated on the server and the connection dropped: the reconnect is refused.
    const admin = new Redis(server.port, '127.0.0.1', { password: 'TopSecret123' })
    t.after(() => admin.disconnect())
    await admin.config('SET', 'requirepass', 'Rotated456')
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal').catch(() => {})
    await waitFor('the outage logged', () => lines.some((line) => /Redis unavailable/.test(line)), { detail: () => lines.join('') })
    assert.doesNotMatch(lines.join('\n'), /TopSecret123/)
  })
}
