const { ComputeEngine } = await import('@cortex-js/compute-engine');
const ce = new ComputeEngine();
const a = process.argv[2];
const s=performance.now();
let r; try { const A=ce.parse(a); const B=ce.parse(process.argv[3] ?? 'x'); console.log(JSON.stringify(A.json)); r = [A.isIdenticallyEqual(B), A.isEqual(B)]; } catch(e) { r=e.message }
console.log(a, JSON.stringify(r), (performance.now()-s).toFixed(1));
