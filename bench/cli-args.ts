/** The command-line options of the benches that take named values (bench:rl, bench:step). */
const argv = process.argv.slice(2);

/** The value of `--NAME=VALUE` or `--NAME VALUE`; undefined when absent. */
export function option(name: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
}

/** A whole number ≥ `least` (default 1) from `--NAME=N`, or `fallback` when absent; anything else is refused. */
export function count(name: string, fallback: number, least = 1): number {
  const v = Number(option(name) ?? fallback);
  if (!Number.isInteger(v) || v < least)
    throw new Error(`--${name}=N needs a whole number ≥ ${least}, got ${option(name)}`);
  return v;
}
