// scripts/trial-real-models.sh at the small shape: Hub-shaped Qwen2.5 and Llama-3.2 folders (Hub config.json and
// generation_config.json, their real tokenizers), then plan → train → SIGINT → resume → eval → serve → lora merge →
// export gguf → llama.cpp → a `hacrl agent` pair over a nats-server, each stage checked by the script itself (it exits
// non-zero at the first that fails); here, that it ran every stage and the agent pair ended as `hacrl train` did.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const work = await mkdtemp(join(tmpdir(), 'hacrl-trial-'));
after(() => rm(work, { recursive: true, force: true }));

test('the trial path runs as one script, every stage in turn', () => {
  const r = spawnSync('bash', ['scripts/trial-real-models.sh', work], {
    encoding: 'utf8',
    env: { ...process.env, HACRL_THREADS: '1' },
  });
  assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
  const stages = [...r.stdout.matchAll(/^== (\S+)/gm)].map((m) => m[1]);
  assert.deepEqual(stages, [
    'Hub-shaped',
    'plan',
    'train,',
    'resume',
    'eval',
    'serve',
    'lora',
    'export',
    'llama.cpp',
    'a',
    'done:',
  ]);
  // A Ctrl-C inside a step drops it (resume from the newest checkpoint); one between steps checkpoints that step.
  assert.match(r.stdout, /stopped by SIGINT (after step [23];|during step [234] \(.+\), which was dropped;)/);
  assert.match(r.stdout, /200: ".*" \(\d+ tokens\)/);
  assert.match(r.stdout, /qwen: adapters byte-equal to those of hacrl train/);
  assert.match(r.stdout, /llama: adapters byte-equal to those of hacrl train/);
});
