// The sandbox contains a hostile program, not only a careless one: it cannot signal the trainer or any other process,
// reach a Unix socket, outlive a SIGKILLed trainer, fill memory through its scratch folder, load native code or run
// as root; each attempt ends as 'denied' or 'timeout'. And a machine lacking a layer is refused, naming it.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { SANDBOX_UID } from '../src/sandbox/isolation.js';
import { runSandboxed, SandboxLimitsSchema } from '../src/sandbox/run-code.js';

// Programs that end by themselves get a generous wall-time limit, so a busy machine cannot turn them into time-outs.
const SLOW_OK = { timeoutMs: 60_000 };
const RUN_CODE = fileURLToPath(new URL('../src/sandbox/run-code.js', import.meta.url));

/** True while `pid` is a live (not zombie) process. */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** The PIDs of the children of `pid` (via /proc/PID/task/TID/children). */
function children(pid: number): number[] {
  let tasks: string[] = [];
  try {
    tasks = readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
  return tasks.flatMap((t) => {
    try {
      return readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

/** The PIDs of every descendant of `pid`. */
function descendants(pid: number): number[] {
  return children(pid).flatMap((c) => [c, ...descendants(c)]);
}

/** The command line of `pid`, or '' once it is gone. */
function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return '';
  }
}

/** Polls `check` every 50 ms until it holds or `ms` pass; returns whether it held. */
async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await new Promise((r) => setTimeout(r, 50)))
    if (check()) return true;
  return check();
}

describe('sandbox containment', () => {
  test('the program runs as an unprivileged uid, in its own PID namespace, seeing only its scratch folder', async () => {
    const r = await runSandboxed(
      'console.log(process.getuid(), process.pid, process.ppid, require("fs").readdirSync(__dirname).join(","))',
      SLOW_OK,
    );
    assert.equal(r.outcome, 'ok', r.stderr);
    const [uid, pid, ppid, files] = r.stdout.trim().split(' ');
    assert.equal(Number(uid), process.getuid?.() === 0 ? SANDBOX_UID : process.getuid?.());
    assert.ok(Number(pid) < 10 && Number(ppid) < 10, `PIDs of a fresh namespace, got ${pid} ${ppid}`);
    assert.equal(files, 'main.cjs');
  });

  test('signals to the trainer, to another process and to every process are refused (denied)', async () => {
    let usr2 = 0;
    const onUsr2 = (): void => void usr2++;
    process.on('SIGUSR2', onUsr2);
    const other: ChildProcess = spawn('sleep', ['120'], { stdio: 'ignore' });
    try {
      for (const [target, signal] of [
        [process.pid, 'SIGUSR2'],
        [process.pid, 'SIGKILL'],
        [other.pid!, 'SIGKILL'],
        [-1, 'SIGKILL'],
      ] as const) {
        const r = await runSandboxed(`process.kill(${target}, "${signal}"); console.log("sent")`, SLOW_OK);
        assert.equal(r.outcome, 'denied', `kill(${target}, ${signal}): ${r.outcome} ${r.stdout} ${r.stderr}`);
      }
      assert.equal(usr2, 0, 'the trainer got no signal');
      assert.ok(alive(other.pid!), 'the other process lives');
    } finally {
      process.off('SIGUSR2', onUsr2);
      other.kill('SIGKILL');
    }
  });

  test('Unix sockets of the host, on the filesystem or abstract, are unreachable (denied)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'hacrl-socket-'));
    const path = join(dir, 'listener.sock');
    let connections = 0;
    const servers = [createServer((s) => void (connections++, s.end('reached'))), createServer((s) => s.end())];
    servers[1]!.on('connection', () => void connections++);
    const abstract = `\0hacrl-test-${process.pid}`;
    await new Promise<void>((ok) => servers[0]!.listen(path, ok));
    await new Promise<void>((ok) => servers[1]!.listen(abstract, ok));
    chmodSync(dir, 0o777);
    chmodSync(path, 0o777);
    try {
      for (const target of [path, abstract]) {
        const r = await runSandboxed(
          `const s = require("net").connect(${JSON.stringify(target)}); s.on("data", (d) => console.log(String(d)));`,
          SLOW_OK,
        );
        assert.equal(r.outcome, 'denied', `${JSON.stringify(target)}: ${r.outcome} ${r.stdout} ${r.stderr}`);
      }
      assert.equal(connections, 0);
    } finally {
      for (const s of servers) s.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a program does not outlive a SIGKILLed trainer, and leaves no scratch folder on the host', async () => {
    const before = new Set(readdirSync(tmpdir()));
    // A trainer stand-in: starts an endless sandboxed program with a wall-time limit far beyond this test.
    const trainer = spawn(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `const { runSandboxed } = await import(${JSON.stringify(RUN_CODE)});
         await runSandboxed('for (;;) {}', { timeoutMs: 600000 });`,
      ],
      { stdio: 'ignore' },
    );
    try {
      // The program is running once the trainer's launcher has three generations below it: bwrap, its init, node.
      const program = (): number[] => descendants(trainer.pid!).filter((p) => cmdline(p).includes('/scratch/main.cjs'));
      assert.ok(await waitFor(() => program().length >= 3, 30_000), 'the sandboxed program started');
      const tree = descendants(trainer.pid!);
      trainer.kill('SIGKILL');
      assert.ok(await waitFor(() => tree.every((p) => !alive(p)), 10_000), `still alive: ${tree.filter(alive)}`);
    } finally {
      trainer.kill('SIGKILL');
    }
    const added = readdirSync(tmpdir()).filter((f) => !before.has(f) && f.startsWith('hacrl-sandbox'));
    assert.deepEqual(added, []);
  });

  test('programs start from one small launcher process, never forked from the trainer; a killed launcher fails its runs, and the next run starts another', async () => {
    const launchers = (): number[] =>
      children(process.pid).filter((p) => cmdline(p).includes('--hacrl-sandbox-launcher'));
    const isProgram = (p: number): boolean => cmdline(p).includes('/scratch/main.cjs');
    const run = runSandboxed('setTimeout(() => console.log("late"), 60000)', { timeoutMs: 120_000 });
    assert.ok(await waitFor(() => descendants(process.pid).filter(isProgram).length >= 3, 30_000), 'it started');
    const [launcher, ...more] = launchers();
    assert.ok(launcher !== undefined && more.length === 0, `one launcher: ${launchers()}`);
    assert.deepEqual(children(process.pid).filter(isProgram), [], 'nothing of the program is a child of the trainer');
    assert.equal(children(launcher).filter(isProgram).length, 1, 'bubblewrap is a child of the launcher');
    // Field 5 of /proc/PID/stat (after the parenthesised name) is the process group.
    const group = (pid: number): string => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ')[2]!;
    assert.notEqual(group(launcher), group(process.pid), 'a Ctrl-C to the trainer does not reach the launcher');
    const tree = descendants(launcher);
    process.kill(launcher, 'SIGKILL');
    await assert.rejects(run, /sandbox: the launcher process ended \(SIGKILL\)/);
    assert.ok(await waitFor(() => tree.every((p) => !alive(p)), 10_000), `still alive: ${tree.filter(alive)}`);
    const again = await runSandboxed('console.log(3)', { ...SLOW_OK, reuseResults: false });
    assert.equal(again.stdout, '3\n');
    assert.notDeepEqual(launchers(), [launcher]);
  });

  test('filling the scratch folder stops at its quota (denied), and the quota is the total, not per file', async () => {
    const fill =
      'const fs = require("fs"); const b = Buffer.alloc(1 << 20); for (let i = 0; i < 200; i++) fs.writeFileSync(__dirname + "/f" + i, b);';
    const r = await runSandboxed(fill, SLOW_OK);
    assert.equal(r.outcome, 'denied', r.stderr);
    assert.match(r.stderr, /ENOSPC/);
    const small = await runSandboxed(
      'const fs = require("fs"); fs.writeFileSync(__dirname + "/a", Buffer.alloc(300 << 10)); fs.writeFileSync(__dirname + "/b", Buffer.alloc(300 << 10)); console.log("two")',
      { ...SLOW_OK, scratchBytes: 512 << 10 },
    );
    assert.equal(small.outcome, 'denied', small.stderr);
  });

  test('native addons and WebAssembly memory are refused (denied)', async () => {
    for (const code of [
      'require("fs").writeFileSync(__dirname + "/x.node", "x"); require(__dirname + "/x.node");',
      'process.dlopen({ exports: {} }, "/usr/lib/x86_64-linux-gnu/libc.so.6");',
      'new WebAssembly.Memory({ initial: 1 });',
    ]) {
      const r = await runSandboxed(code, SLOW_OK);
      assert.equal(r.outcome, 'denied', `${code}: ${r.outcome} ${r.stderr.slice(0, 300)}`);
    }
  });

  test('limits past their bounds are refused naming the field', () => {
    assert.throws(() => SandboxLimitsSchema.parse({ timeoutMs: 2 ** 31 }), /sandbox\.timeoutMs is at most 600000/);
    assert.throws(() => SandboxLimitsSchema.parse({ scratchBytes: 2 ** 40 }), /sandbox\.scratchBytes is at most/);
  });

  test('a machine without bubblewrap is refused, naming it and how to install it', async () => {
    // PATH holds every tool the sandbox uses except bwrap.
    const bin = mkdtempSync(join(tmpdir(), 'hacrl-nobwrap-'));
    try {
      for (const tool of ['prlimit', 'setpriv', 'true', 'env']) symlinkSync(`/usr/bin/${tool}`, join(bin, tool));
      const child = spawn(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `const { runSandboxed } = await import(${JSON.stringify(RUN_CODE)});
           await runSandboxed('console.log(1)').then(() => console.log('ran'), (e) => console.log(e.message));`,
        ],
        { env: { PATH: bin }, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      await new Promise((ok) => child.on('close', ok));
      assert.match(out, /sandbox: bubblewrap does not run .*apt-get install bubblewrap/);
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});
