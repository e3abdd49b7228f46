// Runs every compiled test file under dist/test with node's built-in test runner (Node 20 takes no globs).
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function find(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return find(p);
    return name.endsWith('.test.js') ? [p] : [];
  });
}

const only = process.argv.slice(2);
const files = find('dist/test')
  .filter((f) => only.length === 0 || only.some((o) => f.includes(o)))
  .sort();
if (files.length === 0) {
  console.error('no test files found under dist/test (did the build run?)');
  process.exit(1);
}
const r = spawnSync(process.execPath, ['--test', '--test-reporter=spec', ...files], { stdio: 'inherit' });
process.exit(r.status ?? 1);
