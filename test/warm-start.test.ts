// Warm-start rows from solver traces: bounded by count, seeded, prompts exactly the workflow's observations, and a
// policy that answers every prompt with its row's response solves every instance.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { SOKOBAN_BENCH } from '../src/envs/sokoban.js';
import type { Policy } from '../src/workflows/policy.js';
import { buildWorkflow } from '../src/workflows/registry.js';
import { treeRollout } from '../src/workflows/tree-sampling.js';
import { warmStartRows } from '../src/workflows/warm-start.js';

describe('warm-start rows', () => {
  for (const [label, config] of [
    ['plan-path', { name: 'plan-path', env: { height: 5, width: 5 } }],
    ['sokoban', { name: 'sokoban', env: { size: 6 } }],
    ['sudoku', { name: 'sudoku', env: { blanks: 6 } }],
    // A 1 ms limit fails every program that starts a process: the tool's programs are worked out in-process.
    [
      'sokoban, tool in code mode',
      { name: 'sokoban', env: SOKOBAN_BENCH, toolMode: 'code', sandbox: { timeoutMs: 1 } },
    ],
  ] as const) {
    test(`${label}: a policy replaying the rows solves all 6 instances`, async () => {
      const wf = buildWorkflow({ ...config, maxTurns: 2 });
      const rows = await warmStartRows(wf, { count: 12, seed: 100 });
      assert.equal(rows.length, 12);
      assert.deepEqual(
        rows.map((r) => r.role),
        Array.from({ length: 12 }, (_, i) => (i % 2 ? 'planner' : 'tool')),
      );
      assert.deepEqual(await warmStartRows(wf, { count: 12, seed: 100 }), rows, 'same seed, same rows');
      const answer = new Map(rows.map((r) => [r.prompt, r.response]));
      const teacher: Policy = {
        generate: async (prompts) =>
          prompts.map((p) => {
            const text = answer.get(p);
            assert.ok(text !== undefined, `a rollout prompt not in the warm-start rows:\n${p}`);
            return { text };
          }),
      };
      const seeds = [100, 101, 102, 103, 104, 105];
      const { episodes } = await treeRollout(wf, { seeds, groupSize: 1, policies: { shared: teacher } });
      assert.deepEqual(
        episodes.map((e) => e.success),
        seeds.map(() => true),
      );
    });
  }

  test('detours: rows off the solver path (wrong proposals, second turns), each still teaching a shortest path', async () => {
    const wf = buildWorkflow({ name: 'plan-path', env: { height: 4, width: 4, wallProb: 0.1 }, maxTurns: 2 });
    const plain = await warmStartRows(wf, { count: 200, seed: 0 });
    assert.deepEqual(await warmStartRows(wf, { count: 200, seed: 0, detour: 0 }), plain, 'detour 0 is the default');
    assert.ok(
      plain.every((r) => r.turn === 0),
      'the solver solves every instance in its first turn',
    );
    const rows = await warmStartRows(wf, { count: 200, seed: 0, detour: 0.5 });
    assert.deepEqual(await warmStartRows(wf, { count: 200, seed: 0, detour: 0.5 }), rows, 'same seed, same rows');
    const second = rows.filter((r) => r.turn === 1).length;
    const wrongProposal = rows.filter((r) => r.role === 'planner' && !/simulated: reached the goal/.test(r.prompt));
    assert.ok(
      second >= 20 && wrongProposal.length >= 20,
      `second-turn rows ${second}, wrong proposals ${wrongProposal.length}`,
    );
    // Every row's response, walked on the grid its prompt draws from the position it states, reaches the goal in
    // exactly the number of moves BFS needs (the solver's answer for that state, not the detour's).
    for (const r of rows) {
      const lines = r.prompt.split('\n');
      const grid = lines.slice(2, 6);
      const at = (ch: string): [number, number] => {
        const row = grid.findIndex((l) => l.includes(ch));
        return [row, grid[row]!.indexOf(ch)];
      };
      let [y, x] = at('A');
      const goal = at('G');
      const moves = JSON.parse(r.response) as string[];
      for (const m of moves) {
        const [dy, dx] = { U: [-1, 0], D: [1, 0], L: [0, -1], R: [0, 1] }[m as 'U']!;
        assert.notEqual(grid[y + dy]?.[x + dx] ?? '#', '#', `a move into a wall in\n${r.prompt}\n${r.response}`);
        [y, x] = [y + dy, x + dx];
      }
      assert.deepEqual([y, x], goal, `${r.response} does not reach the goal in\n${r.prompt}`);
    }
    await assert.rejects(warmStartRows(wf, { count: 1, seed: 0, detour: 2 }), /detour must be in \[0, 1\]/);
  });

  test('sokoban in code mode with detours: each tool row calls solve on the room its prompt draws; each proposal was worked out', async () => {
    const codeMode = { name: 'sokoban', env: SOKOBAN_BENCH, maxTurns: 2, toolMode: 'code', sandbox: { timeoutMs: 1 } };
    const wf = buildWorkflow(codeMode);
    const rows = await warmStartRows(wf, { count: 200, seed: 0, detour: 0.5 });
    const second = rows.filter((r) => r.turn === 1 && r.role === 'tool');
    assert.ok(second.length >= 10, `${second.length} second-turn tool rows`);
    for (const r of rows) {
      if (r.role === 'tool') {
        const room = r.prompt.split('\n').slice(2, 8);
        assert.equal(r.response, `console.log(solve(\`${room.join('\n')}\`))`, r.prompt);
      } else assert.match(r.prompt, /\nThe tool says: \[[^\n]*\] \(simulated: [^\n]*\)\n/, r.prompt);
    }
    const solvedProposals = rows.filter((r) => r.role === 'planner' && /simulated: solved/.test(r.prompt)).length;
    assert.ok(solvedProposals >= 50, `${solvedProposals} planner rows after a solving proposal`);
  });

  test('detourRoles: only the planner detours, so every planner row copies a solving proposal and second turns remain', async () => {
    const codeMode = { name: 'sokoban', env: SOKOBAN_BENCH, maxTurns: 2, toolMode: 'code', sandbox: { timeoutMs: 1 } };
    const wf = buildWorkflow(codeMode);
    const rows = await warmStartRows(wf, { count: 200, seed: 0, detour: 0.5, detourRoles: ['planner'] });
    const planner = rows.filter((r) => r.role === 'planner');
    const copies = planner.filter((r) => {
      const told = /\nThe tool says: (\[[^\n]*\]) \(simulated: solved/.exec(r.prompt);
      return told !== null && told[1] === r.response;
    });
    assert.equal(copies.length, planner.length, 'each planner row answers with the solving list the tool proposed');
    const second = rows.filter((r) => r.turn === 1).length;
    assert.ok(second >= 20, `${second} second-turn rows (the planner's detours)`);
    const all = await warmStartRows(wf, { count: 200, seed: 0, detour: 0.5 });
    const overrule = all.filter((r) => r.role === 'planner' && !/simulated: solved/.test(r.prompt)).length;
    assert.ok(overrule >= 20, `${overrule} planner rows after a wrong proposal when every role detours`);
    await assert.rejects(
      warmStartRows(wf, { count: 1, seed: 0, detour: 0.5, detourRoles: ['coder'] }),
      /no acting role "coder"/,
    );
  });

  test('roles filter and bounds: planner rows only; bad count or role refused', async () => {
    const wf = buildWorkflow({ name: 'plan-path', env: { height: 4, width: 4 } });
    const rows = await warmStartRows(wf, { count: 5, seed: 0, roles: ['planner'] });
    assert.equal(rows.length, 5);
    assert.ok(rows.every((r) => r.role === 'planner' && r.prompt.startsWith('[planner]')));
    await assert.rejects(warmStartRows(wf, { count: 0, seed: 0 }), /count must be ≥ 1/);
    await assert.rejects(warmStartRows(wf, { count: 1, seed: 0, roles: ['coder'] }), /no acting role "coder"/);
  });

  test("math-tool: the tool row is a program computing the answer from the question's numbers, worked out without a process", async () => {
    // A 1 ms limit fails every program that starts a process: each printed answer below was worked out.
    const wf = buildWorkflow({ name: 'math-tool', maxTurns: 1, sandbox: { timeoutMs: 1 } });
    const rows = await warmStartRows(wf, { count: 40, seed: 7 });
    for (let i = 0; i < rows.length; i += 2) {
      const { question, answer } = wf.env.reset(7 + i / 2) as { question: string; answer: string };
      const [, a, op, b] = /^What is (\d+)([-+])(\d+)\?$/.exec(question)!;
      assert.equal(rows[i]!.response, `console.log(${a}${op}${b})`);
      assert.match(rows[i + 1]!.prompt, new RegExp(`The tool says: the program printed ${answer}\n`));
      assert.equal(rows[i + 1]!.response, `\\boxed{${answer}}`);
    }
  });
});
