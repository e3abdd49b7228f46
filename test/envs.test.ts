// AT-GRPO environments: every generated instance solvable (uniquely, for Sudoku, with the givens kept), and rewards
// equal to episodes worked by hand from the spec, including invalid moves and time-outs.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { mathAnswerCorrect, mathEnv, mathProgramOutput, toolOutputReward } from '../src/envs/math.js';
import { type PlanPathState, planPathEnv, stepPlanPath } from '../src/envs/plan-path.js';
import {
  SOKOBAN_BENCH,
  type SokobanState,
  initialSokoban,
  minimumPushes,
  sokobanEnv,
  solveSokoban,
  stepSokoban,
} from '../src/envs/sokoban.js';
import { countSolutions, firstCompletion, parseSudokuGrid, stepSudoku, sudokuEnv } from '../src/envs/sudoku.js';
import type { Environment } from '../src/envs/environment.js';
import { gridPath, moveListAction, parseMoveList } from '../src/envs/grid.js';
import { runSandboxed } from '../src/sandbox/run-code.js';

const close = (a: number, b: number, msg?: string): void =>
  assert.ok(Math.abs(a - b) < 1e-9, `${msg ?? ''} expected ${b}, got ${a}`);

/**
 * The grid environments' tool-program check: the expert programs and copies with errors run in the sandbox after the
 * environment's routines; every expert, and every copy the environment works out in-process, prints exactly what it
 * works out. Returns every run's stdout (experts first) and how many copies were worked out.
 */
async function checkWorkedOut<S, A>(
  env: Environment<S, A>,
  experts: string[],
  variants: string[],
): Promise<{ stdout: string[]; known: number }> {
  const library = env.programLibrary!.code;
  const runs = await Promise.all(
    [...experts, ...variants].map((code) => runSandboxed(`${library}\n${code}`, { timeoutMs: 60_000 })),
  );
  experts.forEach((code, i) => {
    assert.equal(runs[i]!.outcome, 'ok', `expert ${i}: ${runs[i]!.stderr}`);
    assert.equal(env.programOutput!(code), runs[i]!.stdout, `expert ${i}`);
  });
  let known = 0;
  variants.forEach((code, i) => {
    const out = env.programOutput!(code);
    if (out === null) return;
    known++;
    const run = runs[experts.length + i]!;
    assert.deepEqual([run.outcome, run.stdout], ['ok', out], `variant ${i}:\n${code}`);
  });
  return { stdout: runs.map((r) => r.stdout), known };
}

describe('move lists', () => {
  test('the last JSON list of U/D/L/R counts; other lists and prose are skipped', () => {
    assert.deepEqual(parseMoveList('think [1,2] then ["R","D"]'), ['R', 'D']);
    assert.deepEqual(parseMoveList('["U"] no wait ["x"]'), ['U']);
    assert.deepEqual(parseMoveList('[]'), []);
    assert.equal(parseMoveList('R, D'), null);
  });

  test("letters: one word of U/D/L/R (the last), a JSON list read too, printed as a word; json stays the spec's", () => {
    const letters = moveListAction('letters');
    assert.deepEqual(letters.parseAction('RD'), ['R', 'D']);
    assert.deepEqual(letters.parseAction('first UU, then LLR'), ['L', 'L', 'R']);
    assert.deepEqual(letters.parseAction('["U","L"]'), ['U', 'L'], 'what a sandbox routine prints');
    assert.equal(letters.parseAction('Right, down'), null);
    assert.equal(letters.parseAction('RDX'), null, 'a word with another letter is not a move list');
    assert.equal(letters.parseAction(''), null);
    assert.equal(letters.formatAction(['R', 'U', 'R']), 'RUR');
    assert.match(letters.actionFormat, /one word of letters.*e\.g\. RD\./);
    const json = moveListAction('json');
    assert.equal(json.formatAction(['R', 'U']), '["R","U"]');
    assert.equal(json.parseAction('RU'), null);
  });
});

describe('Plan-Path', () => {
  // 3×3, one wall in the centre; start top-left, goal bottom-right; shortest path 4 moves.
  const instance = {
    id: 'hand',
    rows: ['...', '.#.', '...'],
    start: [0, 0] as const,
    goal: [2, 2] as const,
    shortest: 4,
  };
  const start: PlanPathState = { instance, pos: [0, 0], validMoves: 0, atGoal: false };

  test('hand-worked: a valid move, an invalid move into the wall, then the goal by the shortest path', () => {
    // R: (0,0)→(0,1): −0.01 + (0.99·(−3) − (−4)) = −0.01 + 1.03. D into the wall: −0.10 + (0.99·(−3) − (−3)) = −0.10 + 0.03.
    const t1 = stepPlanPath(start, ['R', 'D']);
    close(t1.reward, 1.02 - 0.07);
    close(t1.parts.invalid!, -0.1);
    assert.deepEqual(t1.state.pos, [0, 1]);
    assert.equal(t1.done, false);
    // R, D, D: −0.03 + (0.99·(−2)+3) + (0.99·(−1)+2) + (0+1) + goal 1 + optimal 0.5 (4 valid moves = shortest).
    const t2 = stepPlanPath(t1.state, ['R', 'D', 'D', 'L']);
    close(t2.reward, -0.03 + 1.02 + 1.01 + 1 + 1 + 0.5);
    close(t2.parts.optimal!, 0.5);
    assert.equal(t2.done && t2.success, true);
    assert.deepEqual(t2.state.pos, [2, 2], 'moves after the goal are ignored');
  });

  test('a detour reaches the goal without the shortest-path bonus', () => {
    const t = stepPlanPath(start, ['D', 'U', 'D', 'D', 'R', 'R']);
    assert.equal(t.success, true);
    assert.equal(t.parts.optimal, 0);
    // valid −0.06; shaping: 1.03, 0.99·(−4)+3 = −0.96, 1.03, 1.02, 1.01, 1.0; goal +1.
    close(t.reward, -0.06 + 1.03 - 0.96 + 1.03 + 1.02 + 1.01 + 1 + 1);
  });

  test('no action ([] or nothing parsable) gets −1 and moves nothing, below a walk into a wall', () => {
    for (const none of [stepPlanPath(start, null), stepPlanPath(start, [])]) {
      assert.equal(none.reward, -1);
      assert.deepEqual(none.parts, { noAction: -1 });
      assert.deepEqual(none.state, start);
      assert.equal(none.done, false);
    }
    // D from (0,0) is a valid move away from nothing: −0.01 + (0.99·(−3) − (−4)) = 1.02; U into the edge −0.10 + 0.04.
    assert.ok(stepPlanPath(start, ['U']).reward > stepPlanPath(start, []).reward);
  });

  test('a finished episode ignores further actions: r_env 0, no second goal payment, still solved', () => {
    const done = stepPlanPath(start, ['R', 'R', 'D', 'D']).state;
    for (const again of [stepPlanPath(done, ['L', 'R']), stepPlanPath(done, []), stepPlanPath(done, null)]) {
      assert.equal(again.reward, 0);
      assert.equal(again.done && again.success, true);
      assert.deepEqual(again.state, done);
    }
  });

  test('the observation shows the CURRENT position, not the start', () => {
    const env = planPathEnv({ height: 3, width: 3, wallProb: 0 });
    const moved = stepPlanPath(start, ['R']).state;
    const text = env.render(moved);
    assert.match(text, /You are at \(row 0, col 1\)/);
    assert.equal(text.split('\n')[1], '.A.');
  });

  test('200 generated instances: goal reachable, start and goal free and distinct, shortest = BFS length', () => {
    const env = planPathEnv({ height: 6, width: 6 });
    for (let seed = 0; seed < 200; seed++) {
      const s = env.reset(seed);
      const path = gridPath({ rows: s.instance.rows }, s.instance.start, s.instance.goal);
      assert.ok(path, `seed ${seed}: unreachable`);
      assert.equal(path.length, s.instance.shortest);
      const run = stepPlanPath(s, env.solve(s));
      assert.equal(run.success, true, `seed ${seed}: solver path fails`);
      close(run.parts.optimal!, 0.5);
    }
    assert.deepEqual(env.reset(7), env.reset(7), 'same seed, same instance');
  });

  test('difficulty knobs: maxShortest bounds the path; bad knobs are refused naming the field', () => {
    const env = planPathEnv({ height: 5, width: 5, maxShortest: 3 });
    for (let seed = 0; seed < 50; seed++) assert.ok(env.reset(seed).instance.shortest <= 3);
    assert.throws(() => planPathEnv({ wallProb: 0.9 }), /wallProb/);
  });

  test("the tool agent's program: the expert's prints the solver's path; the template's output is worked out as the sandbox prints it", async () => {
    const env = planPathEnv({ height: 6, width: 6 });
    const states = Array.from({ length: 8 }, (_, seed) => {
      const s = env.reset(seed);
      // Every other one after a move, so the program must read A where the observation draws it, not the start.
      const moved = seed % 2 ? stepPlanPath(s, env.solve(s)!.slice(0, 1)).state : s;
      return moved.atGoal ? s : moved;
    });
    const experts = states.map((s) => env.program!(s));
    // Copies with errors a small agent makes: a cell flipped (a wall that may cut A off from G), G lost, a row short,
    // and a different program.
    const flip = (code: string, at: number) => {
      const grid = code.indexOf('`') + 1 + at;
      const ch = code[grid] === '#' ? '.' : code[grid] === '.' ? '#' : code[grid];
      return code.slice(0, grid) + ch + code.slice(grid + 1);
    };
    const variants = [
      ...experts.flatMap((c, i) => [7, 14, 20].map((at) => flip(c, (at * (i + 1)) % 40))),
      experts[0]!.replace('G', '.'),
      experts[1]!.replace(/\n[.#AG]{6}\n/, '\n....\n'),
      experts[2]!.replace('console.log(', 'console.log("x"+'),
    ];
    const { stdout, known } = await checkWorkedOut(env, experts, variants);
    // The solver's own path, move for move.
    states.forEach((s, i) => assert.deepEqual(env.parseAction(stdout[i]!), env.solve(s), `state ${i}: ${stdout[i]}`));
    assert.ok(known >= 10 && known < variants.length, `${known} of ${variants.length} variants worked out`);
  });
});

describe('Sokoban', () => {
  // 5×5 open room: player (3,1), box (2,2), goal (1,2).
  const instance = {
    id: 'hand',
    rows: ['#####', '#   #', '#   #', '#   #', '#####'],
    goal: [1, 2] as const,
    box: [2, 2] as const,
    player: [3, 1] as const,
    maxSteps: 200,
  };
  const start: SokobanState = initialSokoban(instance);

  test('hand-worked: a walk, an invalid move into the wall, then the winning push', () => {
    // R: −0.01 + 0.1·(0.99·(−1) − (−1)) = −0.01 + 0.001. L, L: (3,2)→(3,1) valid, then (3,0) wall: −0.05 + 0.001.
    const t1 = stepSokoban(start, ['R']);
    close(t1.reward, -0.009);
    const t2 = stepSokoban(t1.state, ['L', 'L']);
    close(t2.reward, -0.01 + 0.001 - 0.05 + 0.001);
    // R, U: walk back, then push the box onto the goal: −0.01 + 0.1·(0 + 1) + 1 (onto goal) + 10 (win).
    const t3 = stepSokoban(t2.state, ['R', 'U', 'D']);
    close(t3.reward, -0.009 - 0.01 + 0.1 + 1 + 10);
    assert.equal(t3.done && t3.success, true);
    assert.equal(t3.state.steps, 5, 'moves after the win are ignored');
    assert.match(sokobanEnv().render(t3.state), /\*/);
  });

  test("moves as letters: the solver's answer is a word that solves the room; the tool's printed JSON list reads the same", () => {
    const env = sokobanEnv({ ...SOKOBAN_BENCH, moves: 'letters' });
    const s = env.reset(7);
    const answer = env.formatAction(solveSokoban(s)!);
    assert.match(answer, /^[UDLR]{5,}$/);
    assert.match(env.actionFormat, /one word of letters.*Walking into the box pushes it\./);
    const step = env.step(s, env.parseAction(answer));
    assert.equal(step.success, true);
    const printed = env.programOutput!(env.program!(s))!;
    assert.deepEqual(env.parseAction(printed), env.parseAction(answer));
    assert.throws(() => sokobanEnv({ moves: 'words' as 'json' }), /moves/);
    assert.equal(sokobanEnv().formatAction(['R', 'D']), '["R","D"]', 'json by default');
  });

  test('pushing the box into a wall is invalid and moves nothing', () => {
    const nearWall = initialSokoban({ ...instance, box: [1, 1], player: [2, 1] });
    const t = stepSokoban(nearWall, ['U']);
    close(t.reward, -0.05 + 0.1 * (0.99 * -1 + 1));
    assert.deepEqual(t.state.box, [1, 1]);
  });

  test('a time-out is NOT a success: −5 at the step limit, episode over', () => {
    const s = initialSokoban({ ...instance, maxSteps: 3 });
    const t = stepSokoban(s, ['L', 'L', 'L', 'R']);
    // (3,1)→(3,0) is a wall each time: 3 × (−0.05 + 0.001), then −5; the 4th move is never made.
    close(t.reward, 3 * -0.049 - 5);
    assert.equal(t.done, true);
    assert.equal(t.success, false);
    assert.equal(t.state.steps, 3);
  });

  test('no action ([] or nothing parsable) gets −1 and uses no moves, below a walk that costs −0.01', () => {
    for (const none of [stepSokoban(start, null), stepSokoban(start, [])]) {
      assert.equal(none.reward, -1);
      assert.deepEqual(none.parts, { noAction: -1 });
      assert.deepEqual(none.state, start);
    }
    // The hole this closes: a walk that pushes nothing scores below 0 (R: −0.01 + 0.1·(0.99·(−1) + 1)), and [] used
    // to score 0 above it; even a move into the wall (D: −0.05 + 0.001) now beats doing nothing.
    close(stepSokoban(start, ['R']).reward, -0.009);
    close(stepSokoban(start, ['D']).reward, -0.049);
  });

  test('a finished episode ignores further actions: solved stays solved and unpaid, a time-out is not charged again', () => {
    const solved = stepSokoban(start, ['R', 'U']).state;
    assert.equal(solved.solved, true);
    for (const again of [stepSokoban(solved, ['D']), stepSokoban(solved, [])]) {
      assert.deepEqual([again.reward, again.done, again.success], [0, true, true]);
      assert.deepEqual(again.state, solved);
    }
    const out = stepSokoban(initialSokoban({ ...instance, maxSteps: 1 }), ['L']).state;
    assert.equal(out.timedOut, true);
    assert.deepEqual([stepSokoban(out, ['R', 'U']).reward, stepSokoban(out, null).success], [0, false]);
  });

  test('minimumPushes: fewest pushes over all solutions (hand rooms), null when unsolvable', () => {
    assert.equal(minimumPushes(start), 1);
    // 6×6 room (floor rows and columns 1–4), goal (1,2), box (3,2), player (3,3): walk D, L, then push U twice.
    const big = { ...instance, rows: ['######', '#    #', '#    #', '#    #', '#    #', '######'] };
    const two = initialSokoban({ ...big, box: [3, 2], player: [3, 3] });
    assert.equal(minimumPushes(two), 2);
    assert.deepEqual(solveSokoban(two), ['D', 'L', 'U', 'U']);
    // The box against the bottom wall of the 5×5 room can never be pushed up; in a corner it never moves at all.
    assert.equal(minimumPushes(initialSokoban({ ...instance, box: [3, 2], player: [3, 3] })), null);
    assert.equal(minimumPushes(initialSokoban({ ...instance, box: [3, 3], player: [2, 2] })), null);
  });

  test('difficulty knobs: every room needs minPushes pushes and minMoves moves; an unreachable knob is refused', () => {
    const env = sokobanEnv(SOKOBAN_BENCH);
    for (let seed = 0; seed < 60; seed++) {
      const s = env.reset(seed);
      assert.ok(minimumPushes(s)! >= 3, `seed ${seed}: ${minimumPushes(s)} pushes`);
    }
    const long = sokobanEnv({ minMoves: 8, reverseSteps: 40 });
    for (let seed = 0; seed < 30; seed++) assert.ok(solveSokoban(long.reset(seed))!.length >= 8, `seed ${seed}`);
    // A 4×4 room has a 2×2 floor: no box is ever more than 2 pushes from the goal.
    assert.throws(() => sokobanEnv({ size: 4, minPushes: 5 }).reset(0), /no room in 1000 draws.*lower minPushes/);
    assert.throws(() => sokobanEnv({ minMoves: 300 }), /minMoves/);
    assert.deepEqual(sokobanEnv().reset(11), sokobanEnv({ minPushes: 1 }).reset(11), 'the defaults keep the rooms');
  });

  test('200 generated rooms (with inner walls too) are all solved by the BFS solver', () => {
    for (const opts of [{ size: 6 }, { size: 7, wallProb: 0.15, reverseSteps: 40 }]) {
      const env = sokobanEnv(opts);
      for (let seed = 0; seed < 100; seed++) {
        const s = env.reset(seed);
        const moves = solveSokoban(s);
        assert.ok(moves && moves.length > 0, `${JSON.stringify(opts)} seed ${seed}: unsolvable`);
        assert.equal(stepSokoban(s, moves).success, true);
      }
    }
  });

  test("the tool agent's program: sandboxed, the expert's prints the solver's moves, as worked out in-process", async () => {
    const sets = [
      { opts: SOKOBAN_BENCH, count: 200 },
      { opts: {}, count: 200 },
      { opts: { size: 8, wallProb: 0.2, reverseSteps: 60 }, count: 40 },
      { opts: { size: 16, wallProb: 0.1, reverseSteps: 300, minPushes: 4 }, count: 3 },
    ];
    const env = sokobanEnv();
    const states = sets.flatMap(({ opts, count }) => {
      const e = sokobanEnv(opts);
      return Array.from({ length: count }, (_, seed) => {
        const s = e.reset(seed);
        // Every other one after the solver's first move, so the program must read the room as it is now.
        const moved = seed % 2 ? stepSokoban(s, solveSokoban(s)!.slice(0, 1)).state : s;
        return moved.solved ? s : moved;
      });
    });
    const experts = states.map((s) => env.program!(s));
    assert.ok(experts.filter((c) => c.includes('+')).length >= 5, 'some rooms have the player on the goal');
    // Copies with errors a small agent makes, and rooms the routine must refuse.
    const bench = experts[0]!;
    const room = (rows: string[]): string => `console.log(solve(\`${rows.join('\n')}\`))`;
    const open17 = Array.from({ length: 17 }, (_, r) => (r === 0 || r === 16 ? '#'.repeat(17) : `#${' '.repeat(15)}#`));
    // The first `from` in the room (after the opening backtick) replaced by `to`.
    const edit = (code: string, from: string, to: string): string => {
      const i = code.indexOf(from, code.indexOf('`'));
      return code.slice(0, i) + to + code.slice(i + from.length);
    };
    const notRoom = 'not a room with one @, one $ and one goal';
    const refused = {
      'wrong character': [edit(bench, ' ', '_'), 'ok'],
      'box drawn as x': [edit(bench, '$', 'x'), notRoom],
      'two players': [edit(bench, ' ', '@'), notRoom],
      'no box': [edit(bench, '$', ' '), notRoom],
      'no goal': [edit(bench, '.', ' '), notRoom],
      'ragged rows': [edit(bench, '\n#', '\n'), 'ok'],
      'empty room': ['console.log(solve(``))', notRoom],
      unsolvable: [room(['#####', '#$  #', '#  .#', '# @ #', '#####']), 'no solution'],
      'too large': [room(open17.map((r, i) => (i === 8 ? `#@$${' '.repeat(12)}.#` : r))), 'room too large'],
      'another program': [bench.replace('console.log(', 'console.log("x"+'), 'ok'],
      'a substitution': [room(['#####', '#@$.#', '#${1}#', '#####']), 'ok'],
    };
    const worked = [
      room(['#####', '#@$.#', '#####']),
      room(['#####', '#+$ #', '#   #', '#####']),
      room(['####', '#@*#', '####']),
      room(['@ $ .']),
      `  \n${experts[5]}\n`,
    ];
    const flip = (code: string, at: number): string => {
      const i = code.indexOf('`') + 1 + at;
      const ch = { ' ': '#', '#': ' ' }[code[i]!] ?? code[i];
      return code.slice(0, i) + ch + code.slice(i + 1);
    };
    const flips = experts.slice(0, 30).flatMap((c, i) => [8, 15, 22].map((at) => flip(c, (at * (i + 1)) % 34)));
    const variants = [...Object.values(refused).map(([code]) => code!), ...worked, ...flips];
    const codes = [...experts, ...variants];
    // One sandboxed process runs the routine once and every program as a function body calling it, each after a
    // marker line.
    const script = `${env.programLibrary!.code}
      for (const [i, src] of ${JSON.stringify(codes)}.entries()) {
        console.log("@@" + i);
        try { new Function("solve", src)(solve); } catch { console.log("@@failed"); }
      }`;
    const run = await runSandboxed(script, { timeoutMs: 60_000, maxOutputBytes: 1 << 20 });
    assert.equal(run.outcome, 'ok', run.stderr);
    const outputs = run.stdout.split(/^@@\d+\n/m).slice(1);
    assert.equal(outputs.length, codes.length);
    experts.forEach((code, i) => {
      const moves = solveSokoban(states[i]!)!;
      assert.equal(outputs[i], `${JSON.stringify(moves)}\n`, `state ${i}:\n${code}`);
      assert.equal(env.programOutput!(code), outputs[i], `state ${i}`);
      assert.equal(stepSokoban(states[i]!, env.parseAction(outputs[i]!)).success, true, `state ${i}`);
    });
    const out = (code: string): string => outputs[codes.indexOf(code)]!;
    for (const [name, [code, printed]] of Object.entries(refused)) {
      assert.equal(env.programOutput!(code!), null, name);
      if (printed !== 'ok') assert.equal(out(code!), `${printed}\n`, name);
    }
    assert.equal(out(refused['another program'][0]!), `x${out(bench)}`);
    assert.deepEqual(
      worked.map((c) => env.programOutput!(c)),
      ['["R"]\n', '["D","R","R","U","L"]\n', '[]\n', '["R","R","R"]\n', out(experts[5]!)],
    );
    let known = 0;
    for (const code of [...worked, ...flips]) {
      const printed = env.programOutput!(code);
      if (printed === null) continue;
      known++;
      assert.equal(out(code), printed, code);
    }
    // Flips that turned floor into wall or wall into floor and changed the answer, still worked out.
    const changed = flips.filter((c, k) => ![null, out(experts[Math.floor(k / 3)]!)].includes(env.programOutput!(c)));
    assert.ok(known >= 60 && changed.length >= 10, `${known} worked out, ${changed.length} with other moves`);
  });
});

describe('Sudoku 4×4', () => {
  const env = sudokuEnv({ blanks: 8 });

  test('300 generated puzzles: unique solution that keeps the givens', () => {
    for (let seed = 0; seed < 300; seed++) {
      const { puzzle, solution } = env.reset(seed).instance;
      assert.equal(countSolutions([...puzzle], 3), 1, `seed ${seed}`);
      assert.equal(countSolutions([...solution], 3), 1);
      assert.ok(puzzle.every((v, i) => v === 0 || v === solution[i]));
      assert.equal(puzzle.filter((v) => v === 0).length, 8);
    }
  });

  test('hand-worked: bad format −1, a changed given −0.5, a repeat −0.5, partial credit, then solved +2', () => {
    const s = env.reset(3);
    const { puzzle, solution } = s.instance;
    assert.equal(stepSudoku(s, parseSudokuGrid('I think it is 1234')).reward, -1);
    const given = puzzle.findIndex((v) => v !== 0);
    const changed = [...solution];
    changed[given] = (solution[given]! % 4) + 1;
    assert.equal(stepSudoku(s, changed).reward, -0.5);
    const blanks = puzzle.flatMap((v, i) => (v === 0 ? [i] : []));
    const two = [...puzzle];
    two[blanks[0]!] = solution[blanks[0]!]!;
    two[blanks[1]!] = solution[blanks[1]!]!;
    const p = stepSudoku(s, two);
    close(p.reward, 2 / 8);
    assert.equal(p.done, false);
    const text = env.formatAction(solution);
    const done = stepSudoku(p.state, parseSudokuGrid(`Answer:\n${text}`));
    assert.equal(done.reward, 2);
    assert.equal(done.success, true);
    assert.equal(
      stepSudoku(s, parseSudokuGrid(JSON.stringify([0, 1, 2, 3].map((k) => solution.slice(4 * k, 4 * k + 4))))).reward,
      2,
    );
  });

  test('a solved puzzle ignores further answers: a second valid answer is not paid again', () => {
    const s = env.reset(3);
    const solved = stepSudoku(s, [...s.instance.solution]);
    assert.equal(solved.reward, 2);
    for (const again of [stepSudoku(solved.state, [...s.instance.solution]), stepSudoku(solved.state, null)]) {
      assert.deepEqual([again.reward, again.done, again.success], [0, true, true]);
      assert.deepEqual(again.state, solved.state);
    }
    assert.deepEqual(stepSudoku(s, null).parts, { noAction: -1 }, 'nothing parsable is the shared "no action"');
  });

  test('a repeated digit breaks the rules even when the givens are kept', () => {
    // A blank cell i gets the digit of a given j in its row: the givens are untouched, the row repeats a digit.
    const s = env.reset(5);
    const { puzzle } = s.instance;
    const sameRow = (i: number, j: number): boolean => i !== j && Math.floor(i / 4) === Math.floor(j / 4);
    const i = puzzle.findIndex((v, k) => v === 0 && puzzle.some((w, j) => w !== 0 && sameRow(k, j)));
    const j = puzzle.findIndex((w, k) => w !== 0 && sameRow(i, k));
    const bad = [...puzzle];
    bad[i] = puzzle[j]!;
    const r = stepSudoku(s, bad);
    assert.equal(r.reward, -0.5);
    assert.match(r.feedback, /repeats/);
    assert.deepEqual(r.state.grid, puzzle, 'a rejected grid leaves the state unchanged');
  });

  test('firstCompletion: hand-worked on the empty grid, the solution of a puzzle, null for a broken grid', () => {
    // Row by row, digits ascending: 1234, then 3 (1 is in column 0, 2 in the box), 4, 1, 2, and so on.
    assert.equal(env.formatAction(firstCompletion(Array(16).fill(0))!), '1234\n3412\n2143\n4321');
    const { puzzle, solution } = env.reset(7).instance;
    assert.deepEqual(firstCompletion([...puzzle]), solution);
    assert.equal(firstCompletion([1, 1, ...Array(14).fill(0)]), null);
  });

  test("the tool agent's program: sandboxed, the expert's prints the solution, as worked out in-process; copies with errors too", async () => {
    const states = [0, 1, 2, 3, 4, 5].map((seed) => (seed % 2 ? env : sudokuEnv({ blanks: 3 })).reset(seed));
    const experts = states.map((s) => env.program!(s));
    // Copies with errors a small agent makes: a digit changed (a repeat: no solution; or another completion), a given
    // lost (several completions: the first), a row short, a letter, and a different program.
    const at = (code: string, k: number, ch: string) => {
      const i = code.indexOf('`') + 1 + k;
      return code.slice(0, i) + ch + code.slice(i + 1);
    };
    const variants = [
      ...experts.flatMap((c, i) => [at(c, i % 4, String((i % 4) + 1)), at(c, 5 + (i % 4), '.'), at(c, 10, '4')]),
      experts[0]!.replace(/\n[1-4.]{4}\n/, '\n123\n'),
      at(experts[1]!, 0, 'x'),
      experts[2]!.replace('console.log(', 'console.log("x"+'),
    ];
    const { stdout, known } = await checkWorkedOut(env, experts, variants);
    states.forEach((s, i) => assert.deepEqual(env.parseAction(stdout[i]!), s.instance.solution, `state ${i}`));
    const printed = new Set(stdout.slice(experts.length));
    assert.equal(known, variants.length - 3, 'every copy in the template is worked out; the other three run');
    assert.ok(printed.has('no solution\n'), 'some copy breaks a rule');
    assert.ok(
      [...printed].some((o) => o.startsWith('not a 4x4')),
      "the short row gets the routine's sentence",
    );
  });
});

describe('math with a tool', () => {
  const env = mathEnv({ task: 'arith' });
  test('the boxed gold answer scores 1 and ends the episode; a wrong one 0; none parsed 0', () => {
    const s = env.reset(1);
    assert.equal(env.step(s, env.parseAction(`so \\boxed{${s.answer}}`)).reward, 1);
    assert.equal(env.step(s, env.parseAction(`\\boxed{${s.answer}1}`)).reward, 0);
    assert.equal(env.step(s, env.parseAction('no answer')).success, false);
  });
  test('tool output: the last line equal to the answer 1, another 0, a failed run −1', () => {
    assert.equal(toolOutputReward('42', 'working\n42\n', true), 1);
    assert.equal(toolOutputReward('42', '41', true), 0);
    assert.equal(toolOutputReward('42', '42', false), -1);
  });

  // Each kind of generated task, with knobs the math env accepts; `computes` says whether its expert program computes
  // (fraction has no expression; 9-digit products pass 2^53, so that arith prints the gold answer).
  const kinds = [
    { task: 'arith', difficulty: {}, computes: true },
    { task: 'arith', difficulty: { digits: 3, digits2: 1, operators: '*' }, computes: true },
    { task: 'arith', difficulty: { leadingZero: 1, operators: '+-*' }, computes: true },
    { task: 'arith', difficulty: { digits: 9, digits2: 9, operators: '*' }, computes: false },
    { task: 'expr', difficulty: {}, computes: true },
    { task: 'expr', difficulty: { operations: 5, maxOperand: 99 }, computes: true },
    { task: 'linear', difficulty: {}, computes: true },
    { task: 'linear', difficulty: { negative: 0 }, computes: true },
    { task: 'word', difficulty: {}, computes: true },
    { task: 'fraction', difficulty: {}, computes: false },
  ] as const;
  const numbersOf = (text: string): number[] => (text.match(/\d+/g) ?? []).map(Number);

  test("the tool agent's expert program computes the answer from the question's numbers; sandboxed it prints exactly the gold answer, as worked out", async () => {
    const cases = kinds.flatMap((k) => {
      const env = mathEnv({ task: k.task, difficulty: k.difficulty });
      return Array.from({ length: 100 }, (_, seed) => {
        const s = env.reset(seed);
        return { kind: `${k.task} ${JSON.stringify(k.difficulty)}`, computes: k.computes, s, code: env.program!(s) };
      });
    });
    // The experts run as one program, one line each (a sandboxed process per program would take minutes here);
    // three also run alone, as a tool agent's program runs.
    const all = cases.map((c) => c.code).join('\n');
    const alone = [0, 700, 900].map((i) => cases[i]!);
    const [batch, ...single] = await Promise.all(
      [all, ...alone.map((c) => c.code)].map((code) =>
        runSandboxed(code, { timeoutMs: 60_000, maxOutputBytes: 1 << 20 }),
      ),
    );
    assert.equal(batch!.outcome, 'ok', batch!.stderr);
    const lines = batch!.stdout.split('\n');
    assert.equal(lines.length, cases.length + 1, 'one line per program, then the final newline');
    cases.forEach(({ kind, computes, s, code }, i) => {
      const where = `${kind}, ${s.question} -> ${code}`;
      assert.equal(lines[i], s.answer, where);
      assert.ok(mathAnswerCorrect(s.answer, lines[i]!), where);
      assert.equal(mathProgramOutput(code), `${lines[i]}\n`, where);
      assert.equal(s.expression !== null, computes, where);
      if (!computes) return assert.equal(code, `console.log(${JSON.stringify(s.answer)})`, where);
      assert.equal(code, `console.log(${s.expression})`, where);
      // Computed, not copied: no string literal, and every number in it is one the question states.
      assert.doesNotMatch(code, /"/, where);
      const stated = new Set(numbersOf(s.question));
      assert.ok(
        numbersOf(s.expression!).every((n) => stated.has(n)),
        where,
      );
    });
    single.forEach((run, i) => {
      assert.deepEqual([run.outcome, run.stdout], ['ok', `${alone[i]!.s.answer}\n`]);
      assert.equal(toolOutputReward(alone[i]!.s.answer, run.stdout, true), 1);
    });
  });

  test("programs near the expert's template: the worked-out output is the sandbox's, and what JavaScript reads otherwise goes to the sandbox", async () => {
    const env = mathEnv({ task: 'linear' });
    const experts = Array.from({ length: 12 }, (_, seed) => env.program!(env.reset(seed)));
    // Copies with the errors a small agent makes: a character dropped, an operator or digit inserted.
    const edits = experts.flatMap((code, i) => {
      const at = 12 + (i % (code.length - 13));
      return [
        code.slice(0, at) + code.slice(at + 1),
        ...['-', '*', '0', ' ('].map((x) => code.slice(0, at) + x + code.slice(at)),
      ];
    });
    const hand = [
      '07',
      '08',
      '-0',
      '0*-1',
      '2--3',
      '2- -3',
      '- - -5',
      '1/0',
      '0/0',
      '1/3',
      '2**3',
      '2//3',
      '2/*3*/',
      '(1+2',
      '1+2)',
      '1 2',
      '',
      '(((7)))',
      '2*(3-10)',
      '99999999999999999999',
      '"5/12"',
      '"abc"',
    ].map((e) => `console.log(${e})`);
    const codes = [...hand, ...edits];
    // One sandboxed process runs every program as a function body, which JavaScript reads as the sandbox's script
    // (both sloppy mode), each after a marker line.
    const script = `for (const [i, src] of ${JSON.stringify(codes)}.entries()) {
      console.log("@@" + i);
      try { new Function(src)(); } catch { console.log("@@failed"); }
    }`;
    const run = await runSandboxed(script, { timeoutMs: 60_000 });
    assert.equal(run.outcome, 'ok', run.stderr);
    const outputs = run.stdout.split(/^@@\d+\n/m).slice(1);
    assert.equal(outputs.length, codes.length);
    let known = 0;
    codes.forEach((code, i) => {
      const out = mathProgramOutput(code);
      if (out === null) return;
      known++;
      assert.equal(outputs[i], out, code);
    });
    const refused = ['07', '08', '2--3', '2**3', '2//3', '2/*3*/', '(1+2', '1+2)', '1 2', '', '"abc"'];
    for (const e of refused) assert.equal(mathProgramOutput(`console.log(${e})`), null, e);
    assert.deepEqual(
      ['-0', '0*-1', '2- -3', '1/0', '0/0', '1/3'].map((e) => mathProgramOutput(`console.log(${e})`)),
      ['-0\n', '-0\n', '5\n', 'Infinity\n', 'NaN\n', `${1 / 3}\n`],
    );
    assert.ok(known > hand.length - refused.length && known < codes.length, `${known} of ${codes.length} worked out`);
  });
});
