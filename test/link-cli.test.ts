// `hacrl` on the PATH after scripts/setup.sh (issue 58, item 8): its link step, run twice, then `hacrl --help` from
// another folder through the PATH; a file of someone else's in the link's place is left alone.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const root = await mkdtemp(join(tmpdir(), 'hacrl-link-'));
after(() => rm(root, { recursive: true, force: true }));

const link = (binDir: string) =>
  spawnSync('bash', ['scripts/link-cli.sh'], { encoding: 'utf8', env: { ...process.env, HACRL_BIN_DIR: binDir } });

test('scripts/link-cli.sh makes `hacrl` a command, idempotently, and never replaces a file it did not write', async () => {
  const bin = join(root, 'bin');
  assert.equal(link(bin).status, 0);
  const again = link(bin);
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stdout, /already runs this checkout's hacrl/);
  const help = spawnSync('hacrl', ['--help'], {
    encoding: 'utf8',
    cwd: root,
    env: { ...process.env, PATH: `${bin}:${process.env.PATH}` },
  });
  assert.equal(help.status, 0, help.stderr);
  assert.match(help.stdout, /^Usage: hacrl /);
  const other = join(root, 'other');
  await link(other);
  await rm(join(other, 'hacrl'));
  await writeFile(join(other, 'hacrl'), 'not ours');
  const refused = link(other);
  assert.equal(refused.status, 1);
  assert.match(refused.stderr, /exists and is not a link; leaving it/);
});
