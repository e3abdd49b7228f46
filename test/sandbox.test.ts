// The sandbox for model-written code: a loop, a memory bomb, a fork bomb, a write outside the scratch folder and a
// huge output are each stopped and reported as their own outcome; a normal program's output comes back.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { runSandboxed } from '../src/sandbox/run-code.js';

// Programs that end by themselves get a generous wall-time limit, so a busy machine cannot turn them into time-outs.
const SLOW_OK = { timeoutMs: 60000 };

describe('sandbox', () => {
  test('a normal program: its output, outcome ok', async () => {
    const r = await runSandboxed('const x = [1, 2, 3].reduce((a, b) => a + b, 0) * 7;\nconsole.log(x);', SLOW_OK);
    assert.equal(r.outcome, 'ok');
    assert.equal(r.stdout, '42\n');
  });

  test('limits under which Node itself cannot start are reported, not scored as failures of the program', async () => {
    await assert.rejects(runSandboxed('console.log(2)', { addressSpaceMb: 512 }), /an empty program ends as/);
  });

  test('an equal program (text and limits) gets the earlier result, also when asked together; reuseResults: false runs each', async () => {
    const random = 'console.log(Math.random())';
    const [a, b] = await Promise.all([runSandboxed(random, SLOW_OK), runSandboxed(random, SLOW_OK)]);
    const c = await runSandboxed(random, SLOW_OK);
    assert.equal(a.outcome, 'ok', a.stderr);
    assert.deepEqual([b.stdout, c.stdout], [a.stdout, a.stdout]);
    const other = await runSandboxed(random, { ...SLOW_OK, heapMb: 65 });
    assert.notEqual(other.stdout, a.stdout, 'other limits, another run');
    const fresh = await runSandboxed(random, { ...SLOW_OK, reuseResults: false });
    const fresh2 = await runSandboxed(random, { ...SLOW_OK, reuseResults: false });
    assert.notEqual(fresh.stdout, fresh2.stdout);
    assert.notEqual(fresh.stdout, a.stdout);
  });

  test('the program sees PATH and no other environment variable', async () => {
    const r = await runSandboxed('console.log(JSON.stringify(Object.keys(process.env)))', SLOW_OK);
    assert.equal(r.outcome, 'ok', r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), ['PATH']);
  });

  test('an exception is an error, with its message', async () => {
    const r = await runSandboxed('throw new Error("boom")', SLOW_OK);
    assert.equal(r.outcome, 'error');
    assert.match(r.stderr, /boom/);
  });

  test('programs started together run at most one per core at a time, so the wall-time limit does not depend on load', async () => {
    // Each program busy-waits 150 ms between two timestamps; without the limit all would overlap.
    const program = 'const t = Date.now(); while (Date.now() - t < 150) {} console.log(t, Date.now());';
    const runs = await Promise.all(
      Array.from({ length: 3 * availableParallelism() }, () =>
        runSandboxed(program, { ...SLOW_OK, reuseResults: false }),
      ),
    );
    const spans = runs.map((r) => r.stdout.trim().split(' ').map(Number) as [number, number]);
    const overlapping = spans.map(([start]) => spans.filter(([a, b]) => a <= start && start < b).length);
    assert.ok(Math.max(...overlapping) <= availableParallelism(), `at most ${availableParallelism()}: ${overlapping}`);
  });

  test('an infinite loop is killed at the wall-time limit', async () => {
    const r = await runSandboxed('for (;;) {}', { timeoutMs: 500 });
    assert.equal(r.outcome, 'timeout');
    assert.equal(r.signal, 'SIGKILL');
  });

  test('memory bombs (V8 heap and array buffers) stop at the memory limits', async () => {
    const heap = await runSandboxed('const a = []; for (;;) a.push(new Array(1e5).fill(Math.random()));', {
      ...SLOW_OK,
    });
    assert.equal(heap.outcome, 'memory', heap.stderr.slice(0, 300));
    const buffers = await runSandboxed('const a = []; for (;;) a.push(Buffer.alloc(1e8, 1));', { ...SLOW_OK });
    assert.equal(buffers.outcome, 'memory', buffers.stderr.slice(0, 300));
  });

  test('a fork bomb is refused: no child processes, no worker threads', async () => {
    const fork = await runSandboxed(
      'const cp = require("child_process"); for (;;) cp.spawn(process.execPath, [__filename]);',
      SLOW_OK,
    );
    assert.equal(fork.outcome, 'denied');
    const worker = await runSandboxed('const { Worker } = require("worker_threads"); for (;;) new Worker(__filename);');
    assert.equal(worker.outcome, 'denied');
  });

  test('writing or reading outside the scratch folder is refused; inside it works', async () => {
    const target = join(tmpdir(), `hacrl-sandbox-escape-${process.pid}.txt`);
    const write = await runSandboxed(`require("fs").writeFileSync(${JSON.stringify(target)}, "x")`, SLOW_OK);
    assert.equal(write.outcome, 'denied');
    assert.equal(existsSync(target), false);
    const read = await runSandboxed('console.log(require("fs").readFileSync("/etc/hostname", "utf8"))', SLOW_OK);
    assert.equal(read.outcome, 'denied');
    const inside = await runSandboxed(
      'const fs = require("fs"); fs.writeFileSync(__dirname + "/a.txt", "kept"); console.log(fs.readFileSync(__dirname + "/a.txt", "utf8"));',
      SLOW_OK,
    );
    assert.equal(inside.outcome, 'ok');
    assert.equal(inside.stdout, 'kept\n');
  });

  test('a huge output is cut at the limit and the process killed', async () => {
    const r = await runSandboxed('for (;;) console.log("x".repeat(1000));', { ...SLOW_OK, maxOutputBytes: 4096 });
    assert.equal(r.outcome, 'output-limit');
    assert.ok(r.stdout.length <= 4096);
    const file = await runSandboxed(
      'const fs = require("fs"); const b = Buffer.alloc(1 << 16); for (;;) fs.appendFileSync(__dirname + "/big", b);',
      { ...SLOW_OK, maxFileBytes: 1 << 18 },
    );
    assert.equal(file.outcome, 'output-limit', file.stderr.slice(0, 300));
  });

  test('the network: unreachable (a server of this process is not reached)', async () => {
    const server = createServer((_, res) => res.end('reached'));
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    const port = (server.address() as AddressInfo).port;
    try {
      const r = await runSandboxed(
        `fetch("http://127.0.0.1:${port}/").then(r => r.text()).then(t => console.log(t), e => console.log("failed", e.cause?.code));`,
        SLOW_OK,
      );
      assert.match(r.stdout, /^failed/);
    } finally {
      server.close();
    }
  });
});
