// Runs when `node-gyp rebuild` fails during `npm install`: the package stays usable on the pure-TypeScript backend.
console.warn(
  'hacrl: the native addon did not build (a C compiler, make and python3 are needed); ' +
    'hacrl will run on the much slower pure-TypeScript backend. Install build-essential and run `npm run build:native`.',
);
