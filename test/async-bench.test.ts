// `hacrl bench async --test` end to end over a real nats-server: the tiny pair as two pinned agent processes,
// lockstep and async-2; the output files, and numbers that agree with the run folders they come from.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile, readdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { AsyncRunResult } from '../src/experiments/async-bench.js';
import { hacrl } from './cli.js';

const root = await mkdtemp(join(tmpdir(), 'hacrl-async-bench-'));
after(() => rm(root, { recursive: true, force: true }));
const natsMissing = spawnSync('nats-server', ['--version']).error !== undefined;

interface ManifestLine {
  step: number;
  consumed?: { agent: string; step: number }[];
}

test(
  'bench async --test: lockstep and async-2 measured, steps counted, waiting shares in [0, 1], maxAhead held',
  { skip: natsMissing && 'nats-server is not installed (bash scripts/setup.sh installs it)' },
  async () => {
    const out = join(root, 'bench');
    const r = hacrl(['bench', 'async', '--test', '--out', out, '--zoo-dir', join(root, 'zoo')]);
    assert.equal(r.status, 0, r.stderr);
    const page = await readFile(join(out, 'results.md'), 'utf8');
    assert.match(page, /^## hacrl bench async --test/);
    assert.match(page, /commit \S+; \d+ × .+; 1 kernel thread per agent/);
    assert.match(page, /\| async-2 − lockstep \| small \|/);
    const json = JSON.parse(await readFile(join(out, 'results.json'), 'utf8')) as {
      results: AsyncRunResult[];
      plan: { steps: number };
    };
    const { steps } = json.plan;
    assert.deepEqual(
      json.results.map((x) => x.setting),
      ['lockstep', 'async-2'],
    );
    for (const run of json.results) {
      const dir = join(out, 'runs', run.id);
      for (const [agent, m] of Object.entries(run.agents)) {
        const what = `${run.id}/${agent}`;
        assert.equal(m.steps, steps, `${what}: steps counted`);
        const checkpoints = (await readdir(join(dir, agent, 'checkpoints'))).filter((n) => n.startsWith('step-'));
        assert.equal(checkpoints.length, steps, `${what}: a checkpoint per step`);
        for (const share of [m.waitingShare, m.boundWaitShare])
          assert.ok(share >= 0 && share <= 1, `${what}: share ${share} in [0, 1]`);
        assert.ok(m.stepsPerHour > 0 && Number.isFinite(m.stepsPerHour), `${what}: ${m.stepsPerHour} steps/h`);
        assert.equal(m.atEqualSteps?.length, 12, `${what}: 12 held-out problems measured`);
        assert.ok(m.atEqualWall !== undefined && m.atEqualWall.step <= steps, `${what}: a checkpoint at equal time`);
        if (run.maxAhead === null) {
          assert.equal(m.boundWaitShare, 0, `${what}: lockstep never waits at a bound`);
          continue;
        }
        // null: the partner published no step before this agent's last (a fast agent started first runs alone).
        assert.ok(m.maxLead === null || m.maxLead <= run.maxAhead, `${what}: lead ${m.maxLead} ≤ ${run.maxAhead}`);
        // The bench's partner counts are the manifest's.
        const manifest = (await readFile(join(dir, agent, 'manifest.jsonl'), 'utf8'))
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as ManifestLine);
        const consumed = manifest.flatMap((l) => l.consumed ?? []);
        const partner = Object.keys(run.agents).find((a) => a !== agent)!;
        assert.equal(m.partners[partner]?.consumed, consumed.filter((c) => c.agent === partner).length, what);
        for (const l of manifest.filter((x) => x.step >= 1))
          for (const c of l.consumed ?? [])
            assert.ok(l.step - c.step <= run.maxAhead, `${what}: step ${l.step} took ${partner}'s ${c.step}`);
      }
      if (run.maxAhead !== null) {
        const used = Object.values(run.agents).flatMap((m) => Object.values(m.partners).map((p) => p.consumed));
        assert.ok(
          used.some((n) => n > 0),
          `${run.id}: some agent trained on a partner's step`,
        );
      }
    }
  },
);
