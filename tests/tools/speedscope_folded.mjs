// SPDX-License-Identifier: MIT
// Reads a folded-stacks file with speedscope's own importer and prints what
// it read as JSON: [{"stack": [frame names, root first], "weight": n}, ...].
//
// usage: node speedscope_folded.mjs SPEEDSCOPE_DIR FILE
//   SPEEDSCOPE_DIR: the npm package (scripts/install-test-deps.sh puts it in
//   build/node/node_modules/speedscope).
//
// speedscope ships one browser bundle; its folded-stacks parser (the one its
// "collapsed stacks" import runs) is a plain function in it, found by the
// regular expression it matches each line with, and run here on the file.
// Exit 0 read, 1 the parser was not found or failed.
import fs from 'node:fs';
import path from 'node:path';

const [dir, file] = process.argv.slice(2);
if (!dir || !file) {
  console.error('usage: node speedscope_folded.mjs SPEEDSCOPE_DIR FILE');
  process.exit(2);
}
const release = path.join(dir, 'dist', 'release');
const bundle = fs.readdirSync(release).find((n) => /^speedscope-.*\.js$/.test(n));
const src = bundle ? fs.readFileSync(path.join(release, bundle), 'utf8') : '';
// function NAME(ARG){let A=[];for(let B of ARG.splitLines()){let C=/^(.*) (\d+)$/gm.exec(B)...
const head = /function ([\w$]+)\(([\w$]+)\)\{let [\w$]+=\[\];for\(let [\w$]+ of [\w$]+\.splitLines\(\)\)\{let [\w$]+=\/\^\(\.\*\) \(\\d\+\)\$\/gm\.exec/;
const m = head.exec(src);
if (!m) {
  console.error(`speedscope_folded: no folded-stacks parser in ${bundle || release}`);
  process.exit(1);
}
// The function's text: from its head to the brace that closes its body.
let depth = 0;
let end = -1;
for (let i = src.indexOf('{', m.index); i < src.length; i++) {
  if (src[i] === '{') depth++;
  else if (src[i] === '}' && --depth === 0) {
    end = i + 1;
    break;
  }
}
const parse = new Function(`${src.slice(m.index, end)}; return ${m[1]};`)();
const text = fs.readFileSync(file, 'utf8');
// speedscope hands its parsers a text file object; this one only splits lines.
const rows = parse({ splitLines: () => text.split('\n') });
console.log(JSON.stringify(rows.map((r) => ({ stack: r.stack.map((f) => f.name), weight: r.duration }))));
