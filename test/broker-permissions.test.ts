// One broker user per agent (docs/distributed.md, "One user per agent"): with the documented permissions, a
// partner's credential is refused when it publishes under another agent's subject, nothing is stored there, and
// each agent still publishes its own steps, large ones through the Object Store, and reads every partner's.
import assert from 'node:assert/strict';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { brokerPermissions } from '../src/distributed/broker-config.js';
import { NatsTransport } from '../src/distributed/nats-transport.js';
import { PublishRefused } from '../src/distributed/transport.js';
import { NatsServer } from '../src/distributed/nats-server.js';

const RUN = 'perm';
let server: NatsServer;

before(async () => {
  const conf = join(await mkdtemp(join(tmpdir(), 'hacrl-perm-')), 'hacrl.conf');
  const users = [
    { agent: 'a', password: 'secret-a' },
    { agent: 'b', password: 'secret-b' },
  ];
  await writeFile(conf, brokerPermissions(RUN, users));
  server = await NatsServer.start(['-c', conf]);
});
after(() => server.stop());

/** Agent `agent`'s transport, logged in as `user`. */
const open = (agent: string, user: string): Promise<NatsTransport> =>
  NatsTransport.open({
    broker: server.url,
    run: RUN,
    agent,
    maxMessageBytes: 2048,
    maxObjectBytes: 1 << 20,
    connectSeconds: 10,
    user,
    password: `secret-${user}`,
  });

test("a partner's credential is refused on another agent's subject; each agent publishes and reads its own", async () => {
  const a = await open('a', 'a');
  const b = await open('b', 'b');
  try {
    const small = new TextEncoder().encode('{"honest": true}');
    const large = new TextEncoder().encode('x'.repeat(10_000));
    await b.publish(1, 'b', small);
    await b.publish(2, 'b', large);
    const bytes = async (t: NatsTransport, step: number, agent: string): Promise<Buffer> =>
      Buffer.from((await t.fetch(step, agent)) ?? []);
    assert.deepEqual(await bytes(a, 1, 'b'), Buffer.from(small));
    assert.deepEqual(await bytes(a, 2, 'b'), Buffer.from(large), 'through the Object Store');
    await assert.rejects(b.publish(1, 'a', new TextEncoder().encode('{"forged": true}')), (e: unknown) => {
      assert.ok(e instanceof PublishRefused);
      assert.match((e as Error).message, /refused to store agent a's records of step 1 .*One user per agent/);
      return true;
    });
    assert.equal(await a.fetch(1, 'a'), null, 'nothing stored under a');
    await a.publish(1, 'a', small);
    assert.deepEqual(await bytes(b, 1, 'a'), Buffer.from(small));
  } finally {
    await a.close();
    await b.close();
  }
});
